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
    assert again == result.summary  # the run's own summary and its file's: the same, every key
    assert len(replay.read(result.path).requests) == 3


def test_the_summary_is_typed_and_still_reads_as_the_dict_it_was(tmp_path: Path) -> None:
    import orjson

    from replay.reports.text_report import to_json

    work = write_trajectory(tmp_path / "w.jsonl", "w", simple_turns(2, output_tokens=8))
    spec = replay.RunSpec(load=replay.LoadConfig(concurrency=1), sim_profile="fast", out=str(tmp_path / "r.jsonl"))
    s = replay.run(spec, replay.load([work])).summary
    assert isinstance(s, replay.Summary) and s.schema_version == 1
    as_dict = s.to_dict()
    assert as_dict["schema_version"] == 1 and orjson.loads(to_json(s)) == orjson.loads(orjson.dumps(as_dict))
    # typed reads and dict reads say the same
    assert s.totals.output_tokens == s["totals"]["output_tokens"] == 16
    assert s.ttft_s.points["p50"] == s["ttft_s"]["p50"] and s.ttft_s.n == s["ttft_s"]["n"] == 2
    assert s.throughput.total_tps == s["throughput"]["total_tps"] and s.verdict is not None
    assert s.verdict.exit_code == s["verdict"]["exit_code"] == 0
    assert dict(s) == {**s} == as_dict and s == as_dict and set(s) == set(as_dict) and len(s) == len(as_dict)
    assert "truth" in s and "span" not in s and s.get("span") is None
    as_dict["requests"] = -1  # a reader's copy: changing it changes nothing
    assert s["requests"] == 2


def test_import_replay_is_cheap_and_typed() -> None:
    import subprocess
    import sys

    code = "import replay, sys; print('replay.runner.single_run' in sys.modules, replay.__version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", replay.__version__]  # nothing heavy until a name is used
    assert replay.RunSpec.__module__ == "replay.runner.run_spec"


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
