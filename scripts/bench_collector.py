"""The collector of a sharded run (issue 30): how many records a second one parent can take into one run file.

Two ways for the parent, on the same records (100-token answers, one read per token, as scripts/bench_agents.py's
workload gives), each on one core of this process, with the run's summary, its windows (``--window``) and the
Prometheus counters all on, as a soak with a dashboard has them:

- ``per-record``: what a parent did before (and a single process still does): each record decoded from its pickle,
  encoded, written and flushed, and added to every sink (``RunWriter.request``);
- ``batched``: what the parent does now (``replay.scale.collect``): each batch of lines unpickled, scrubbed, written
  and flushed at once and answered with the clock (``Parent._frame``, the real code), and each worker's part
  (its sinks' accumulators of about a second of its records) merged.

The records of ``--workers`` workers arrive as they would at ``--rate`` records a second in all: batches of 50 ms,
a part a second from each. The parent's CPU (``process_time``) per record gives its limit: records a second at one
core. The workers' own cost per record (encoding and summarising, now theirs) is measured too.

    python scripts/bench_collector.py [--records 20000] [--workers 2,8,40] [--rate 4000] [--window 60]
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from replay.clients.flavours.base import RequestOptions  # noqa: E402
from replay.clients.host import HostConfig  # noqa: E402
from replay.loops.closed_loop import LoadConfig  # noqa: E402
from replay.loops.live import LiveState  # noqa: E402
from replay.metrics.streaming import StreamSummary  # noqa: E402
from replay.metrics.windows import Tee, WindowRecorder  # noqa: E402
from replay.records.run_file import RequestRecord, RunWriter  # noqa: E402
from replay.records.scrub import Scrubber  # noqa: E402
from replay.reports.prometheus_export import PrometheusSink  # noqa: E402
from replay.scale.channel import frame  # noqa: E402
from replay.scale.collect import WorkerCollector, plan  # noqa: E402
from replay.scale.parent import Parent, ShardedRun, Worker  # noqa: E402
from replay.workload.trajectory import Workload  # noqa: E402


def record(i: int, t: float, workers: int) -> RequestRecord:
    chunks: list[float] = []
    for k in range(100):
        chunks += [0.2 + k * 0.05, 1.0]
    return RequestRecord(id=f"{i:012x}-{i:08d}", session=i % 4096, task=i // 20, trajectory=f"agents/{i % 256:04d}",
                         turn=i % 20, t_sent=t, t_headers=t + 0.01, t_first_token=t + 0.2, t_first_answer=t + 0.2,
                         t_last_token=t + 5.15, t_done=t + 5.2, status=200, prompt_tokens=3000 + i % 3000,
                         cached_tokens=2500, output_tokens=100, prompt_tokens_est=3000, reusable_prefix_tokens=2500,
                         max_tokens=100, output_events=100, chunks=chunks, finish_reason="length", t_call=t - 0.001,
                         headers={"x-request-id": f"{i}"})  # fmt: skip


def sinks(window_s: float) -> Tee:
    tee = Tee(StreamSummary(), WindowRecorder(window_s), PrometheusSink("stub"))
    tee.header({"format": "replay.run/1"})
    tee.phase("start", 0.0)
    tee.phase("steady_start", 1.0)
    return tee


def per_record(records: list[RequestRecord], path: Path, window_s: float) -> float:
    """CPU seconds of the old parent for these records (each unpickled, written, flushed, summarised)."""
    writer = RunWriter(path, Scrubber(["sk-not-a-real-key-0123456789"]), sink=sinks(window_s))
    pickled = [pickle.dumps(("request", r)) for r in records]
    t0 = time.process_time()
    for blob in pickled:
        writer.request(pickle.loads(blob)[1])
    cpu = time.process_time() - t0
    writer.close()
    return cpu


class _Channel:
    """A worker's link as the parent writes to it: each answer pickled into its frame (then dropped)."""

    transport = None

    def send(self, messages: list[Any]) -> bool:
        frame(messages)
        return True


def batched(records: list[RequestRecord], path: Path, window_s: float, workers: int, rate: float) -> dict:
    """CPU seconds of the parent (frames unpickled and handled by ``Parent._frame``) and of the workers."""
    writer = RunWriter(path, Scrubber(["sk-not-a-real-key-0123456789"]), sink=sinks(window_s))
    job = ShardedRun(
        Workload([], [], "", ""), HostConfig("http://x", "m"), RequestOptions("m"), LoadConfig(duration_s=60.0), 1
    )
    parent = Parent(job, writer, LiveState())
    for w in range(workers):
        parent.workers.append(Worker(w, None, None, (w,), channel=_Channel()))  # type: ignore[arg-type]
    frames: list[tuple[int, bytes]] = []  # (worker, frame) in arrival order
    per_batch = max(int(rate * 0.05 / workers), 1)  # a worker's records in 50 ms
    per_part = max(int(rate / workers), 1)  # ... and in a second
    t0 = time.process_time()
    for w in range(workers):
        mine = records[w::workers]
        out: list[Any] = []
        collector = WorkerCollector(out.append, plan(writer.sink), {"format": "replay.run/1"}, 0.0)
        collector.phase("start", 0.0)
        collector.phase("steady_start", 1.0)
        for i, rec in enumerate(mine, 1):
            collector.request(rec)
            if i % per_batch == 0:
                collector.parent_clock(rec.t_done or 0.0)
            if i % per_part == 0 or i == len(mine):
                collector.parent_clock(rec.t_done or 0.0, final=i == len(mine))
                collector.ship()
            if i % per_batch == 0 or i == len(mine):
                frames.append((w, frame(out)[4:]))
                out.clear()
    worker_cpu = time.process_time() - t0
    t0 = time.process_time()
    for w, blob in frames:
        parent._frame(parent.workers[w], pickle.loads(blob))
    parent_cpu = time.process_time() - t0
    writer.close()
    return {"parent_cpu_s": parent_cpu, "worker_cpu_s": worker_cpu, "frames": len(frames)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--workers", default="2,8,40")
    ap.add_argument("--rate", type=float, default=4000.0, help="records a second in all (sets batch and part sizes)")
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    records = [record(i, 2.0 + i / args.rate, 1) for i in range(args.records)]
    n = len(records)
    rows: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            cpu = per_record(records, Path(tmp) / f"a{rep}.jsonl", args.window)
            rows.setdefault("per-record", []).append({"parent_us": cpu / n * 1e6})
            for w in (int(x) for x in args.workers.split(",")):
                got = batched(records, Path(tmp) / f"b{rep}-{w}.jsonl", args.window, w, args.rate)
                rows.setdefault(f"batched, {w} workers", []).append(
                    {"parent_us": got["parent_cpu_s"] / n * 1e6, "worker_us": got["worker_cpu_s"] / n * 1e6}
                )
    print("| parent | µs of parent CPU per record | records/s at one core | µs of worker CPU per record |")
    print("|---|---:|---:|---:|")
    out = {}
    for name, runs in rows.items():
        parent_us = statistics.median(r["parent_us"] for r in runs)
        worker = [r["worker_us"] for r in runs if "worker_us" in r]
        worker_us = statistics.median(worker) if worker else None
        out[name] = {"parent_us": parent_us, "records_per_s": 1e6 / parent_us, "worker_us": worker_us, "runs": runs}
        worker_cell = "-" if worker_us is None else f"{worker_us:.0f}"
        print(f"| {name} | {parent_us:.1f} | {1e6 / parent_us:,.0f} | {worker_cell} |")
    print(json.dumps({"records": n, "rate": args.rate, "window_s": args.window, "results": out}), file=sys.stderr)


if __name__ == "__main__":
    main()
