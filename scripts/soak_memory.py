"""Accelerated soak: does the client's memory stay flat over a long run? And do its windows rebuild the summary?

Runs ``replay run`` against the embedded simulated host in the ``instant`` profile (no pacing: as many calls a
second as the machine allows), no tool time, for ``--minutes`` (default 20), with ``--window`` records. Samples
the client process's resident memory (VmRSS from /proc; the simulated host is a separate process and not counted)
every ``--every`` seconds. At the end it reads the run file back and checks that the window records rebuild the
run's summary exactly. Prints a JSON result (RSS at the first sample after warm-up, at the end, its maximum and
the slope per 10 minutes; calls made; the rebuild check) for docs/benchmarks.md.

    python scripts/soak_memory.py [--minutes 20] [--concurrency 32] [--every 10] [--keep DIR]

Linux only (/proc). Everything it starts is stopped on every exit path (the client's process group).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def rss_mb(pid: int) -> float | None:
    """Resident memory of one process in MiB, None once it has gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def watch_rss(cmd: list[str], log_path: Path, every: float, sample: Callable[[float | None], bool],
              cwd: Path | None = None) -> int:  # fmt: skip
    """Run ``cmd`` in a session of its own (stderr to ``log_path``, a file, so a chatty run cannot block) and call
    ``sample`` with its RSS (MiB, None once it has gone) every ``every`` seconds until it exits, or until ``sample``
    says to stop. Its process group is killed on every exit path. Returns its exit code."""
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, cwd=cwd, start_new_session=True)
    try:
        while proc.poll() is None:
            if sample(rss_mb(proc.pid)):
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=every)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
    return proc.returncode


def run(args: argparse.Namespace, work: Path) -> dict:
    out = work / "soak.jsonl"
    cmd = [sys.executable, "-m", "replay", "run", "--sim-profile", "instant", "--tool-time", "none",
           "-c", str(args.concurrency), "--duration", f"{args.minutes * 60:g}", "--window", str(args.window),
           "--out", str(out), "--quiet"]  # fmt: skip
    samples: list[tuple[float, float]] = []
    t0 = time.monotonic()

    def sample(mb: float | None) -> bool:
        if mb is not None:
            samples.append((time.monotonic() - t0, mb))
        return False

    code = watch_rss(cmd, work / "soak.stderr", args.every, sample)
    err = (work / "soak.stderr").read_text(errors="replace")
    if code not in (0, 1):  # 1: a threshold or the saturation verdict, not a failure of the soak
        raise SystemExit(f"replay run exited {code}: {err[-2000:]}")
    return {"samples": samples, "out": out, "exit": code}


def check_rebuild(path: Path) -> dict:
    """The run's summary read in one pass, and rebuilt from its window records alone: equal?"""
    from replay.metrics.streaming import summarize_file
    from replay.metrics.summary import steady_window
    from replay.metrics.windows import rebuild

    summary, data = summarize_file(path)
    rebuilt = rebuild(data, steady_window(data))
    differ = sorted(k for k in summary if summary[k] != rebuilt.get(k))
    windows = sum(m["type"] == "window" for m in data.marks)
    return {"requests": summary["requests"], "windows": windows, "rebuild_equal": not differ, "differ": differ,
            "total_tps": summary["throughput"]["total_tps"]}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--every", type=float, default=10.0, help="seconds between RSS samples")
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds before the 'start' RSS is taken")
    ap.add_argument("--keep", help="directory to keep the run file in (default: a temporary one, removed)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # killed: the run's process group and files go too
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        res = run(args, work)
        samples = res["samples"]
        after = [(t, mb) for t, mb in samples if t >= args.warmup] or samples
        start, end = after[0], after[-1]
        slope = (end[1] - start[1]) / (end[0] - start[0]) * 600 if end[0] > start[0] else 0.0
        result = {
            "minutes": args.minutes,
            "concurrency": args.concurrency,
            "rss_mb_at_start": round(start[1], 1),
            "rss_mb_start_t_s": round(start[0]),
            "rss_mb_at_end": round(end[1], 1),
            "rss_mb_end_t_s": round(end[0]),
            "rss_mb_max": round(max(mb for _, mb in samples), 1),
            "rss_mb_min_after_warmup": round(min(mb for _, mb in after), 1),
            "rss_mb_per_10_min": round(slope, 2),
            "run_file_mb": round(res["out"].stat().st_size / 2**20, 1),
            "rss_mb_by_minute": {
                f"{round(t / 60)}": round(mb, 1) for t, mb in samples if abs(t / 60 - round(t / 60)) < args.every / 120
            },
            **check_rebuild(res["out"]),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
