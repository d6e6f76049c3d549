"""Client memory at long contexts: the peak RSS of ``replay run`` with N sessions whose contexts grow to T tokens.

Builds synthetic trajectories in a temporary directory (never in the repository): each is a small system prompt and
task, then ``--turns - 1`` calls that each append one user message of the same size (one cl100k token per word,
``replay.workload.importers._blocks``), so the last call carries about ``--context`` tokens. ``--distinct``
trajectories (default: one per session, as 64 real agents would have) are replayed by ``--sessions`` sessions,
one task each; fewer distinct ones share the workload's messages and measure only what each session adds.

The host is ``scripts/peer_stub.py`` (its own process, 127.0.0.1 only) in its ``timed`` mode: it never tokenizes a
prompt, answers ``--answer-tokens`` tokens with its first token ``--ttft`` s after a request arrived, so every
session holds its request while the others send theirs. It serves chat and completions; a Responses or Anthropic
request it reads whole and answers 404, so those runs measure rendering and sending (every call then fails, and the
session goes on with the recorded answer, as ``--on-error continue`` does). ``replay run`` runs as a subprocess
with no tool pauses; its VmRSS is sampled from /proc every ``--every`` s. Prints JSON: RSS once the workload is
loaded (the run file's header is written), the peak, the load and run times, the calls and their errors.

    python scripts/bench_context_memory.py [--context 1M] [--sessions 64] [--turns 8] [--distinct 64] [--api chat]

Linux only (/proc). Everything it starts is stopped on every exit path; ``--max-rss-gb`` stops a run that grows
past it (the result then says so).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

import orjson
import peer_stub
from soak_memory import watch_rss

REPO = Path(__file__).resolve().parents[1]
SYSTEM_TOKENS = 400
TASK_TOKENS = 100
ANSWER_WORDS = 12


def tokens_arg(text: str) -> int:
    """``200k``, ``1M`` or a plain number of tokens."""
    text = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * scale)


def write_trajectory(path: Path, index: int, context: int, turns: int) -> None:
    """One trajectory whose last call carries about ``context`` tokens (the loader's count)."""
    from replay.workload.importers._blocks import BlockText

    text = BlockText("bench-context-memory")
    growth = max((context - SYSTEM_TOKENS - TASK_TOKENS) // max(turns - 1, 1) - ANSWER_WORDS - 8, 1)
    with path.open("wb") as fh:
        fh.write(orjson.dumps({"format": "replay.trajectory/1", "id": f"long-{index}"}) + b"\n")
        first = [
            {"role": "system", "content": "You are a coding agent." + text.filler("system", SYSTEM_TOKENS)},
            {"role": "user", "content": f"Task {index}:" + text.filler(f"task {index}", TASK_TOKENS)},
        ]
        for turn in range(turns):
            append = first if turn == 0 else [{"role": "user", "content": text.filler(f"{index} {turn}", growth)}]
            answer = text.filler(f"answer {index} {turn}", ANSWER_WORDS)
            line = {"append": append, "output": {"content": answer}, "output_tokens": 16, "tool_time_s": 0}
            fh.write(orjson.dumps(line) + b"\n")


def run_client(args: argparse.Namespace, work: Path, port: int) -> dict:
    """``replay run`` over the trajectories, its RSS sampled until it exits (or passes ``--max-rss-gb``)."""
    out = work / "run.jsonl"
    cmd = [sys.executable, "-m", "replay", "run", str(work / "trajectories"), "--host", f"http://127.0.0.1:{port}/v1",
           "--model", "stub", "--api", args.api, "-c", str(args.sessions), "--tasks", str(args.sessions),
           "--tool-time", "none", "--retries", "0", "--out", str(out), "--quiet", *args.client_arg]  # fmt: skip
    t0 = time.monotonic()
    peak = 0.0
    loaded: tuple[float, float] | None = None
    over = False

    def sample(rss: float | None) -> bool:
        nonlocal peak, loaded, over
        mb = rss or 0.0
        peak = max(peak, mb)
        if loaded is None and out.exists() and out.stat().st_size > 0:
            loaded = (time.monotonic() - t0, mb)  # the header is written once the workload is loaded
        over = mb > args.max_rss_gb * 1024
        return over

    code = watch_rss(cmd, work / "client.stderr", args.every, sample, cwd=REPO)
    elapsed = time.monotonic() - t0
    if not over and code not in (0, 1, 2):  # 1, 2: the verdict (a refusing stub fails every call)
        err = (work / "client.stderr").read_text(errors="replace")
        raise SystemExit(f"replay run exited {code}: {err[-2000:]}")
    return {"peak": peak, "loaded": loaded, "elapsed": elapsed, "over": over, "out": out, "exit": code}


def calls(out: Path) -> dict:
    """Calls made and failed, and the largest prompt sent (the loader's estimate), from the run file."""
    made = failed = largest = 0
    errors: dict[str, int] = {}
    with contextlib.suppress(FileNotFoundError), out.open("rb") as fh:
        for line in fh:
            rec = orjson.loads(line)
            if rec.get("type") != "request":
                continue
            made += 1
            largest = max(largest, rec.get("prompt_tokens_est") or 0)
            if rec.get("error"):
                failed += 1
                errors[rec["error"]] = errors.get(rec["error"], 0) + 1
    return {"calls": made, "failed": failed, "errors": errors, "largest_prompt_tokens_est": largest}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--context", type=tokens_arg, default=1_000_000, help="tokens of the last call (200k, 1M)")
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--turns", type=int, default=8, help="calls per trajectory")
    ap.add_argument("--distinct", type=int, help="distinct trajectories (default: one per session)")
    ap.add_argument("--api", choices=("chat", "completions", "responses", "anthropic"), default="chat",
                    help="chat and completions are answered; the others read whole, then refused (404)")  # fmt: skip
    ap.add_argument("--client-arg", action="append", default=[], help="one more argument for replay run, repeatable "
                    "(e.g. --client-arg=--cache-control --client-arg=auto)")  # fmt: skip
    ap.add_argument("--ttft", type=float, default=0.5, help="the stub's first-token delay, seconds")
    ap.add_argument("--answer-tokens", type=int, default=16)
    ap.add_argument("--every", type=float, default=0.2, help="seconds between RSS samples")
    ap.add_argument("--max-rss-gb", type=float, default=12.0, help="stop the client past this RSS")
    ap.add_argument("--keep", help="directory to build in and keep (default: a temporary one, removed)")
    args = ap.parse_args()
    distinct = args.distinct or args.sessions
    with tempfile.TemporaryDirectory(prefix="bench-context-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        (work / "trajectories").mkdir(parents=True, exist_ok=True)
        for i in range(distinct):
            write_trajectory(work / "trajectories" / f"long-{i:03d}.jsonl", i, args.context, args.turns)
        size = sum(p.stat().st_size for p in (work / "trajectories").iterdir())
        stub = ("--mode", "timed", "--tokens", str(args.answer_tokens), "--ttft", str(args.ttft), "--itl", "0.005")
        with peer_stub.started(*stub) as (_, port):
            res = run_client(args, work, port)
        result = {
            "context_tokens": args.context,
            "sessions": args.sessions,
            "distinct_trajectories": distinct,
            "turns": args.turns,
            "api": args.api,
            "client_args": args.client_arg,
            "workload_mb": round(size / 2**20, 1),
            "rss_mb_after_load": round(res["loaded"][1], 1) if res["loaded"] else None,
            "load_s": round(res["loaded"][0], 1) if res["loaded"] else None,
            "rss_mb_peak": round(res["peak"], 1),
            "stopped_over_max_rss": res["over"],
            "elapsed_s": round(res["elapsed"], 1),
            "client_exit": res["exit"],
            **calls(res["out"]),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
