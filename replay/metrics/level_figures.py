"""The headline figures of a run, named once: what a sweep's table, a comparison and a claim read from a summary.

Every figure here is a path into the summary of ``replay.metrics.summary.summarize`` (docs/metrics.md), with a
label, a unit and which way is better, so the sweep table, the side-by-side comparison and their pages list the
same figures in the same order. ``error_rate`` is the one derived figure: failed calls over all calls of the run,
taken from the summary when it has that key, else computed from ``errors`` and ``requests``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Figure:
    """One headline figure: ``key`` is a dotted path into the summary; ``better`` is 'higher' or 'lower'."""

    key: str
    label: str
    unit: str  # tok/s | tok/min | s | share | usd
    better: str


FIGURES: tuple[Figure, ...] = (
    Figure("throughput.total_tps", "total tokens/s", "tok/s", "higher"),
    Figure("throughput.output_tps", "output tokens/s", "tok/s", "higher"),
    Figure("throughput.total_tokens_per_min", "total tokens/min", "tok/min", "higher"),
    Figure("ttft_s.p50", "TTFT p50", "s", "lower"),
    Figure("ttft_s.p95", "TTFT p95", "s", "lower"),
    Figure("ttfat_s.p50", "first answer token p50", "s", "lower"),
    Figure("ttfat_s.p95", "first answer token p95", "s", "lower"),
    Figure("e2e_s.p50", "end-to-end p50", "s", "lower"),
    Figure("user_decode_tps.p25", "per-user decode p25", "tok/s", "higher"),
    Figure("user_decode_tps.p50", "per-user decode p50", "tok/s", "higher"),
    Figure("cache.host_hit_ratio", "host cache hit", "share", "higher"),
    Figure("error_rate", "error rate", "share", "lower"),
    Figure("tasks.wall_s", "task wall time, mean", "s", "lower"),
    Figure("cost.per_task_usd", "cost per task (rate card)", "usd", "lower"),
    Figure("cost.per_mtok_usd", "cost per M tokens (rate card)", "usd", "lower"),
)
BY_KEY = {f.key: f for f in FIGURES}


def lookup(summary: dict[str, Any], key: str) -> Any:
    """The value at dotted ``key`` (None where any part is missing)."""
    node: Any = summary
    for part in key.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def value(summary: dict[str, Any], key: str) -> float | None:
    """A figure as a number, or None when the summary does not have it."""
    if key == "error_rate":
        return error_rate(summary)
    v = lookup(summary, key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def error_rate(summary: dict[str, Any]) -> float | None:
    """Failed calls over all calls (the summary's own ``error_rate`` when it has one)."""
    own = summary.get("error_rate")
    if isinstance(own, int | float):
        return float(own)
    requests = summary.get("requests")
    if not requests:
        return None
    return float(summary.get("errors", 0)) / float(requests)


def with_derived(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary with ``error_rate`` filled in, so thresholds (``--slo 'error_rate<1%'``) can judge it."""
    out = dict(summary)
    out.setdefault("error_rate", error_rate(summary))
    return out
