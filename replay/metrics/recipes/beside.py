"""What the public agentic methods leave out, shown beside them: where a task's time went, what it cost, and what
a faster host would save on the whole task (not on the model call alone).

Only tasks replayed whole from turn 0 count (a warm start's task has no beginning); costs use the run's rate card
(``--rate-card`` or the hosts file's ``price``: docs/providers.md) over every call of the task's tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def beside(
    tasks_summary: dict[str, Any], complete: Mapping[int, bool], task_usd: dict[int, float] | None
) -> dict[str, Any]:
    """``complete``: the complete tasks (True: replayed whole); ``task_usd``: each task's cost over every call of its
    tree (None: the run has no rate card)."""
    out: dict[str, Any] = {
        "tasks_whole": tasks_summary.get("count", 0),
        "wall_split": {k: tasks_summary.get(f"{k}_share") for k in ("model", "tool", "throttled", "queue")},
        "mean_wall_s": tasks_summary.get("wall_s"),
        "faster_host_wall_s": tasks_summary.get("projected_wall_s"),
        "faster_host_saving": tasks_summary.get("projected_saving"),
        "cost_per_task": None,
    }
    whole = [task for task, is_whole in complete.items() if is_whole]
    if task_usd is not None and whole:
        values = sorted(task_usd.get(task, 0.0) for task in whole)
        out["cost_per_task"] = {"mean": sum(values) / len(values), "max": values[-1], "tasks": len(values)}
    return out
