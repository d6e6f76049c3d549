"""Tokens per second of ``replay run --workers 1`` against ``--workers 2`` when the client is the limit.

One stub (``scripts/peer_stub.py``, its own process, 127.0.0.1) answers every call with ``--tokens`` tokens in one
write (``whole`` mode: the cheapest a host can be, so the client's per-token work is what limits). The workload is
one-turn trajectories of a ~1000-word prompt, no tool pauses, ``--concurrency`` sessions for ``--duration``. The
runs alternate (1, 2, 1, 2, ...) ``--reps`` times; figures are medians.

Per run: replay's own output tokens/s over its steady window (the summary), the stub's count of tokens it sent
over the same span of its clock (the host's figure, no client's claim), and the client's CPU seconds (replay and its
workers: the children's rusage). On a machine with fewer cores than workers + 1 (the stub needs CPU too) the
speed-up is bounded by the cores, not by replay: the machine's busy cores over each run (``/proc/stat``, anyone's
work included) say how close to that bound it was.

    python scripts/bench_workers.py [--tokens 2000] [--concurrency 32] [--duration 10] [--reps 3] [--workers 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))
import peer_stub  # noqa: E402

PROMPT_WORDS = 1000
TRAJECTORIES = 64


def workload(path: Path, tokens: int) -> Path:
    """One-turn trajectories, each a distinct prompt (no prefix shared across them), the stub's answer length."""
    lines = []
    for i in range(TRAJECTORIES):
        lines.append(json.dumps({"format": "replay.trajectory/1", "id": f"bench/{i}"}))
        turn = {"append": [{"role": "user", "content": f"task {i}: " + " ".join(["word"] * PROMPT_WORDS)}],
                "output": {"content": "the " * tokens}, "output_tokens": tokens, "tool_time_s": 0}  # fmt: skip
        lines.append(json.dumps(turn))
    path.write_text("\n".join(lines) + "\n")
    return path


def one_run(port: int, traj: Path, out: Path, workers: int, args: argparse.Namespace) -> dict:
    peer_stub.control(port, f"/bench/reset?mode=whole&tokens={args.tokens}")
    argv = [sys.executable, "-m", "replay", "run", str(traj), "--host", f"http://127.0.0.1:{port}/v1", "--model",
            "stub", "-c", str(args.concurrency), "--duration", str(args.duration), "--tool-time", "none",
            "--workers", str(workers), "--out", str(out), "--json", "-q"]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0 = machine_times()
    wall = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300 + 5 * args.duration)
    wall = time.monotonic() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy1 = machine_times()
    if done.returncode not in (0, 2):
        raise RuntimeError(f"replay run --workers {workers} failed ({done.returncode}): {done.stderr[-2000:]}")
    summary = json.loads(done.stdout)
    stats = peer_stub.control(port, "/bench/stats")
    win = summary["window"]
    t0 = _start_clock(out)  # the run's t=0 on perf_counter, the stub's clock (CLOCK_MONOTONIC) too
    lo, hi = t0 + win["start_s"], t0 + win["end_s"]
    sent = sum(n for last, n in zip(stats["last"], stats["per_request_tokens"], strict=True) if lo <= last < hi)
    return {
        "workers": workers,
        "replay_output_tps": summary["throughput"]["output_tps"],
        "stub_tps": sent / (hi - lo) if hi > lo else None,
        "requests": summary["totals"]["requests"],
        "errors": summary["totals"]["requests"] - summary["totals"]["ok"],
        "client_cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        "wall_s": wall,
        "machine_busy_cores": (busy1[0] - busy0[0]) / max(busy1[1] - busy0[1], 1) * (os.cpu_count() or 1),
        "saturated": summary["client"]["saturated"],
        "cpu_share_busiest": summary["client"]["cpu_share"],
    }


def machine_times() -> tuple[int, int]:
    """(busy, total) jiffies of every core (/proc/stat): how much of the machine anything used (others' work too)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _start_clock(run_file: Path) -> float:
    with open(run_file, "rb") as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("type") == "phase" and rec.get("name") == "start":
                return float(rec["t"])
    raise RuntimeError(f"{run_file}: no start mark")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp, peer_stub.started("--tokens", str(args.tokens)) as (_, port):
        traj = workload(Path(tmp) / "w.jsonl", args.tokens)
        for rep in range(args.reps):
            for w in counts:
                row = one_run(port, traj, Path(tmp) / f"run-{rep}-{w}.jsonl", w, args)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    print(f"cpus {os.cpu_count()} · tokens {args.tokens} · concurrency {args.concurrency} · duration "
          f"{args.duration:g} s · medians of {args.reps}")  # fmt: skip
    base = None
    for w in counts:
        mine = [r for r in rows if r["workers"] == w]
        keys = ("replay_output_tps", "stub_tps", "client_cpu_s", "machine_busy_cores")
        med = {k: statistics.median(r[k] for r in mine) for k in keys}
        base = base or med["replay_output_tps"]
        saturated = sum(r["saturated"] for r in mine)
        print(
            f"--workers {w}: replay {med['replay_output_tps']:>10,.0f} tok/s · stub {med['stub_tps']:>10,.0f} tok/s"
            f" · {med['replay_output_tps'] / base:.2f}x · client CPU {med['client_cpu_s']:.1f} s · machine busy "
            f"{med['machine_busy_cores']:.2f} of {os.cpu_count()} cores · saturated {saturated}/{len(mine)}"
        )


if __name__ == "__main__":
    main()
