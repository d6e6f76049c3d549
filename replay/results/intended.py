"""Latency from each call's intended start (no coordinated omission), and the open loop's backlog.

A call's intended start is when its session meant to send it: an open-loop session's arrival for its first call,
else the moment its agent was ready (after its pause). TTFT and end-to-end latency from there count the time a
session waited for a free slot and the client's own lateness; the start lag is intended start to bytes sent. The
quarters split the sessions' first calls by intended start: a growing backlog shows as growing latency.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from replay.results.records import RequestRecord


def _pcts(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "mean": None, "n": 0}
    a = np.asarray(values)
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "mean": float(a.mean()),
            "n": int(a.size)}  # fmt: skip


def intended_figures(measured: list[RequestRecord], footer: dict[str, Any] | None) -> dict[str, Any]:
    calls = sorted((r for r in measured if r.t_intended is not None), key=lambda r: r.t_intended or 0.0)
    ttft = [r.t_first_token - r.t_intended for r in calls if r.t_first_token is not None and r.t_intended is not None]
    e2e = [r.t_done - r.t_intended for r in calls if r.t_done is not None and r.t_intended is not None]
    lag = [r.t_sent - r.t_intended for r in calls if r.t_intended is not None]
    firsts: dict[int, RequestRecord] = {}
    for r in calls:  # each task's first call: the one an open-loop arrival intends
        if r.parent is None:
            firsts.setdefault(r.task, r)
    order = sorted(firsts.values(), key=lambda r: r.t_intended or 0.0)
    quarters = []
    for part in np.array_split(np.arange(len(order)), 4) if order else ():
        vals = [order[i].t_first_token - order[i].t_intended for i in part if order[i].t_first_token is not None]
        quarters.append(float(np.mean(vals)) if vals else None)  # type: ignore[operator]
    out: dict[str, Any] = {
        "ttft_from_intended_s": _pcts(ttft),
        "e2e_from_intended_s": _pcts(e2e),
        "start_lag_s": _pcts(lag),
        "ttft_from_intended_by_quarter_s": quarters,
    }
    ol = (footer or {}).get("open_loop")
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
