"""Per-task figures: where a task's wall time went, and how many tasks ended complete, failed or cut short.

Only complete tasks (every turn replayed, every call successful after its retries) enter the per-task means and
the what-if projections; failed and partial tasks are counted beside them. A task's wall time splits into model
time, tool time, throttled time (backoff and ``--max-rpm`` waits) and client queue time; the projections of a
faster host shrink the model time only.

Tasks are tallied as they end (``TaskTally``, in the run's ``Accumulator``): counts and sums of whole microseconds,
so a soak's tasks take no memory beyond one entry per complete task (which the cost per task needs), and the
windows of a run merge into the same figures in any order.
"""

from __future__ import annotations

from typing import Any

from replay.metrics.task_tables import TaskFlags
from replay.records.run_file import TaskRecord

PROJECTIONS = (2, 10)
US = 1_000_000
PARTS = ("model", "tool", "throttled", "queue")
_COUNTS = ("warm", "tasks", "complete", "failed", "throttled_all", "attempts", "calls", "wall", "subagents",
           "subagent_calls", "subagent_model", "errored", *PARTS)  # fmt: skip


class TaskTally:
    """Counts and µs sums of ended tasks; ``complete``: each complete task, True when replayed whole from turn 0."""

    def __init__(self) -> None:
        self.n = dict.fromkeys(_COUNTS, 0)
        self.complete = TaskFlags()  # (a dict of int -> bool, in a byte a task)
        self.first_error: tuple[int, str] | None = None  # (task, error) of the lowest task whose session failed

    def add(self, t: TaskRecord) -> None:
        n = self.n
        if t.error is not None:
            n["errored"] += 1
            self._note_error(t.task, t.error)
        if t.complete:
            self.complete[t.task] = not t.start_turn
        if t.start_turn:  # began mid-trajectory (--start-at, AgentX): no whole task to measure
            n["warm"] += 1
            return
        n["tasks"] += 1
        n["failed"] += t.status == "failed"
        n["throttled_all"] += round(t.throttled_time_s * US)  # µs, whole
        n["attempts"] += t.attempts
        n["calls"] += t.turns + t.subagent_calls
        if not t.complete:
            return
        n["complete"] += 1
        n["model"] += round(t.model_time_s * US)  # the PARTS, each a field of the record
        n["tool"] += round(t.tool_time_s * US)
        n["throttled"] += round(t.throttled_time_s * US)
        n["queue"] += round(t.queue_time_s * US)
        n["wall"] += round((t.t_end - t.t_start) * US)
        n["subagents"] += t.subagents
        n["subagent_calls"] += t.subagent_calls
        n["subagent_model"] += round(t.subagent_model_time_s * US)

    def _note_error(self, task: int, error: str) -> None:
        if self.first_error is None or task < self.first_error[0]:  # the same whatever order windows merge in
            self.first_error = (task, error)

    def merge(self, other: TaskTally) -> None:
        for k in _COUNTS:
            self.n[k] += other.n[k]
        self.complete.update(other.complete)
        if other.first_error is not None:
            self._note_error(*other.first_error)

    def encode(self) -> dict[str, Any]:
        return {"n": self.n, "complete": [[task, whole] for task, whole in self.complete.items()],
                "first_error": list(self.first_error) if self.first_error else None}  # fmt: skip

    @classmethod
    def decode(cls, data: dict[str, Any] | None) -> TaskTally:
        t = cls()
        if data:
            t.n.update(data["n"])
            for task, whole in data["complete"]:
                t.complete[int(task)] = bool(whole)
            if data.get("first_error"):
                t.first_error = (int(data["first_error"][0]), str(data["first_error"][1]))
        return t

    def figures(self) -> dict[str, Any]:
        n = self.n
        done = n["complete"]
        counts = {
            "warm_started": n["warm"],
            "count": done,
            "complete": done,
            "failed": n["failed"],
            "partial": n["tasks"] - done - n["failed"],
            "incomplete": n["tasks"] - done,
            "throttled_time_total_s": n["throttled_all"] / US,
            "attempts_per_turn": _ratio(n["attempts"], n["calls"]),
            "session_errors": n["errored"],  # tasks whose session itself failed (the error: ``session_error``)
            "session_error": self.first_error[1] if self.first_error else None,
        }
        if not done:
            empty = dict.fromkeys(("model_time_s", "tool_time_s", "throttled_time_s", "queue_time_s", "wall_s"))
            shares = dict.fromkeys(("model_share", "tool_share", "throttled_share", "queue_share"))
            projected_none = {f"{k}x": None for k in PROJECTIONS}
            subagents = {"subagents": 0, "subagent_calls": 0, "subagent_model_time_s": None}
            return counts | empty | shares | {"projected_wall_s": projected_none,
                                              "projected_saving": dict(projected_none)} | subagents  # fmt: skip
        wall, model = n["wall"], n["model"]
        mean_wall = wall / done / US
        projected = {f"{k}x": (wall - model + model / k) / done / US for k in PROJECTIONS}
        return (
            counts
            | {f"{name}_time_s": n[name] / done / US for name in PARTS}
            | {"wall_s": mean_wall}
            | {f"{name}_share": (n[name] / wall if wall > 0 else None) for name in PARTS}
            | {
                "projected_wall_s": projected,
                "projected_saving": {k: 1 - v / mean_wall if mean_wall else None for k, v in projected.items()},
                "subagents": n["subagents"],
                "subagent_calls": n["subagent_calls"],
                "subagent_model_time_s": n["subagent_model"] / done / US,
            }
        )


def task_figures(tasks: list[TaskRecord]) -> dict[str, Any]:
    """The figures of a list of task records (as a run's tally gives them)."""
    tally = TaskTally()
    for t in tasks:
        tally.add(t)
    return tally.figures()


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None
