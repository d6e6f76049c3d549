"""The library face: a small replay against the simulated host, from Python."""

from __future__ import annotations

from pathlib import Path

import replay
from tests.support.trajectories import simple_turns, write_trajectory


def test_run_from_python_and_rebuild_the_summary(tmp_path: Path) -> None:
    work = write_trajectory(tmp_path / "w.jsonl", "w", simple_turns(3, output_tokens=8))
    workload = replay.load([work])
    assert [t.id for t in workload.trajectories] == ["w"] and workload.turns == 3
    spec = replay.RunSpec(
        load=replay.LoadConfig(concurrency=1, tool_time=replay.ToolTimePolicy.parse("none")),
        sim_profile="fast",
        out=str(tmp_path / "run.jsonl"),
    )
    result = replay.run(spec, workload)
    assert result.summary["requests"] == 3 and result.summary["errors"] == 0
    assert result.summary["totals"]["output_tokens"] == 24
    again = replay.summarize(result.path)
    assert again["totals"] == result.summary["totals"] and again["truth"]["matched"] == 3
    assert len(replay.read(result.path).requests) == 3


def test_import_replay_is_cheap_and_typed() -> None:
    import subprocess
    import sys

    code = "import replay, sys; print('replay.runner.single_run' in sys.modules, replay.__version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", replay.__version__]  # nothing heavy until a name is used
    assert replay.RunSpec.__module__ == "replay.runner.single_run"
