"""What the public agentic methods leave out, shown beside them: where a task's time went, what it cost, and what
a faster host would save on the whole task (not on the model call alone).

Only tasks replayed whole from turn 0 count (a warm start's task has no beginning); costs use the rate card given
with ``--rate-card`` ($ per million new input, cached input and output tokens) over every call of the task's tree.
"""

from __future__ import annotations

from typing import Any

from replay.results.records import RequestRecord, TaskRecord


def beside(tasks_summary: dict[str, Any], tasks: list[TaskRecord], requests: list[RequestRecord],
           rate_card: list[float] | None) -> dict[str, Any]:  # fmt: skip
    out: dict[str, Any] = {
        "tasks_whole": tasks_summary.get("count", 0),
        "wall_split": {k: tasks_summary.get(f"{k}_share") for k in ("model", "tool", "throttled", "queue")},
        "mean_wall_s": tasks_summary.get("wall_s"),
        "faster_host_wall_s": tasks_summary.get("projected_wall_s"),
        "faster_host_saving": tasks_summary.get("projected_saving"),
        "cost_per_task": None,
    }
    whole = {t.task for t in tasks if t.complete and not t.start_turn}
    if rate_card and whole:
        price_in, price_cached, price_out = rate_card
        cost: dict[int, float] = dict.fromkeys(whole, 0.0)
        for r in requests:
            if r.task in cost and r.phase == "measured":
                cached = r.cached_tokens or 0
                new = (r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_est) - cached
                out_tokens = r.output_tokens if r.output_tokens is not None else r.output_events
                cost[r.task] += (new * price_in + cached * price_cached + out_tokens * price_out) / 1e6
        values = sorted(cost.values())
        out["cost_per_task"] = {"mean": sum(values) / len(values), "max": values[-1], "tasks": len(values)}
    return out
