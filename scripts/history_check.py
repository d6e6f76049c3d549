"""The history and its gate on real runs: is a slower host found at the right night, a steady one left alone, a
slow slide found, and does ``--history-file`` exit 2 on the regressed night and 0 on the others?

For each seed, nights against the embedded simulated host, each a run of ``--windows`` full windows (``--window``
seconds each, no tool time, ``--concurrency`` sessions), every one with ``--history-file`` (the gate judges it
among the nights before it, then it is added): ``--nights`` nights on the ``--profile`` (the steady history: no
change point may be found in it); then the history is copied twice and goes on as two: ``--slow-nights`` nights
on a copy of the profile at 85 % of its bandwidth and FLOP/s (15 % slower: the change must be found at the first of
them, and the gate must exit 2 that night and 0 on the others), and ``--slide-nights`` nights each 1 % slower
than the one before (a change point must be found, worse, none before the slide began). Prints one line per night
and the counts as JSON, for docs/benchmarks.md (tests/history/ check the same on modelled nights in seconds).

    python scripts/history_check.py [--seeds 5] [--nights 30] [--slow-nights 5] [--slide-nights 15]
                                    [--windows 8] [--window 1] [--concurrency 4] [--profile default]
                                    [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FIGURE = "throughput.total_tps"
OFFSET = {"steady": 0, "slow": 500, "slide": 700}  # each night its own seed (the task order), the same every time


def profile(work: Path, base: str, speed: float) -> list[str]:
    """The options of the simulated profile ``base`` at ``speed`` of its bandwidth and FLOP/s (a file when not 1)."""
    if speed == 1.0:
        return ["--sim-profile", base]
    from replay.sim.core.profiles import get_profile

    p = get_profile(base)
    path = work / f"{base}-{speed:.4f}.toml"
    path.write_text(f'base = "{base}"\nname = "{base}-{speed:.4f}"\nmem_efficiency = {p.mem_efficiency * speed}\n'
                    f"mfu = {p.mfu * speed}\nattn_mfu = {(p.attn_mfu or p.mfu) * speed}\n")  # fmt: skip
    return ["--sim-profile-file", str(path)]


def night(out: Path, hist: Path, args: argparse.Namespace, seed: int, extra: list[str]) -> dict:
    duration = (args.windows + 1) * args.window  # the first window is the warm-up: one more than asked
    window = f"{args.window:g}"
    cmd = [sys.executable, "-m", "replay", "run", "-c", str(args.concurrency), "--tool-time", "none", "--duration",
           f"{duration:g}", "--warmup", window, "--window", window, "--seed", str(seed), "--json", "-q",
           "--out", str(out), "--history-file", str(hist), *extra]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration * 4 + 120)
    if done.returncode not in (0, 2, 3) or not done.stdout:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr[-1000:]}")
    gate = json.loads(done.stdout)["history"]
    return {"exit": done.returncode, "regressed": gate["regressed"], "unjudged": gate["unjudged"],
            "total_tps": gate["figures"][FIGURE]["value"]}  # fmt: skip


def show(hist: Path) -> dict:
    cmd = [sys.executable, "-m", "replay", "history", "show", "--file", str(hist), "--json"]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300).stdout)


def chain(work: Path, hist: Path, args: argparse.Namespace, seed: int, name: str, speeds: list[float]) -> list[dict]:
    rows = []
    for i, speed in enumerate(speeds):
        extra = profile(work, args.profile, speed)
        r = night(work / f"{name}-{seed}-{i}.jsonl", hist, args, 1000 * seed + OFFSET[name] + i, extra)
        rows.append(r | {"speed": speed})
        print(f"seed {seed} {name:<6} night {i + 1:>2} speed {speed:.3f}  exit {r['exit']}  total tok/s "
              f"{r['total_tps']:,.0f}  regressed: {r['regressed']}" + (f"  NOT JUDGED: {r['unjudged']}"
              if r["unjudged"] else ""), file=sys.stderr, flush=True)  # fmt: skip
    return rows


def unjudged(doc: dict) -> int:
    """The nights whose client set their figures (held up or saturated): in the history, out of its judgement."""
    return sum(bool(p["unjudged"]) for p in doc["history"][FIGURE]["points"])


def changes(doc: dict, first: int) -> tuple[list[int], list[dict]]:
    """The nights (0-based) of the total throughput's change points, and every figure's change points before
    night ``first`` (none may be found in the steady nights)."""
    runs = [p["run"] for p in doc["history"][FIGURE]["points"]]
    at = [runs.index(c["run"]) for c in doc["history"][FIGURE]["change_points"] if c["direction"] == "worse"]
    early = [c | {"figure": f} for f, fig in doc["history"].items() for c in fig["change_points"] or ()
             if runs.index(c["run"]) < first]  # fmt: skip
    return at, early


def seed_rows(work: Path, args: argparse.Namespace, s: int) -> dict:
    steady_db, slow_db, slide_db = (work / f"{n}-{s}.db" for n in ("steady", "slow", "slide"))
    steady = chain(work, steady_db, args, s, "steady", [1.0] * args.nights)
    steady_doc = show(steady_db)
    _, false = changes(steady_doc, args.nights)
    shutil.copy(steady_db, slow_db)
    shutil.copy(steady_db, slide_db)
    slow = chain(work, slow_db, args, s, "slow", [0.85] * args.slow_nights)
    slide = chain(work, slide_db, args, s, "slide", [0.99**k for k in range(1, args.slide_nights + 1)])
    slow_doc, slide_doc = show(slow_db), show(slide_db)
    slow_at, _ = changes(slow_doc, args.nights)
    slide_at, _ = changes(slide_doc, args.nights)
    gate_slow = [r["exit"] for r in slow]
    return {
        "seed": s,
        "steady_change_points": false,
        "steady_exits": [r["exit"] for r in steady],
        "slow_change_nights": slow_at,
        "slow_found_at_first": slow_at == [args.nights],
        "slow_exits": gate_slow,
        "slow_gate_right": gate_slow[:1] == [2] and all(c == 0 for c in gate_slow[1:]),
        "slide_change_nights": slide_at,
        "slide_found": bool(slide_at) and min(slide_at) >= args.nights,
        "slide_exits": [r["exit"] for r in slide],
        "unjudged_nights": unjudged(slow_doc) + unjudged(slide_doc) - unjudged(steady_doc),  # each night once
        "gate_unjudged_nights": sum(bool(r["unjudged"]) for r in steady + slow + slide),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--nights", type=int, default=30)
    ap.add_argument("--slow-nights", type=int, default=5)
    ap.add_argument("--slide-nights", type=int, default=15)
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--window", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--profile", default="default", help="the simulated host's profile (one whose speed, not the "
                    "client's, sets the figures: `fast` streams faster than a busy client reads)")  # fmt: skip
    ap.add_argument("--keep", type=Path, help="keep the run files and histories here (default: a temporary directory)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = [seed_rows(work, args, s) for s in range(args.seeds)]
    result = {
        "seeds": args.seeds, "nights": args.nights, "slow_nights": args.slow_nights,
        "slide_nights": args.slide_nights, "windows": args.windows, "window_s": args.window,
        "concurrency": args.concurrency, "profile": args.profile,
        "steady_without_change_points": sum(not r["steady_change_points"] for r in rows),
        "slower_found_at_its_first_night": sum(r["slow_found_at_first"] for r in rows),
        "slower_gate_2_then_0": sum(r["slow_gate_right"] for r in rows),
        "slide_found": sum(r["slide_found"] for r in rows),
        "steady_nights_not_passed": sum(sum(c != 0 for c in r["steady_exits"]) for r in rows),
        "unjudged_nights": sum(r["unjudged_nights"] for r in rows),
        "nights_run": args.seeds * (args.nights + args.slow_nights + args.slide_nights),
        "per_seed": rows,
    }  # fmt: skip
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
