"""A small run against the embedded simulated host (fast profile) whose trajectories carry recorded latencies,
for the report tests (HTML, CSV, browser)."""

from __future__ import annotations

from pathlib import Path

from replay.loops.closed_loop import LoadConfig
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from tests.support.trajectories import simple_turns, write_trajectory


def recorded_run(tmp: Path, n: int = 6, concurrency: int = 3) -> Path:
    """n trajectories of 3 to 5 turns (recorded latency 40 ms a call, 20 ms pauses) replayed at ``concurrency``."""
    work = tmp / "recorded.jsonl"
    for i in range(n):
        turns = simple_turns(3 + i % 3, output_tokens=16, tool_time_s=0.02)
        for t in turns:
            t["recorded"] = {"latency_s": 0.04}
        write_trajectory(work, f"rec{i}", turns)
    spec = RunSpec(
        trajectories=[str(work)],
        load=LoadConfig(concurrency=concurrency, tool_time=ToolTimePolicy.parse("recorded")),
        out=str(tmp / "run.jsonl"),
        sim_profile="fast",
        progress=False,
    )
    return execute(spec).path
