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


def _exception_classes() -> list[type[BaseException]]:
    """Every exception class defined in replay's modules (those whose extra is missing here are skipped)."""
    import importlib
    import inspect
    import pkgutil

    found = []
    for info in pkgutil.walk_packages(replay.__path__, "replay."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra (ray) not installed
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == info.name:
                found.append(cls)
    return found


def test_every_error_replay_raises_derives_from_one_base_and_keeps_its_name_and_older_base() -> None:
    classes = _exception_classes()
    names = {cls.__name__ for cls in classes}
    assert {"RunError", "TrajectoryError", "ThresholdError", "HostError", "ResumeError", "WorkerError"} <= names
    assert len(classes) >= 15
    not_ours = [
        cls.__qualname__ for cls in classes if cls is not replay.ReplayError and not issubclass(cls, replay.ReplayError)
    ]
    assert not_ours == []
    from replay.workload.trajectory import TrajectoryError

    assert issubclass(TrajectoryError, ValueError) and replay.TrajectoryError is TrajectoryError
    assert issubclass(replay.RunError, replay.ReplayError)


def test_one_except_clause_catches_a_bad_option_and_a_bad_workload(tmp_path: Path) -> None:
    bad_host = replay.RunSpec(host="not a url", out=str(tmp_path / "a.jsonl"))
    bad_file = tmp_path / "bad.jsonl"
    bad_file.write_text('{"format": "replay.trajectory/1", "id": "x"}\n{"append": 3}\n')
    for spec in (bad_host, replay.RunSpec(trajectories=[str(bad_file)], out=str(tmp_path / "b.jsonl"))):
        try:
            replay.run(spec)
        except replay.ReplayError as exc:
            assert str(exc)  # the message says what is wrong
        else:
            raise AssertionError(f"{spec} ran")
