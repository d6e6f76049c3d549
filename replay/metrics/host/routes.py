"""What served each call (model, route, tier), whether a share of calls fell back, and how speed follows load.

A call's served identity is what the host says served it: the model it answered with, its route (the serving
provider: OpenRouter ``provider``, the Vercel gateway's final provider; else the route header ``x-replay-route``,
the simulated host's) and the service tier it answered. A tier is no route: a Responses answer's
``service_tier: auto`` says how the call was billed, not where it went, so the ``routes`` figure (``route_of``)
counts routes only and the tiers are ``service_tiers``. Shares are over the calls that succeeded.

Speed modes: Baseten's Fast tier and Vercel's ``speed: fast`` fall back to base capacity when the fast pool is
full, so per-user decode speed splits into two clusters. The detector sorts the calls' speeds in log space (as
speeds multiply; they are tallied in log bins 0.25 % wide, so a run of any length fits), takes the split that best
separates them (Otsu: the largest between-group variance), and finds two clusters when each side holds at least
``MIN_SHARE`` of the calls, the groups are well apart (Ashman's D above ``MIN_SEPARATION``: 2 is the usual bound
for a clean separation) and their medians differ by at least ``MIN_RATIO``.

Two clusters are called two speed modes (and a fallback) only when they coincide with a different served model,
route or tier: the main value of that part of the identity differs between the clusters and holds at least
``TIE_SHARE`` of each. Two clusters that no identity explains may be load (the batch a call shares changes as
sessions enter and leave tool pauses, so per-user speed varies with the number of calls in flight) or prompt length
(a long context slows each decode step): the figure names the cause only where its rows show it, the speed per
number of calls in flight (``speed_by_load``) or per prompt length (the breakdown's rows) moving as much as the
clusters differ; a run at one load level shows no load effect. A host that says per call that it fell
back (OpenRouter's ``openrouter_metadata``, the Vercel gateway's ``modelAttempts``, the simulated host's
``fallback:`` route) is counted per call, speed or not.

Only calls whose decode was seen are binned: a call whose tokens were read at once (a client stalled, then read
what had piled up) shows a speed no host reaches, and is left out (``seen_decode_speed``).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from replay.histogram import TPS_SCALE, Histogram, percentile
from replay.metrics.recipes.recipe_tally import decode_tps
from replay.records.run_file import RequestRecord

MIN_SHARE = 0.05
MIN_CALLS = 3
MIN_SEPARATION = 2.0
MIN_RATIO = 1.4
TIE_SHARE = 0.75  # a cluster's main model, route or tier holds at least this share of it
SPEED_BINS_PER_E = 400  # log-speed bins per unit of log speed: a bin's centre is within 0.125 % of its calls
SEP = "\x1f"  # between the parts of an identity key: model, route, tier
PARTS = ("model", "route", "tier")
FALLBACK_ROUTE = "fallback"  # the simulated host's fallback routes are called fallback:PROFILE


class RouteTally(Protocol):
    """What the figures here read of a run's tally (``host_tally.HostTally``, which bins calls with this module)."""

    routes: dict[str, int]  # successful requests per served route (route_of)
    tiers: dict[str, int]  # successful requests per answered service tier
    idents: dict[str, int]  # successful requests per served identity key (model, route, tier)
    fallbacks: dict[str, int]  # successful requests a host said fell back, per identity key
    fallback_by: dict[str, int]  # the same, per field that said so
    speeds: dict[int, dict[str, int]]  # log-speed bin -> {identity key: calls}
    load: dict[int, Histogram]  # calls in flight (bucket) -> per-user decode speeds (milli-tokens/s)


MAX_NAME = 64  # a route or tier name as the figures keep it: a host may send anything there
MAX_NAMES = 64  # distinct routes (tiers, rate-limit buckets) kept per tally; the rest are counted under OTHER
OTHER = "(other)"


def host_name(value: object) -> str | None:
    """A name a host sent (a route, a tier), as a figure may key it: text, printable, at most MAX_NAME characters."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) <= MAX_NAME and value.isprintable():  # as most are: kept as it is, without a step per character
        return value
    text = "".join(c if c.isprintable() else "?" for c in value[: MAX_NAME + 1])
    return text if len(text) <= MAX_NAME else text[: MAX_NAME - 3] + "..."


def count_name(counts: dict[str, int], name: str, n: int = 1) -> None:
    """``counts[name] += n``, with at most MAX_NAMES names: a host that names a new route every call (a 935 KB
    report line once) fills OTHER instead."""
    if name not in counts and len(counts) >= MAX_NAMES:
        name = OTHER
    counts[name] = counts.get(name, 0) + n


def route_of(r: RequestRecord) -> str | None:
    """The route that served the call (the serving provider, else the route header), None when the host named
    none (its answered tier is not one)."""
    served, headers = r.served or {}, r.headers or {}
    return host_name(served.get("provider") or headers.get("x-replay-route"))


def identity_of(r: RequestRecord, route: str | None = None) -> str:
    """The call's served identity as one key: model, route and tier, each "" when the host named none; ``route``:
    the call's ``route_of`` (or "") where the caller has it already."""
    served = r.served or {}
    route = (route_of(r) or "") if route is None else route
    return SEP.join((host_name(served.get("model")) or "", route, host_name(served.get("service_tier")) or ""))


def parts_of(key: str) -> tuple[str, str, str]:
    """(model, route, tier) of an identity key; a key written before identities (a route alone) is that route."""
    parts = key.split(SEP)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else ("", key, "")


def fallback_fields(r: RequestRecord) -> list[str]:
    """The fields by which the host said this call fell back (none: it did not say so)."""
    out = []
    served, headers = r.served or {}, r.headers or {}
    if isinstance(served.get("fallback"), str):
        out.append(served["fallback"])
    if str(headers.get("x-replay-route", "")).startswith(FALLBACK_ROUTE):
        out.append("x-replay-route")
    return out


def seen_decode_speed(r: RequestRecord) -> float | None:
    """Per-user decode speed of one call when its decode was seen: the summary's (``decode_tps``), which has none
    for a call whose tokens were read at once (a client stalled, then read what had piled up in microseconds)."""
    return decode_tps(r)


def load_bucket(inflight: int) -> int:
    """Calls in flight in powers of two: 1, 2-3, 4-7, ... (bucket k holds 2^(k-1) to 2^k − 1)."""
    return max(inflight, 1).bit_length()


def _bucket_label(k: int) -> str:
    lo, hi = 1 << (k - 1), (1 << k) - 1
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _shares(counts: dict[str, int]) -> dict[str, float]:
    total = sum(counts.values())
    return {k: v / total for k, v in sorted(counts.items(), key=lambda kv: -kv[1])} if total else {}


def route_shares(t: RouteTally) -> dict[str, float]:
    """The share of successful calls per served route ({} when the host names none)."""
    return _shares(t.routes)


def tier_shares(t: RouteTally) -> dict[str, float]:
    """The share of successful calls per service tier as the host answered it."""
    return _shares(t.tiers)


def _part_counts(idents: dict[str, int], i: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, n in idents.items():
        if value := parts_of(key)[i]:
            out[value] = out.get(value, 0) + n
    return out


def served_shares(t: RouteTally) -> dict[str, dict[str, float]]:
    """``served{models, routes, tiers}``: the share of successful calls per served model, route and tier."""
    return {
        "models": _shares(_part_counts(t.idents, 0)),
        "routes": route_shares(t),
        "tiers": tier_shares(t),
    }


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


def _mains(bins: list[dict[str, int]]) -> list[tuple[str, float]]:
    """(main value, its share) of each part of the identity (model, route, tier) over the calls of ``bins``."""
    per_part: list[dict[str, int]] = [{}, {}, {}]
    for b in bins:
        for key, c in b.items():
            for i, value in enumerate(parts_of(key)):
                per_part[i][value] = per_part[i].get(value, 0) + c
    return [next(iter(_shares(counts).items()), ("", 0.0)) for counts in per_part]


def _mode(bins: list[dict[str, int]], logs: np.ndarray, counts: np.ndarray, total: int) -> dict[str, Any]:
    n = int(counts.sum())
    mode: dict[str, Any] = {"share": n / total, "user_decode_tps_p50": _median(logs, counts), "requests": n}
    mains = _mains(bins)
    route, route_share = mains[1]
    if route:  # the mode's main route (its tier is in ``served``)
        mode["route"], mode["route_share"] = route, route_share
    mode["served"] = {
        name: {"value": value, "share": share} for name, (value, share) in zip(PARTS, mains, strict=True) if value
    }
    return mode


def _clusters(t: RouteTally) -> tuple[list[dict[str, Any]], list[str]]:
    """The speed clusters (one, or two slowest first) and the parts of the identity two clusters differ in."""
    if not t.speeds:
        return [], []
    keys = sorted(t.speeds)
    bins = [t.speeds[k] for k in keys]
    logs = np.asarray(keys, dtype=float) / SPEED_BINS_PER_E
    counts = np.asarray([sum(b.values()) for b in bins], dtype=float)
    total = int(counts.sum())
    cut, d = _best_split(logs, counts)
    if not (
        cut
        and d > MIN_SEPARATION
        and _median(logs[cut:], counts[cut:]) >= MIN_RATIO * _median(logs[:cut], counts[:cut])
    ):
        return [_mode(bins, logs, counts, total)], []
    slow, fast = _mains(bins[:cut]), _mains(bins[cut:])
    tied = [
        name
        for name, (s_value, s_share), (f_value, f_share) in zip(PARTS, slow, fast, strict=True)
        if s_value and f_value and s_value != f_value and min(s_share, f_share) >= TIE_SHARE
    ]
    two = [_mode(bins[:cut], logs[:cut], counts[:cut], total), _mode(bins[cut:], logs[cut:], counts[cut:], total)]
    return two, tied


def speed_modes(t: RouteTally) -> list[dict[str, Any]]:
    """Two modes of per-user decode speed (slowest first) when they coincide with a different served model, route
    or tier; else one (the calls together): share, median speed and the main served identity of each."""
    modes, tied = _clusters(t)
    if len(modes) == 2 and not tied:
        return [_whole(t)]
    return modes


def _whole(t: RouteTally) -> dict[str, Any]:
    keys = sorted(t.speeds)
    bins = [t.speeds[k] for k in keys]
    counts = np.asarray([sum(b.values()) for b in bins], dtype=float)
    return _mode(bins, np.asarray(keys, dtype=float) / SPEED_BINS_PER_E, counts, int(counts.sum()))


def fallback(t: RouteTally) -> dict[str, Any] | None:
    """``fallback{share, by, requests, served}``: the share of successful calls served by a fallback, what said so
    (the host's per-call fields, or the part of the identity a slower speed mode coincides with), and the
    fallback's served identity; None when nothing says a fallback happened."""
    ok = sum(t.idents.values())
    modes, tied = _clusters(t)
    flagged = sum(t.fallbacks.values())
    if not ok or not (flagged or (len(modes) == 2 and tied)):
        return None
    by = sorted(t.fallback_by)
    if flagged:
        key = max(t.fallbacks, key=lambda k: t.fallbacks[k])
        n = flagged
    else:
        slow = modes[0]["served"]
        i = PARTS.index(tied[0])
        key = SEP.join(slow[p]["value"] if p == tied[0] else "" for p in PARTS)
        n = sum(c for k, c in t.idents.items() if parts_of(k)[i] == slow[tied[0]]["value"])
    if len(modes) == 2 and tied:
        by += tied
    served = {name: value for name, value in zip(PARTS, parts_of(key), strict=True) if value}
    return {"share": n / ok, "by": by, "requests": n, "served": served}


def speed_by_load(t: RouteTally, by_prompt: list[Histogram] | None = None) -> dict[str, Any]:
    """``speed_by_load{split, rows, by}``: per-user decode speed per number of calls in flight when each was sent
    (1, 2-3, 4-7, ...); ``split``: the speeds fall in two clusters that no served identity explains; ``by``: what
    the rows show the speed varies with, ``load`` (these rows) and ``prompt_length`` (``by_prompt``: the speeds of
    the breakdown's prompt-length rows, shortest first), each when ``varies`` finds it; [] when neither does."""
    modes, tied = _clusters(t)
    rows, load = [], []
    for k in sorted(t.load):
        h = t.load[k]
        n = h.get_total_count()
        if n:
            p50 = h.get_value_at_percentile(50) / TPS_SCALE
            rows.append({"inflight": _bucket_label(k), "requests": n, "user_decode_tps_p50": p50})
            load.append(h)
    split = len(modes) == 2 and not tied
    by = [name for name, hists in (("load", load), ("prompt_length", by_prompt or [])) if split and varies(hists)]
    return {"split": split, "rows": rows, "by": by}


def varies(rows: list[Histogram]) -> bool:
    """Whether per-user speed moves along ``rows`` (ordered by what they bin: calls in flight, prompt length) as
    much as two speed clusters differ: the median of the first row and of the last, among rows of ``MIN_CALLS``
    calls at least, differ by ``MIN_RATIO`` or more. One row (a run at one load level) shows no such effect."""
    p50s = [h.get_value_at_percentile(50) for h in rows if h.get_total_count() >= MIN_CALLS]
    if len(p50s) < 2:
        return False
    first, last = p50s[0], p50s[-1]
    return max(first, last) >= MIN_RATIO * min(first, last)
