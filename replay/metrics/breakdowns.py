"""Breakdowns: the per-call figures split by context length and by turn depth.

A host that is fast on short prompts can fall over on long ones, and an agent's late turns carry the longest
contexts and the most reusable prefix, so one number per run hides what users ask about. This module groups
the calls the summary measured (successful, sent in the steady window) into fixed buckets and gives each the
same figures as the summary: requests, cache ratios, TTFT and decode speed. Fixed buckets, always all of them
(empty ones with ``requests`` 0), so runs can be put side by side row for row. Definitions in docs/metrics.md.

Bucket percentiles come from HdrHistograms (3 significant digits) kept per bucket by the accumulator, as the
summary's own do, so a run of hours needs no list of its calls; a bucket holding every call shows the summary's
own figure. ``percentiles`` (exact order statistics) serves the reports that do hold a run's records.
"""

from __future__ import annotations

from typing import Any

from replay.histogram import read_percentiles
from replay.metrics.accumulator import (
    CONTEXT_EDGES,
    CONTEXT_LABELS,
    TPS_SCALE,
    TURN_EDGES,
    TURN_LABELS,
    US,
    Accumulator,
)
from replay.records.run_file import RequestRecord


def prompt_tokens(r: RequestRecord) -> int:
    """The host's prompt count, or the client's estimate when the host reported none."""
    return r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_est


def ttft_s(r: RequestRecord) -> float | None:
    return r.t_first_token - r.t_sent if r.t_first_token is not None else None


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _row(label: str, low: int, high: int | None, b: Any) -> dict[str, Any]:
    hit = _ratio(b.host_cached, b.host_prompt) if b.reported else None
    reuse = _ratio(b.reusable, b.est)
    reuse_of_reported = _ratio(b.reported_reusable, b.reported_est)  # the efficiency's: over the same calls as hit
    return {
        "bucket": label,
        "low": low,
        "high": high,
        "requests": b.requests,
        "host_hit_ratio": hit,
        "client_reuse_ratio": reuse,
        "cache_efficiency": hit / reuse_of_reported if (hit is not None and reuse_of_reported) else None,
        "ttft_s": read_percentiles(b.ttft, (50, 95), US),
        "decode_tps": read_percentiles(b.decode, (25, 50), TPS_SCALE),
    }


def breakdown_figures(acc: Accumulator) -> dict[str, Any]:
    """The summary's ``breakdown``: the window's successful calls by context length and by turn depth."""
    measured, reported = acc.sums["measured"], acc.sums["m_prompt_reported"]
    source = "host" if reported == measured else (
        "client estimate" if reported == 0 else "host, client estimate where the host reported none")  # fmt: skip

    def rows(edges: tuple[int, ...], labels: tuple[str, ...], buckets: list[Any]) -> list[dict[str, Any]]:
        return [_row(label, edges[i], edges[i + 1] if i + 1 < len(edges) else None, b)
                for i, (label, b) in enumerate(zip(labels, buckets, strict=True))]  # fmt: skip

    return {
        "prompt_tokens_from": source,
        "by_context": rows(CONTEXT_EDGES, CONTEXT_LABELS, acc.by_context),
        "by_turn": rows(TURN_EDGES, TURN_LABELS, acc.by_turn),
    }


def breakdown(measured: list[RequestRecord]) -> dict[str, Any]:
    """The breakdown of a list of calls (all taken as measured)."""
    acc = Accumulator()
    for r in measured:
        acc.add(r, True, lambda t: True)
    return breakdown_figures(acc)
