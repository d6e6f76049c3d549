"""Which route served each call, and whether per-user speed has two modes (a fast tier and its fallback).

A call's route is what the host says served it: the serving provider (OpenRouter ``provider``, the Vercel
gateway's final provider), else the route header (``x-replay-route``, the simulated host's), else the service
tier it answered. Shares are over the calls that succeeded.

Speed modes: Baseten's Fast tier and Vercel's ``speed: fast`` fall back to base capacity when the fast pool is
full, so per-user decode speed splits into two clusters. The detector sorts the calls' speeds in log space (as
speeds multiply; they are tallied in log bins 0.25 % wide, so a run of any length fits), takes the split that best
separates them (Otsu: the largest between-group variance), and calls it two modes when each side holds at least
``MIN_SHARE`` of the calls, the groups are well apart (Ashman's D above ``MIN_SEPARATION``: 2 is the usual bound
for a clean separation) and their medians differ by at least ``MIN_RATIO`` (a tight spread of one speed can look
separated while meaning nothing); else it reports one mode.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from replay.histogram import TPS_SCALE, percentile
from replay.records.run_file import RequestRecord

MIN_SHARE = 0.05
MIN_CALLS = 3
MIN_SEPARATION = 2.0
MIN_RATIO = 1.4
SPEED_BINS_PER_E = 400  # log-speed bins per unit of log speed: a bin's centre is within 0.125 % of its calls


class RouteTally(Protocol):
    """What the figures here read of a run's tally (``host_tally.HostTally``, which bins calls with this module)."""

    routes: dict[str, int]  # successful requests per served route
    tiers: dict[str, int]  # successful requests per answered service tier
    speeds: dict[int, dict[str, int]]  # log-speed bin -> {route ("" when none): calls}


MAX_NAME = 64  # a route or tier name as the figures keep it: a host may send anything there
MAX_NAMES = 64  # distinct routes (tiers, rate-limit buckets) kept per tally; the rest are counted under OTHER
OTHER = "(other)"


def host_name(value: object) -> str | None:
    """A name a host sent (a route, a tier), as a figure may key it: text, printable, at most MAX_NAME characters."""
    if not isinstance(value, str) or not value:
        return None
    text = "".join(c if c.isprintable() else "?" for c in value[: MAX_NAME + 1])
    return text if len(text) <= MAX_NAME else text[: MAX_NAME - 3] + "..."


def count_name(counts: dict[str, int], name: str, n: int = 1) -> None:
    """``counts[name] += n``, with at most MAX_NAMES names: a host that names a new route every call (a 935 KB
    report line once) fills OTHER instead."""
    if name not in counts and len(counts) >= MAX_NAMES:
        name = OTHER
    counts[name] = counts.get(name, 0) + n


def route_of(r: RequestRecord) -> str | None:
    served, headers = r.served or {}, r.headers or {}
    return host_name(served.get("provider") or headers.get("x-replay-route") or served.get("service_tier"))


def _shares(counts: dict[str, int]) -> dict[str, float]:
    total = sum(counts.values())
    return {k: v / total for k, v in sorted(counts.items(), key=lambda kv: -kv[1])} if total else {}


def route_shares(t: RouteTally) -> dict[str, float]:
    """The share of successful calls per served route ({} when the host names none)."""
    return _shares(t.routes)


def tier_shares(t: RouteTally) -> dict[str, float]:
    """The share of successful calls per service tier as the host answered it."""
    return _shares(t.tiers)


def _best_split(logs: np.ndarray, counts: np.ndarray) -> tuple[int, float]:
    """(bin index, Ashman's D) of the split of the sorted log-speed bins with the largest between-group variance;
    the split falls between bins, each side holding at least MIN_CALLS and MIN_SHARE of the calls."""
    n = int(counts.sum())
    lo = max(MIN_CALLS, int(np.ceil(MIN_SHARE * n)))
    if n < 2 * lo or logs.size < 2:
        return 0, 0.0
    k = np.cumsum(counts)[:-1]  # calls left of each cut
    wsum, wsq = np.cumsum(logs * counts)[:-1], np.cumsum(logs * logs * counts)[:-1]
    total, total_sq = float((logs * counts).sum()), float((logs * logs * counts).sum())
    ok = (k >= lo) & (n - k >= lo)
    if not ok.any():
        return 0, 0.0
    m1, m2 = wsum / k, (total - wsum) / (n - k)
    between = np.where(ok, k * (n - k) * (m1 - m2) ** 2, -1.0)
    i = int(np.argmax(between))
    v1 = wsq[i] / k[i] - m1[i] ** 2
    v2 = (total_sq - wsq[i]) / (n - k[i]) - m2[i] ** 2
    spread = np.sqrt(max(v1, 0.0) + max(v2, 0.0))
    d = float(np.sqrt(2) * abs(m2[i] - m1[i]) / spread) if spread > 0 else float("inf")
    return i + 1, d


def _median(logs: np.ndarray, counts: np.ndarray) -> float:
    """The median speed of binned calls (each bin at its speed, weighted by its calls), by the one method."""
    median = percentile(np.exp(logs), 50, TPS_SCALE, counts)
    assert median is not None  # a mode has calls
    return median


def _mode(bins: list[dict[str, int]], logs: np.ndarray, counts: np.ndarray, total: int) -> dict[str, Any]:
    n = int(counts.sum())
    mode: dict[str, Any] = {"share": n / total, "user_decode_tps_p50": _median(logs, counts), "requests": n}
    routes: dict[str, int] = {}
    for b in bins:
        for route, c in b.items():
            if route:
                routes[route] = routes.get(route, 0) + c
    if shares := _shares(routes):
        route, share = next(iter(shares.items()))
        mode["route"], mode["route_share"] = route, share
    return mode


def speed_modes(t: RouteTally) -> list[dict[str, Any]]:
    """One or two modes of per-user decode speed, slowest first: share, median speed and main route of each."""
    if not t.speeds:
        return []
    keys = sorted(t.speeds)
    bins = [t.speeds[k] for k in keys]
    logs = np.asarray(keys, dtype=float) / SPEED_BINS_PER_E
    counts = np.asarray([sum(b.values()) for b in bins], dtype=float)
    total = int(counts.sum())
    cut, d = _best_split(logs, counts)
    if (
        cut
        and d > MIN_SEPARATION
        and _median(logs[cut:], counts[cut:]) >= MIN_RATIO * _median(logs[:cut], counts[:cut])
    ):
        return [_mode(bins[:cut], logs[:cut], counts[:cut], total), _mode(bins[cut:], logs[cut:], counts[cut:], total)]
    return [_mode(bins, logs, counts, total)]
