"""Per-task figures: where a task's wall time went, and how many tasks ended complete, failed or cut short.

Only complete tasks (every turn replayed, every call successful after its retries) enter the per-task means and
the what-if projections; failed and partial tasks are counted beside them. A task's wall time splits into model
time, tool time, throttled time (backoff and ``--max-rpm`` waits) and client queue time; the projections of a
faster host shrink the model time only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from replay.results.records import TaskRecord

PROJECTIONS = (2, 10)


def task_figures(tasks: list[TaskRecord]) -> dict[str, Any]:
    done = [t for t in tasks if t.complete]
    failed = sum(t.status == "failed" for t in tasks)
    counts = {
        "count": len(done),
        "complete": len(done),
        "failed": failed,
        "partial": len(tasks) - len(done) - failed,
        "incomplete": len(tasks) - len(done),
        "throttled_time_total_s": float(sum(t.throttled_time_s for t in tasks)),
        "attempts_per_turn": _ratio(sum(t.attempts for t in tasks), sum(t.turns + t.subagent_calls for t in tasks)),
    }
    if not done:
        empty = dict.fromkeys(("model_time_s", "tool_time_s", "throttled_time_s", "queue_time_s", "wall_s"))
        shares = dict.fromkeys(("model_share", "tool_share", "throttled_share", "queue_share"))
        return counts | empty | shares | {"projected_wall_s": {f"{k}x": None for k in PROJECTIONS}}
    parts = {
        name: np.array([getattr(t, f"{name}_time_s") for t in done]) for name in ("model", "tool", "throttled", "queue")
    }
    wall = np.array([t.t_end - t.t_start for t in done])
    total = float(wall.sum())
    model = parts["model"]
    projected = {f"{k}x": float(np.mean(wall - model + model / k)) for k in PROJECTIONS}
    return (
        counts
        | {f"{name}_time_s": float(values.mean()) for name, values in parts.items()}
        | {"wall_s": float(wall.mean())}
        | {f"{name}_share": (float(values.sum()) / total if total > 0 else None) for name, values in parts.items()}
        | {
            "projected_wall_s": projected,
            "projected_saving": {k: 1 - v / float(wall.mean()) for k, v in projected.items()},
            "subagents": sum(t.subagents for t in done),
            "subagent_calls": sum(t.subagent_calls for t in done),
            "subagent_model_time_s": float(np.mean([t.subagent_model_time_s for t in done])),
        }
    )


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None
