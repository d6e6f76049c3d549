"""``--ramp-up``: the lanes' first calls spread over a stretch instead of one burst (lane k of N starts k/N of it after
the run's start), in one process and over workers alike; ``auto`` spreads only runs of more than 256 sessions."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.loops.closed_loop import LoadConfig
from replay.records.reader import read_run
from replay.runner.single_run import RunSpec, execute
from tests.support.trajectories import simple_turns, write_trajectory


def test_auto_spreads_only_large_runs() -> None:
    auto = LoadConfig()
    assert auto.ramp_up(12) == auto.ramp_up(256) == 0.0  # the burst this client is measured at (docs/benchmarks.md)
    assert auto.ramp_up(1024) == pytest.approx(2.048) and auto.ramp_up(4096) == pytest.approx(8.192)  # 2 ms apart
    assert auto.ramp_up(40_000) == 30.0  # at most 30 s
    assert LoadConfig(ramp_up_s=0.0).ramp_up(4096) == 0.0 and LoadConfig(ramp_up_s=5.0).ramp_up(3) == 5.0
    assert LoadConfig().public()["ramp_up_s"] == "auto" and LoadConfig(ramp_up_s=5.0).public()["ramp_up_s"] == 5.0


@pytest.mark.parametrize("workers", [1, 2])
def test_lane_k_starts_k_nths_of_the_ramp_after_the_start(tmp_path: Path, workers: int) -> None:
    work = tmp_path / "w.jsonl"
    for i in range(8):
        write_trajectory(work, f"t{i}", simple_turns(2, output_tokens=4, tool_time_s=0.01))
    load = LoadConfig(concurrency=8, ramp_up_s=0.8, duration_s=1.5, salt_tasks=False)
    result = execute(RunSpec([str(work)], load=load, out=str(tmp_path / "r.jsonl"), sim_profile="instant",
                             progress=False, workers=workers))  # fmt: skip
    run = read_run(result.path)
    start = run.phases["start"]
    first = {}
    for r in sorted(run.requests, key=lambda r: r.t_sent):
        first.setdefault(r.session, r.t_sent)
    assert sorted(first) == list(range(8))
    assert all(first[k] >= start + k * 0.1 for k in range(8))  # never before its turn (how soon after it is timing)
    assert result.footer["ramp_up_s"] == 0.8 and run.header["load"]["ramp_up_s"] == 0.8
    assert result.exit_code == 0, (result.summary.verdict, result.footer)
    assert run.phases["steady_start"] >= start + 0.7  # the window waits for the last lane
