"""How far the client's times are from the simulated host's truth at many concurrent streams, over runs.

Each run replays ``--streams`` sessions of 4 short turns at once against the embedded sim (its own process,
profile ``moe-8gpu``), as tests/sim/test_sim_truth.py does, and lines the run file up with the truth log
(replay.metrics.truth_compare). Printed per run and over all runs: the deviation of TTFT, token times and
inter-token gaps (p50, p99, max), and where the worst TTFT deviations came from: the way up (bytes sent →
the host saw the request) or the way down (the host wrote the first token → the client read it).

    python scripts/truth_agreement.py [--streams 64] [--runs 10]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import orjson

from replay.loops.load import LoadConfig
from replay.metrics.truth_compare import compare, load_truth
from replay.records.reader import read_run
from replay.runner.embedded_host import embedded_host
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy


def write_workload(path: Path, streams: int) -> None:
    """The test's workload: answers of different lengths and different tool pauses, so calls spread out."""
    lines = []
    for i in range(streams):
        output_tokens, tool_time_s = 10 + (i * 7) % 31, 0.03 + 0.007 * (i % 17)
        lines.append({"format": "replay.trajectory/1", "id": f"w{i}"})
        start = [
            {"role": "system", "content": "You are a careful coding agent."},
            {"role": "user", "content": "Fix the failing test in parser.py"},
        ]
        for turn in range(4):
            append = start if turn == 0 else [{"role": "user", "content": f"<output>line {turn} {'x' * 50 * turn}"}]
            output = {"content": f"step {turn}: run the tests\n```bash\npytest -q tests/test_{turn}.py\n```"}
            turn_line = {"append": append, "output": output, "output_tokens": output_tokens}
            lines.append({**turn_line, "tool_time_s": tool_time_s})
    path.write_bytes(b"\n".join(map(orjson.dumps, lines)) + b"\n")


def one_run(tmp: Path, streams: int, profile: str) -> dict:
    work = tmp / "w.jsonl"
    write_workload(work, streams)
    truth_path = tmp / "truth.jsonl"
    with embedded_host(profile, str(truth_path)) as sim:
        spec = RunSpec(
            trajectories=[str(work)],
            host=sim.base_url,
            model="m",
            load=LoadConfig(concurrency=streams, tool_time=ToolTimePolicy.parse("recorded")),
            out=str(tmp / "run.jsonl"),
            progress=False,
        )
        result = execute(spec)
    run, truth = read_run(result.path), load_truth(truth_path)
    cmp = compare(run.requests, truth)
    ways = []
    for r in run.requests:
        t = truth.get(r.id)
        if t and r.ok and r.t_first_token:
            dev = (r.t_first_token - r.t_sent) - (t["first_token"] - t["arrival"])
            ways.append((abs(dev), t["arrival"] - r.t_sent, r.t_first_token - t["first_token"], r.turn))
    cmp["worst"] = sorted(ways, reverse=True)[:3]
    return cmp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--profile", default="moe-8gpu")
    args = ap.parse_args()
    keys = ("ttft", "token", "itl")
    table: dict[str, list[tuple[float, float, float]]] = {k: [] for k in keys}
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            cmp = one_run(Path(tmp), args.streams, args.profile)
        cells = []
        for k in keys:
            d = cmp[f"{k}_dev_s"]
            table[k].append((d["p50"], d["p95"], d["p99"], d["max"]))
            cells.append(f"{k} p50 {d['p50'] * 1e3:5.2f} p99 {d['p99'] * 1e3:5.2f} max {d['max'] * 1e3:5.2f}")
        worst = ", ".join(
            f"{w[0] * 1e3:.1f} (up {w[1] * 1e3:.1f}, down {w[2] * 1e3:.1f}, turn {w[3]})" for w in cmp["worst"]
        )
        print(f"run {i + 1}: " + " | ".join(cells) + f"   worst TTFT ms: {worst}", flush=True)
    print(f"\nover {args.runs} runs of {args.streams} streams (ms): medians of the per-run figures, worst run")
    for k in keys:
        a = np.array(table[k]) * 1e3
        p95, p99, top = (f"{np.median(a[:, i]):.2f} (worst {a[:, i].max():.2f})" for i in (1, 2, 3))
        within = ", ".join(f"{name} {int((a[:, i] < 5).sum())}" for name, i in (("p95", 1), ("p99", 2), ("max", 3)))
        print(f"  {k:>5}: p50 {np.median(a[:, 0]):.2f}  p95 {p95}  p99 {p99}  max {top}")
        print(f"         runs within 5 ms of {args.runs}: {within}")


if __name__ == "__main__":
    main()
