"""Every command of replay once, small and fast, as a new user runs it: no traceback anywhere, and where the install
lacks an extra, a one-line error that names it.

CI runs it in a fresh venv with the core install only (``pip install .``, no extras: ``.ci/run``), and the test
suite runs it in a core-only environment made from the test venv (tests/run/test_core_install.py). It uses the
standard library only, so it runs in any of them.

    python scripts/smoke_commands.py [--replay 'python -m replay'] [--keep DIR]

Prints one line per step (exit code, seconds, what was checked) and exits 1 when any step failed.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = ROOT / "docs" / "claims-example.toml"
WORKLOAD = ROOT / "trajectories" / "coding-agent-default.jsonl"
EXTRA = "agentic-replay[plots]"  # what a picture needs, as every such error names it
QUICK = ["--sim-profile", "instant", "--tool-time", "none"]
STUDY = ["--virtual", "--window", "4s", "--warmup", "2s", "-q"]


@dataclass
class Step:
    name: str
    args: list[str]
    extra: str | None = None  # the extra this step needs: without it, exit code 1 naming it is the pass
    codes: tuple[int, ...] = (0,)


def steps(work: Path) -> list[Step]:
    run, soak, log = (str(work / name) for name in ("run.jsonl", "soak.jsonl", "requests.jsonl"))
    sweep_br, hist = str(work / "sweep-br.json"), str(work / "nights.db")
    return [
        Step("--help", ["--help"]),
        Step("run", ["run", "-q", "-c", "2", "--tasks", "2", *QUICK, "--out", run]),
        Step(
            "run --json (windows)",
            ["run", "-q", "--json", "-c", "2", "--duration", "4", "--window", "2", *QUICK, "--out", soak],
        ),
        Step("report", ["report", run]),
        Step("report --json", ["report", run, "--json"]),
        Step("report --csv", ["report", run, "--csv", str(work / "csv")]),
        Step("report --html", ["report", run, "--html", str(work / "run.html")], extra="plots"),
        Step("report --from --to", ["report", soak, "--from", "0", "--to", "4"]),
        Step("compare", ["compare", run, run]),
        Step("compare --html", ["compare", run, run, "--html", str(work / "c.html")], extra="plots"),
        Step("sweep --virtual", ["sweep", "-c", "1,2", *STUDY, "--out", str(work / "sweep")]),
        Step("report sweep.json", ["report", str(work / "sweep" / "sweep.json")]),
        Step("export --format llm-d", ["export", run, "--format", "llm-d", "-o", str(work / "br.json")]),
        Step("export sweep.json", ["export", str(work / "sweep" / "sweep.json"), "--format", "llm-d", "-o", sweep_br]),
        Step(
            "sweep --virtual --html",
            ["sweep", "-c", "1", *STUDY, "--out", str(work / "sweep2"), "--html", str(work / "sweep.html")],
            extra="plots",
        ),
        Step(
            "capacity --virtual",
            ["capacity", "--slo", "ttft_p95<=5s", "--max", "2", *STUDY, "--out", str(work / "capacity")],
        ),
        Step("claims verify --virtual", ["claims", "verify", str(CLAIMS), *STUDY]),
        Step("import", ["import", "--from", "openai-log", log, "-o", str(work / "imported.jsonl"), "-q"]),
        Step("inspect", ["inspect", str(work / "imported.jsonl")]),
        Step("inspect --json", ["inspect", str(WORKLOAD), "--json"]),
        Step("inspect --plot", ["inspect", str(WORKLOAD), "--plot", str(work / "ctx.png")], extra="plots"),
        Step("synth", ["synth", "--profile", "coding-agent", "-n", "2", "-o", str(work / "synth.jsonl")]),
        Step("sim --list-profiles", ["sim", "--list-profiles"]),
        Step("probe --help", ["probe", "--help"]),
        Step(
            "run --ray (no ray)",
            ["run", "-q", "--ray", "auto", "--tasks", "1", *QUICK, "--out", str(work / "ray.jsonl")],
            extra="ray",
        ),
        Step("history add", ["history", "add", run, soak, "--file", hist]),
        Step("history list", ["history", "list", "--file", hist]),
        Step("history show --json", ["history", "show", "--file", hist, "--json"]),  # no change points: one line says
        Step(
            "run --history-file",
            ["run", "-q", "--tasks", "1", *QUICK, "--out", str(work / "gated.jsonl"), "--history-file", hist],
            extra="history",
        ),
    ]


def write_log(path: Path) -> None:
    """A two-call OpenAI request log (the importer's simplest format)."""
    first = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "Fix the failing test."}]
    answer = {"role": "assistant", "content": "Reading the test first."}
    second = [*first, answer, {"role": "user", "content": "It fails on line 3."}]
    lines = [
        {"session_id": "s1", "messages": first, "response": answer, "timestamp": 1000.0, "end_time": 1001.0},
        {"session_id": "s1", "messages": second, "response": {"role": "assistant", "content": "Fixed it."},
         "timestamp": 1003.0, "end_time": 1004.5},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def check(step: Step, code: int, out: str, err: str) -> str | None:
    """Why the step failed, or None."""
    if "Traceback (most recent call last)" in out + err:
        return "a traceback"
    if code in step.codes:
        return None
    if step.extra and code == 1:
        lines = [line for line in err.strip().splitlines() if line.strip()]
        if len(lines) == 1 and f"agentic-replay[{step.extra}]" in lines[0]:
            return None  # the extra is not installed, and the error says which to install
        return f"exit code 1 without one line naming agentic-replay[{step.extra}]: {err.strip()[-300:]!r}"
    return f"exit code {code}: {err.strip()[-300:]!r}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay", default="replay", help="How to start replay (default: the console script).")
    parser.add_argument("--keep", type=Path, help="Work in this directory and keep it (default: a temporary one).")
    parser.add_argument("--only", action="append", help="Run only the steps of these names (repeatable).")
    args = parser.parse_args()
    base = shlex.split(args.replay)
    with tempfile.TemporaryDirectory(prefix="replay-smoke-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        write_log(work / "requests.jsonl")
        failed = 0
        for step in steps(work):
            if args.only and step.name not in args.only:
                continue
            t0 = time.perf_counter()
            done = subprocess.run([*base, *step.args], cwd=work, capture_output=True, text=True, timeout=600)
            why = check(step, done.returncode, done.stdout, done.stderr)
            failed += why is not None
            took = time.perf_counter() - t0
            print(f"{'ok  ' if why is None else 'FAIL'} {step.name:<28} exit {done.returncode} {took:6.1f} s"
                  + (f"  {why}" if why else ""), flush=True)  # fmt: skip
    print(f"{failed} of {len(steps(Path()))} steps failed" if failed else "every step passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
