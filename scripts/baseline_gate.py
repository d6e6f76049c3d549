"""The nightly baseline gate on real runs: does it flag a host 30 % slower, and pass the same host against itself?

For each seed, three runs against the embedded simulated host, each a "night" of ``--windows`` full windows
(``--window`` seconds each, no tool time, ``--concurrency`` sessions): last night on the ``fast`` profile; tonight on
the same profile with another seed (``--baseline`` last night: it must pass); tonight on a copy of ``fast`` whose
steps all take 1/0.7 as long (bandwidth and FLOP/s at 70 %: 30 % less throughput; it must be flagged). Prints one
line per night and the counts of outcomes as JSON, for docs/benchmarks.md (tests/verdict/test_baseline_gate.py
checks the same counts on modelled nights in a second).

    python scripts/baseline_gate.py [--seeds 5] [--windows 20] [--window 2] [--concurrency 4] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SLOW = 'base = "fast"\nname = "fast-70"\nmem_efficiency = 0.7\nmfu = 0.7\n'


def night(out: Path, args: argparse.Namespace, seed: int, extra: list[str]) -> dict:
    duration = (args.windows + 1) * args.window  # the first window is the warm-up: one more than asked
    window = f"{args.window:g}"
    cmd = [sys.executable, "-m", "replay", "run", "-c", str(args.concurrency), "--tool-time", "none", "--duration",
           f"{duration:g}", "--warmup", window, "--window", window, "--seed", str(seed), "--json", "-q",
           "--out", str(out), *extra]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration * 4 + 120)
    if done.returncode not in (0, 2, 3) or not done.stdout:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr[-1000:]}")
    summary = json.loads(done.stdout)
    base = summary.get("baseline") or {}
    rows = {r["figure"]: r for r in base.get("figures") or ()}
    tp = rows.get("throughput.total_tps") or {}
    return {
        "exit": done.returncode,
        "regressed": base.get("regressed"),
        "unjudged": base.get("unjudged"),
        "total_tps": summary["throughput"]["total_tps"],
        "change": tp.get("change"),
        "allowed": tp.get("allowed"),
        "noise_windows": tp.get("noise_windows"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--windows", type=int, default=20)
    ap.add_argument("--window", type=float, default=2.0)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--keep", type=Path, help="keep the run files here (default: a temporary directory)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        (work / "fast-70.toml").write_text(SLOW)
        rows = []
        for s in range(args.seeds):
            last = work / f"last-{s}.jsonl"
            night(last, args, s, ["--sim-profile", "fast"])
            gate = ["--baseline", str(last)]
            same = night(work / f"same-{s}.jsonl", args, 100 + s, ["--sim-profile", "fast", *gate])
            slow = night(work / f"slow-{s}.jsonl", args, 200 + s, ["--sim-profile-file", str(work / "fast-70.toml"),
                                                                   *gate])  # fmt: skip
            rows.append({"seed": s, "same": same, "slower": slow})
            for name, r in (("same host", same), ("30 % slower", slow)):
                print(f"seed {s} {name:<12} exit {r['exit']}  total tok/s {r['change']:+.1%} (allowed"
                      f" -{r['allowed']:.1%}, windows {r['noise_windows']})  regressed: {r['regressed']}"
                      + (f"  NOT JUDGED: {r['unjudged']}" if r["unjudged"] else ""),
                      file=sys.stderr, flush=True)  # fmt: skip
    result = {
        "seeds": args.seeds,
        "windows": args.windows,
        "window_s": args.window,
        "concurrency": args.concurrency,
        "same_host_passed": sum(r["same"]["exit"] == 0 for r in rows),
        "same_host_unjudged": sum(bool(r["same"]["unjudged"]) for r in rows),
        "slower_host_flagged": sum("throughput.total_tps" in (r["slower"]["regressed"] or ()) for r in rows),
        "slower_host_failed": sum(r["slower"]["exit"] != 0 for r in rows),
        "slower_host_unjudged": sum(bool(r["slower"]["unjudged"]) for r in rows),
        "nights": rows,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
