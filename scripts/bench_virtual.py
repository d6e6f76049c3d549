"""The virtual clock's cost: a virtual sweep and a virtual capacity search, timed (wall and CPU), each repeated.

    python scripts/bench_virtual.py                          # this checkout
    python scripts/bench_virtual.py --before /tmp/old-tree   # and an older tree beside it (git archive REV | tar -x)

Each command is ``python -m replay ...`` in a child process (the import and the workload's load included), run with
this checkout and, with ``--before``, with the other tree first on ``PYTHONPATH``, the two interleaved and repeated
``--repeat`` times; the medians and the ratio are printed, with each run's answer (the knee, the capacity), so a
faster run that answers differently shows. CPU time is the child's user + system time: on a machine shared with
other jobs it moves less than wall time does.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "sweep overloaded 1..8, 90 s windows": ["sweep", "-c", "1..8", "--window", "90", "--warmup", "30",
                                            "--sim-profile", "overloaded"],
    "sweep moe-8gpu 1..64 (9 levels), 70 s windows": ["sweep", "-c", "1,2,4,8,16,24,32,48,64", "--window", "70",
                                                      "--warmup", "20", "--sim-profile", "moe-8gpu"],
    "capacity moe-8gpu, decode p25 >= 30, 40 s windows": ["capacity", "--slo", "user_decode_tps_p25>=30", "--max",
                                                          "64", "--window", "40", "--warmup", "10", "--sim-profile",
                                                          "moe-8gpu"],
}  # fmt: skip


def run_once(tree: Path, args: list[str], out: Path) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds and the answer of one ``replay ARGS --virtual`` in a child process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "replay", *args, "--virtual", "-q", "--json", "--out", str(out)],
                          env=env, stdout=subprocess.PIPE, check=True)  # fmt: skip
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    doc = orjson.loads(proc.stdout)
    answer = f"knee {doc['knee']['concurrency']}" if "knee" in doc else f"capacity {doc['max_concurrency']}"
    return wall, cpu, answer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, help="an older replay tree to time beside this one")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    trees = {"after": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    with tempfile.TemporaryDirectory(prefix="bench-virtual-") as tmp:
        for name, cmd in COMMANDS.items():
            got: dict[str, list[tuple[float, float, str]]] = {k: [] for k in trees}
            for i in range(args.repeat):
                for label, tree in trees.items():
                    got[label].append(run_once(tree, cmd, Path(tmp) / f"{label}-{i}"))
            print(name)
            for label, rows in got.items():
                wall, cpu = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
                print(f"  {label:6}: wall {wall:6.1f} s, CPU {cpu:6.1f} s (median of {len(rows)}); "
                      f"{', '.join(sorted({r[2] for r in rows}))}")  # fmt: skip
            if "before" in got:
                ratio = statistics.median(r[1] for r in got["after"]) / statistics.median(r[1] for r in got["before"])
                print(f"  CPU after / before: {ratio:.2f}")


if __name__ == "__main__":
    main()
