"""The replay's timeline against the recorded one: per task, model time and tool time beside the trajectory's.

Trajectories imported from real runs can carry each call's recorded wall time (``Turn.recorded.latency_s``,
docs/trajectory-format.md). A replayed task's model time against the sum of those says how much faster or
slower this host is than the one recorded, on the same work; its tool time against the recorded pauses says
how faithfully the replay kept the agent's rhythm (the tool-time policy, sleep overshoot, waiting for
subagents). The run file's header names the workload files and their digest: a live run compares with the
workload it loaded, ``replay report`` loads the files again (found where they were or beside the run file, and
skipped with a note when they are gone or changed). Either way each task is set beside its recording as its record
comes (``TimelineTally``, fed by the run's ``StreamSummary``), so the live run and the report say the same.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.histogram import RATIO, US, percentile
from replay.records.run_file import RunData, TaskRecord
from replay.workload.trajectory import Trajectory, TrajectoryError, Workload, load_workload


@dataclass(frozen=True, slots=True)
class TaskDrift:
    """One complete task beside its trajectory's recording (seconds)."""

    task: int
    trajectory: str
    model_s: float
    recorded_model_s: float
    tool_s: float
    recorded_tool_s: float
    subagents: bool  # the task ran subagents: its tool time includes waiting for them


def _empty(notes: list[str], policy: str | None = None) -> dict[str, Any]:
    return {"tasks": 0, "tool_time_policy": policy, "notes": notes, "model_time_s": None, "tool_time_s": None}


def workload_files(run_file: str | Path, header: dict[str, Any]) -> tuple[list[Path] | None, str | None]:
    """The workload files the header names (where they were, or beside the run file), digest checked; or a note."""
    work = header.get("workload") or {}
    named = work.get("paths") or []
    if not named:
        return None, "the run file names no workload files"
    found: list[Path] = []
    for name in named:
        candidates = (Path(name), Path(run_file).parent / Path(name).name)
        path = next((c for c in candidates if c.is_file()), None)
        if path is None:
            return None, f"workload file {name} not found (nor beside the run file): no comparison"
        found.append(path)
    digest = hashlib.sha256()
    for path in found:
        digest.update(path.read_bytes())
    if work.get("digest") and "sha256:" + digest.hexdigest() != work["digest"]:
        return None, "the workload files changed since the run (digest differs): no comparison"
    return found, None


def _recorded_model_s(traj: Trajectory) -> float | None:
    """Σ recorded latency over the trajectory's turns, only if every turn has one."""
    total = 0.0
    for turn in traj.turns:
        v = (turn.recorded or {}).get("latency_s")
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return None
        total += float(v)
    return total


def _figures(replayed: list[float], recorded: list[float]) -> dict[str, Any]:
    drift = [a - b for a, b in zip(replayed, recorded, strict=True)]
    ratio = [a / b for a, b in zip(replayed, recorded, strict=True) if b > 0]
    n = len(replayed)
    return {
        "replayed_mean": sum(replayed) / n,
        "recorded_mean": sum(recorded) / n,
        "ratio_p50": percentile(ratio, 50, RATIO),
        "drift_p50": percentile(drift, 50, US),
        "drift_p95": percentile(drift, 95, US),
    }


def drift_summary(rows: list[TaskDrift], policy: str | None, notes: list[str]) -> dict[str, Any]:
    """The JSON-ready figures: means, median ratio and signed drift percentiles, for model and tool time."""
    notes = list(notes)
    if not rows:
        return _empty(notes or ["no complete task has a recorded latency on every turn"], policy)
    rows = sorted(rows, key=lambda r: (r.task, r.trajectory))  # one order whichever way the tasks came (workers)
    if policy not in (None, "recorded"):
        notes.append(f"tool time policy {policy}: the tool drift is the policy's, not the replay's")
    with_subagents = sum(r.subagents for r in rows)
    if with_subagents:
        notes.append(f"{with_subagents} tasks ran subagents: their tool time includes waiting for them")
    return {
        "tasks": len(rows),
        "tool_time_policy": policy,
        "notes": notes,
        "model_time_s": _figures([r.model_s for r in rows], [r.recorded_model_s for r in rows]),
        "tool_time_s": _figures([r.tool_s for r in rows], [r.recorded_tool_s for r in rows]),
    }


@dataclass(frozen=True, slots=True)
class Recorded:
    """What the comparison needs of a workload: each trajectory's recorded model and tool seconds (those with a
    recorded latency on every turn), or why nothing can be compared."""

    times: dict[str, tuple[float, float]]
    note: str | None = None


def recorded(run_file: str | Path, header: dict[str, Any], workload: Workload | None = None) -> Recorded:
    """The recorded times of the workload the header names: ``workload`` when the caller has it loaded (a live
    run), else loaded from its files; in both cases only when the files are there and their digest holds."""
    files, note = workload_files(run_file, header)
    if files is None:
        return Recorded({}, note or "no workload")
    if workload is None:
        try:
            workload = load_workload(files)
        except (TrajectoryError, OSError) as exc:
            return Recorded({}, f"workload not loaded: {exc}")
    times = {}
    for traj in workload.trajectories:
        model = _recorded_model_s(traj)
        if model is not None:
            times[traj.id] = (model, sum(turn.tool_time_s for turn in traj.turns[:-1]))  # no pause after the last
    return Recorded(times)


class TimelineTally:
    """Each complete task beside its recording, as task records come; ``figures`` is
    ``breakdown.recorded_timeline``. Only tasks whose trajectory was recorded on every turn are kept."""

    def __init__(self, find: Any = None) -> None:
        self.find = find  # header -> Recorded, called once the run's header is known
        self.recorded: Recorded | None = None
        self.policy: str | None = None
        self.rows: list[TaskDrift] = []

    def header(self, header: dict[str, Any]) -> None:
        self.policy = (header.get("load") or {}).get("tool_time")
        if self.find is not None:
            self.recorded = self.find(header)

    def task(self, t: TaskRecord) -> None:
        times = self.recorded.times.get(t.trajectory) if self.recorded is not None and t.complete else None
        if times is not None:
            self.rows.append(
                TaskDrift(t.task, t.trajectory, t.model_time_s, times[0], t.tool_time_s, times[1], t.subagents > 0)
            )

    def figures(self) -> dict[str, Any] | None:
        """None when nobody said where the workload is (a summary made of records alone)."""
        if self.recorded is None:
            return None
        if self.recorded.note is not None:
            return _empty([self.recorded.note], self.policy)
        return drift_summary(self.rows, self.policy, [])


def timeline_template() -> dict[str, Any]:
    """``recorded_timeline`` with every key it has when tasks were compared (for checking a threshold's figure)."""
    return drift_summary([TaskDrift(0, "", 1.0, 1.0, 1.0, 1.0, False)], None, [])


def recorded_timeline(run: RunData, run_file: str | Path) -> tuple[dict[str, Any], list[TaskDrift]]:
    """``breakdown.recorded_timeline`` and its per-task rows for a run read whole (its tasks in ``run``)."""
    tally = TimelineTally(lambda header: recorded(run_file, header))
    tally.header(run.header)
    for t in run.tasks:
        tally.task(t)
    return tally.figures() or _empty(["no workload"]), tally.rows
