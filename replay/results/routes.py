"""Which route served each call, and whether per-user speed has two modes (a fast tier and its fallback).

A call's route is what the host says served it: the serving provider (OpenRouter ``provider``, the Vercel
gateway's final provider), else the route header (``x-replay-route``, the simulated host's), else the service
tier it answered. Shares are over the calls that succeeded.

Speed modes: Baseten's Fast tier and Vercel's ``speed: fast`` fall back to base capacity when the fast pool is
full, so per-user decode speed splits into two clusters. The detector sorts the calls' speeds (in log space, as
speeds multiply), takes the split that best separates them (Otsu: the largest between-group variance), and calls
it two modes when each side holds at least ``MIN_SHARE`` of the calls, the groups are well apart (Ashman's D
above ``MIN_SEPARATION``: 2 is the usual bound for a clean separation) and their medians differ by at least
``MIN_RATIO`` (a tight spread of one speed can look separated while meaning nothing); else it reports one mode.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from replay.results.records import RequestRecord

MIN_SHARE = 0.05
MIN_CALLS = 3
MIN_SEPARATION = 2.0
MIN_RATIO = 1.4


def route_of(r: RequestRecord) -> str | None:
    served, headers = r.served or {}, r.headers or {}
    return served.get("provider") or headers.get("x-replay-route") or served.get("service_tier")


def _shares(labels: list[str | None]) -> dict[str, float]:
    named = [x for x in labels if x]
    if not named:
        return {}
    out: dict[str, float] = {}
    for x in named:
        out[x] = out.get(x, 0) + 1
    return {k: v / len(named) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def route_shares(reqs: list[RequestRecord]) -> dict[str, float]:
    """The share of successful calls per served route ({} when the host names none)."""
    return _shares([route_of(r) for r in reqs if r.ok])


def tier_shares(reqs: list[RequestRecord]) -> dict[str, float]:
    """The share of successful calls per service tier as the host answered it."""
    return _shares([(r.served or {}).get("service_tier") for r in reqs if r.ok])


def decode_speed(r: RequestRecord) -> float | None:
    """Per-user decode speed of one call (tokens/s after the first), as metrics.summarize defines it."""
    n = r.output_tokens if r.output_tokens is not None else r.output_events
    if n >= 2 and r.t_first_token and r.t_last_token and r.t_last_token > r.t_first_token:
        return (n - 1) / (r.t_last_token - r.t_first_token)
    return None


def _best_split(logs: np.ndarray) -> tuple[int, float]:
    """(index, Ashman's D) of the split of sorted ``logs`` with the largest between-group variance."""
    n = logs.size
    lo = max(MIN_CALLS, int(np.ceil(MIN_SHARE * n)))
    if n < 2 * lo:
        return 0, 0.0
    csum = np.cumsum(logs)
    k = np.arange(lo, n - lo + 1)
    m1, m2 = csum[k - 1] / k, (csum[-1] - csum[k - 1]) / (n - k)
    between = k * (n - k) * (m1 - m2) ** 2
    i = int(np.argmax(between))
    cut = int(k[i])
    a, b = logs[:cut], logs[cut:]
    spread = np.sqrt(a.var() + b.var())
    d = float(np.sqrt(2) * abs(b.mean() - a.mean()) / spread) if spread > 0 else float("inf")
    return cut, d


def _mode(speeds: np.ndarray, routes: list[str | None], total: int) -> dict[str, Any]:
    mode: dict[str, Any] = {"share": speeds.size / total, "user_decode_tps_p50": float(np.median(speeds)),
                            "requests": int(speeds.size)}  # fmt: skip
    shares = _shares(routes)
    if shares:
        route, share = next(iter(shares.items()))
        mode["route"], mode["route_share"] = route, share
    return mode


def speed_modes(measured: list[RequestRecord]) -> list[dict[str, Any]]:
    """One or two modes of per-user decode speed, slowest first: share, median speed and main route of each."""
    pairs = sorted(((s, route_of(r)) for r in measured if (s := decode_speed(r)) is not None), key=lambda p: p[0])
    if not pairs:
        return []
    speeds = np.asarray([s for s, _ in pairs])
    routes = [x for _, x in pairs]
    cut, d = _best_split(np.log(speeds))
    if cut and d > MIN_SEPARATION and np.median(speeds[cut:]) >= MIN_RATIO * np.median(speeds[:cut]):
        return [_mode(speeds[:cut], routes[:cut], speeds.size), _mode(speeds[cut:], routes[cut:], speeds.size)]
    return [_mode(speeds, routes, speeds.size)]
