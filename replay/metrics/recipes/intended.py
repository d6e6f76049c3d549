"""Latency from each call's intended start (no coordinated omission), and the open loop's backlog.

A call's intended start is when its session meant to send it: an open-loop session's arrival for its first call,
else the moment its agent was ready (after its pause). TTFT and end-to-end latency from there count the time a
session waited for a free slot and the client's own lateness; the start lag is intended start to bytes sent. The
tasks' first calls (in an open loop, the arrivals that waited for a session) are reported apart from their later
calls, which never wait for one: pooled, the many later calls hide the first calls' wait. Arrivals that never
started are counted beside them (``never_started``), in no latency figure. The quarters split the sessions' first
calls by intended start: a growing backlog shows as growing latency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from replay.metrics.recipes.recipe_tally import RecipeTally

PCTS = (50, 95)


def _pcts(t: RecipeTally, name: str) -> dict[str, float | int | None]:
    f = t.stats[name].figures(PCTS)
    return {"p50": f["p50"], "p95": f["p95"], "mean": f["mean"], "n": f["n"]}


def intended_figures(t: RecipeTally, footer: dict[str, Any] | None) -> dict[str, Any]:
    order = sorted(t.firsts.values(), key=lambda pair: pair[0])  # each task's first call, by intended start
    quarters = []
    for part in np.array_split(np.arange(len(order)), 4) if order else ():
        vals = [ttft for i in part if (ttft := order[i][1]) is not None]
        quarters.append(float(np.mean(vals)) if vals else None)
    ol = (footer or {}).get("open_loop")
    out: dict[str, Any] = {
        "first_call_ttft_s": _pcts(t, "i_first"),  # each task's first call: an open loop's wait for a session
        "later_calls_ttft_s": _pcts(t, "i_later"),
        "never_started": ol.get("never_started") if ol else None,  # arrived, never started: in no figure above
        "ttft_from_intended_s": _pcts(t, "i_ttft"),
        "e2e_from_intended_s": _pcts(t, "i_e2e"),
        "start_lag_s": _pcts(t, "lag"),
        "ttft_from_intended_by_quarter_s": quarters,
    }
    if ol:
        samples = ol.get("backlog") or []
        waiting = [s[1] for s in samples]
        out["open_loop"] = {
            "arrivals": ol.get("arrivals"),
            "max_live": ol.get("max_live"),
            "arrived": ol.get("arrived"),
            "never_started": ol.get("never_started"),
            "never_started_wait_s": ol.get("never_started_wait_s"),  # their wait at the stop: in no latency figure
            "backlog_max": max(waiting, default=0),
            "backlog_mean": float(np.mean(waiting)) if waiting else 0.0,
            "backlog_last": waiting[-1] if waiting else 0,
        }
    return out
