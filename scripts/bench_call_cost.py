"""The per-call cost, A/B: this tree's replay against another revision's, on one stub, alternating run by run.

Each run is ``replay run`` (its own process, ``--workers 1``) of ``--tasks`` one-call tasks (a ~200-word prompt each,
no tool pauses) at ``-c`` sessions against ``scripts/peer_stub.py`` in ``whole`` mode (each answer of ``--tokens``
tokens in one write: the cheapest host there is, so the client's work per call is what counts). The figure is
output tokens per client CPU-second (the run's whole process: start-up, loading, calls, records and summary), the
replay's own count of output tokens over its user+system time. The two revisions run alternately, the order
swapped every pair, so the machine's noise hits both alike; reported per pair and as medians, with the ratio.

The other revision is checked out with ``git worktree add --detach`` into a temporary directory (removed after)
and run from there with ``PYTHONPATH`` pointing at it; it fetches nothing.

    python scripts/bench_call_cost.py [--base d23109b] [--tasks 6000] [-c 256] [--tokens 500] [--pairs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import peer_stub

ROOT = Path(__file__).resolve().parents[1]
PROMPT_WORDS = 200


def workload(path: Path, tasks: int, tokens: int) -> Path:
    """One-call tasks, each a distinct prompt, each recorded answer the stub's length."""
    lines = []
    for i in range(tasks):
        lines.append(json.dumps({"format": "replay.trajectory/1", "id": f"cost/{i}"}))
        turn = {"append": [{"role": "user", "content": f"task {i}: " + "word " * PROMPT_WORDS}],
                "output": {"content": "the " * tokens}, "output_tokens": tokens, "tool_time_s": 0}  # fmt: skip
        lines.append(json.dumps(turn))
    path.write_text("\n".join(lines) + "\n")
    return path


@contextlib.contextmanager
def checked_out(rev: str) -> Iterator[Path]:
    """``rev`` of this repository in a temporary worktree (removed after)."""
    with tempfile.TemporaryDirectory(prefix="bench-call-cost-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), rev], check=True)
        try:
            yield tree
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


def one_run(src: Path, port: int, traj: Path, out: Path, args: argparse.Namespace) -> dict[str, float]:
    """One ``replay run`` from the tree ``src``: output tokens, client CPU seconds and their ratio."""
    argv = [sys.executable, "-m", "replay", "run", str(traj), "--host", f"http://127.0.0.1:{port}/v1", "--model",
            "stub", "-c", str(args.concurrency), "--tool-time", "none", "--tasks", str(args.tasks), "--out", str(out),
            "--json", "-q"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, cwd=src, env=env, capture_output=True, text=True, timeout=1800)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"replay run from {src} failed ({done.returncode}): {done.stderr[-2000:]}")
    summary = json.loads(done.stdout)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    tokens = summary["totals"]["output_tokens"]
    if summary["errors"]:
        raise RuntimeError(f"replay run from {src}: {summary['errors']} calls failed")
    return {"output_tokens": tokens, "cpu_s": cpu, "tokens_per_cpu_s": tokens / cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="d23109b", help="the revision to compare against (default d23109b)")
    ap.add_argument("--tasks", type=int, default=6000)
    ap.add_argument("-c", "--concurrency", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=500)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    runs: dict[str, list[float]] = {"this": [], "base": []}
    with tempfile.TemporaryDirectory(prefix="bench-call-cost-") as tmp, checked_out(args.base) as base:
        traj = workload(Path(tmp) / "tasks.jsonl", args.tasks, args.tokens)
        trees = {"this": ROOT, "base": base}
        with peer_stub.started("--tokens", str(args.tokens), "--mode", "whole") as (_, port):
            for pair in range(args.pairs):
                order = ("base", "this") if pair % 2 == 0 else ("this", "base")
                for name in order:
                    got = one_run(trees[name], port, traj, Path(tmp) / f"{name}{pair}.jsonl", args)
                    runs[name].append(got["tokens_per_cpu_s"])
                    print(f"pair {pair + 1} {name}: {got['tokens_per_cpu_s']:,.0f} output tokens per client CPU-s "
                          f"({got['cpu_s']:.2f} s)", flush=True)  # fmt: skip
    ratios = [a / b for a, b in zip(runs["this"], runs["base"], strict=True)]
    this, base = statistics.median(runs["this"]), statistics.median(runs["base"])
    print(f"\nbase {args.base}: median {base:,.0f}; this tree: median {this:,.0f}; ratio {this / base:.3f}x "
          f"(per pair {', '.join(f'{r:.3f}' for r in ratios)})")  # fmt: skip


if __name__ == "__main__":
    main()
