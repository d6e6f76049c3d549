"""The replay's model and tool time per task against the trajectory's recorded ones (hand-made tasks)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from replay.metrics.recorded_timeline import recorded_timeline
from replay.records.run_file import RunData, TaskRecord
from tests.support.trajectories import simple_turns, write_trajectory


def _workload(path: Path) -> Path:
    """'rec': 3 turns with recorded latencies 1, 2, 3 s and pauses 0.5 s; 'bare': no recorded latencies."""
    turns = simple_turns(3, tool_time_s=0.5)
    for i, t in enumerate(turns):
        t["recorded"] = {"latency_s": float(i + 1)}
    write_trajectory(path, "rec", turns)
    write_trajectory(path, "bare", simple_turns(3, tool_time_s=0.5))
    return path


def _task(task: int, traj: str, model: float, tool: float, complete: bool = True, subagents: int = 0) -> TaskRecord:
    return TaskRecord(task, 0, traj, 0.0, model + tool, 3 if complete else 1, 3, model, tool, complete,
                      subagents=subagents)  # fmt: skip


def _run(paths: list[str], digest: str | None, tasks: list[TaskRecord], policy: str = "recorded") -> RunData:
    header = {"workload": {"paths": paths, "digest": digest}, "load": {"tool_time": policy}}
    return RunData(header, [], tasks, {}, [], None)


def _digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return "sha256:" + h.hexdigest()


def test_drift_per_task_against_the_recorded_sums(tmp_path: Path) -> None:
    work = _workload(tmp_path / "w.jsonl")
    tasks = [
        _task(0, "rec", model=3.0, tool=1.0),  # recorded: model 6 s, tools 1 s (no pause after the last call)
        _task(1, "rec", model=9.0, tool=1.2, subagents=1),
        _task(2, "rec", model=1.0, tool=0.1, complete=False),  # cut short: not compared
        _task(3, "bare", model=2.0, tool=1.0),  # nothing recorded to compare with
    ]
    summary, rows = recorded_timeline(_run([str(work)], _digest(work), tasks), tmp_path / "run.jsonl")
    assert [r.task for r in rows] == [0, 1]
    assert rows[0].recorded_model_s == 6.0 and rows[0].recorded_tool_s == 1.0
    assert summary["tasks"] == 2 and summary["tool_time_policy"] == "recorded"
    m, t = summary["model_time_s"], summary["tool_time_s"]
    assert m["replayed_mean"] == pytest.approx(6.0) and m["recorded_mean"] == pytest.approx(6.0)
    # the one percentile method (replay.histogram): a value of rank round(p n / 100), at 3 significant digits
    assert m["ratio_p50"] == pytest.approx(0.5)  # ratios 0.5 and 1.5: the lower median (an order statistic)
    assert m["drift_p50"] == pytest.approx(-3.0, rel=1e-3) and m["drift_p95"] == pytest.approx(3.0, rel=1e-3)
    assert t["drift_p50"] == 0.0 and t["drift_p95"] == pytest.approx(0.2, rel=1e-3)
    assert summary["notes"] == ["1 tasks ran subagents: their tool time includes waiting for them"]


def test_files_found_beside_the_run_file_and_a_policy_note(tmp_path: Path) -> None:
    work = _workload(tmp_path / "w.jsonl")
    run = _run(["/gone/elsewhere/w.jsonl"], _digest(work), [_task(0, "rec", 6.0, 0.0)], policy="none")
    summary, rows = recorded_timeline(run, tmp_path / "run.jsonl")
    assert summary["tasks"] == 1 and rows[0].tool_s == 0.0
    assert summary["notes"] == ["tool time policy none: the tool drift is the policy's, not the replay's"]


@pytest.mark.parametrize("case", ["missing", "changed", "unnamed", "nothing recorded", "invalid"])
def test_no_comparison_says_why(tmp_path: Path, case: str) -> None:
    work = _workload(tmp_path / "w.jsonl")
    digest = _digest(work)
    tasks = [_task(0, "rec", 6.0, 1.0)]
    paths = [str(work)]
    if case == "missing":
        paths = [str(tmp_path / "sub" / "other.jsonl")]
    elif case == "changed":
        work.write_bytes(work.read_bytes() + b"\n")
    elif case == "unnamed":
        paths = []
    elif case == "nothing recorded":
        tasks = [_task(0, "bare", 6.0, 1.0)]
    elif case == "invalid":
        work.write_bytes(b'{"format": "replay.trajectory/1", "id": "x"}\n{"append": 3}\n')
        digest = _digest(work)
    summary, rows = recorded_timeline(_run(paths, digest, tasks), tmp_path / "run.jsonl")
    assert rows == [] and summary["tasks"] == 0 and summary["model_time_s"] is None
    expected = {
        "missing": "other.jsonl not found",
        "changed": "digest differs",
        "unnamed": "names no workload files",
        "nothing recorded": "no complete task has a recorded latency on every turn",
        "invalid": "workload not loaded: ",
    }[case]
    assert len(summary["notes"]) == 1 and expected in summary["notes"][0]
