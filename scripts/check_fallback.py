"""The fallback detector against the simulated host: no fallback where there is none, the share where there is.

Runs the shipped workload against the default simulated host for each seed, once with no fallback and once with
``--sim-fallback 0.3:default`` (the same profile on a second engine, so the two routes' speeds barely differ and
only the served identity can tell them apart). For each run it prints what the report says and checks it: with
no fallback, neither a fallback nor "two speed modes"; with one, the fallback share against the truth log's
(within 3 points of the share the host's truth log says it served, which is drawn around 0.3) and the route it
was tied to. Exit 1 when a check fails.

    python scripts/check_fallback.py [--seeds 5] [--tool-time recorded] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def _run(out: Path, seed: int, tool_time: str, fallback: str | None) -> tuple[dict, str, list[dict]]:
    run = out / f"run-{seed}-{'fb' if fallback else 'none'}.jsonl"
    cmd = [sys.executable, "-m", "replay", "run", "--seed", str(seed), "--tool-time", tool_time, "--out", str(run)]
    if fallback:
        cmd += ["--sim-fallback", fallback]
    subprocess.run([*cmd, "--json"], check=True, capture_output=True)
    summary = json.loads(subprocess.run([sys.executable, "-m", "replay", "report", str(run), "--json"],
                                        check=True, capture_output=True).stdout)  # fmt: skip
    text = subprocess.run([sys.executable, "-m", "replay", "report", str(run)], check=True, capture_output=True)
    truth = [json.loads(line) for line in run.with_suffix(".truth.jsonl").read_text().splitlines()]
    return summary, text.stdout.decode(), truth


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--tool-time", default="recorded")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="check-fallback-"))
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    print("seed | fallback asked | split by load | fallback found | share (truth) | by | two speed modes printed")
    for seed in range(args.seeds):
        for fallback in (None, "0.3:default"):
            s, text, truth = _run(out, seed, args.tool_time, fallback)
            fb = s.get("fallback")
            ok = [t["route"] for t in truth if t["status"] == "ok"]
            true_share = ok.count("fallback:default") / len(ok)
            two = "two speed modes" in text
            if fallback is None:
                good = fb is None and not two and "fallback" not in text
            else:
                # within 3 points of the share the host served (exactly it: every call says its route); the host's
                # own draw strays from 0.3 by chance (a binomial over a few hundred calls)
                good = (
                    fb is not None
                    and abs(fb["share"] - true_share) <= 0.03
                    and fb["served"].get("route") == "fallback:default"
                )
            failed += not good
            found = "-" if fb is None else f"{100 * fb['share']:.1f}% ({100 * true_share:.1f}%)"
            by = "-" if fb is None else ", ".join(fb["by"])
            split = s["speed_by_load"]["split"]
            print(f"{seed} | {fallback or 'none'} | {split} | {fb is not None} | {found} | {by} | {two}"
                  + ("" if good else "  <- FAILED"))  # fmt: skip
    print(f"run files in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
