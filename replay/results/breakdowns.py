"""Breakdowns: the per-call figures split by context length and by turn depth.

A host that is fast on short prompts can fall over on long ones, and an agent's late turns carry the longest
contexts and the most reusable prefix, so one number per run hides what users ask about. This module groups
the calls the summary measured (successful, sent in the steady window) into fixed buckets and gives each the
same figures as the summary: requests, cache ratios, TTFT and decode speed. Fixed buckets, always all of them
(empty ones with ``requests`` 0), so runs can be put side by side row for row. Definitions in docs/metrics.md.

Percentiles are order statistics (numpy's ``inverted_cdf``), which is what HdrHistogram's
``get_value_at_percentile`` approximates to 3 significant digits in the summary: a bucket holding every call
shows the summary's own figure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from replay.results.records import RequestRecord

K = 1024
# Prompt tokens: [low, high) per bucket; the vendor's "8k" is 8 × 1024.
CONTEXT_EDGES = (0, 8 * K, 32 * K, 64 * K, 128 * K)
CONTEXT_LABELS = ("<8k", "8-32k", "32-64k", "64-128k", ">=128k")
# Turn index within its trajectory (0 = first call): powers of two, so early turns keep their own rows.
TURN_EDGES = (0, 1, 2, 4, 8, 16, 32, 64)
TURN_LABELS = ("0", "1", "2-3", "4-7", "8-15", "16-31", "32-63", ">=64")


def prompt_tokens(r: RequestRecord) -> int:
    """The host's prompt count, or the client's estimate when the host reported none."""
    return r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_est


def ttft_s(r: RequestRecord) -> float | None:
    return r.t_first_token - r.t_sent if r.t_first_token is not None else None


def decode_tps(r: RequestRecord) -> float | None:
    """Per-user decode speed after the first token, as the summary's ``user_decode_tps`` defines it."""
    n_out = r.output_tokens if r.output_tokens is not None else r.output_events
    if n_out >= 2 and r.t_first_token and r.t_last_token and r.t_last_token > r.t_first_token:
        return (n_out - 1) / (r.t_last_token - r.t_first_token)
    return None


def percentiles(values: Sequence[float], ps: tuple[int, ...]) -> dict[str, float | int | None]:
    """Order-statistic percentiles and the sample count; ``None`` for each when there are no samples."""
    if not values:
        return {f"p{p}": None for p in ps} | {"n": 0}
    got = np.percentile(np.asarray(values, dtype=float), ps, method="inverted_cdf")
    return {f"p{p}": float(v) for p, v in zip(ps, got, strict=True)} | {"n": len(values)}


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def bucket_figures(calls: list[RequestRecord]) -> dict[str, Any]:
    """The summary's per-call figures over one bucket's calls."""
    est = sum(r.prompt_tokens_est for r in calls)
    reusable = sum(r.reusable_prefix_tokens for r in calls)
    reported = [r for r in calls if r.prompt_tokens is not None and r.cached_tokens is not None]
    hit = _ratio(sum(r.cached_tokens or 0 for r in reported), sum(r.prompt_tokens or 0 for r in reported))
    reuse = _ratio(reusable, est)
    ttft = [v for v in map(ttft_s, calls) if v is not None]
    decode = [v for v in map(decode_tps, calls) if v is not None]
    return {
        "requests": len(calls),
        "host_hit_ratio": hit,
        "client_reuse_ratio": reuse,
        "cache_efficiency": hit / reuse if (hit is not None and reuse) else None,
        "ttft_s": percentiles(ttft, (50, 95)),
        "decode_tps": percentiles(decode, (25, 50)),
    }


def _bucket_index(value: int, edges: tuple[int, ...]) -> int:
    return int(np.searchsorted(edges, value, side="right")) - 1


def by_buckets(
    calls: list[RequestRecord], key: Callable[[RequestRecord], int], edges: tuple[int, ...], labels: tuple[str, ...]
) -> list[dict[str, Any]]:
    """One row per bucket [edges[i], edges[i+1]) of ``key``, in order, empty buckets included."""
    groups: list[list[RequestRecord]] = [[] for _ in labels]
    for r in calls:
        groups[max(0, _bucket_index(key(r), edges))].append(r)
    rows = []
    for i, (label, group) in enumerate(zip(labels, groups, strict=True)):
        high = edges[i + 1] if i + 1 < len(edges) else None
        rows.append({"bucket": label, "low": edges[i], "high": high, **bucket_figures(group)})
    return rows


def _prompt_source(calls: list[RequestRecord]) -> str:
    reported = sum(r.prompt_tokens is not None for r in calls)
    if reported == len(calls):
        return "host"
    return "client estimate" if reported == 0 else "host, client estimate where the host reported none"


def breakdown(measured: list[RequestRecord]) -> dict[str, Any]:
    """The summary's ``breakdown``: the window's successful calls by context length and by turn depth."""
    return {
        "prompt_tokens_from": _prompt_source(measured),
        "by_context": by_buckets(measured, prompt_tokens, CONTEXT_EDGES, CONTEXT_LABELS),
        "by_turn": by_buckets(measured, lambda r: r.turn, TURN_EDGES, TURN_LABELS),
    }
