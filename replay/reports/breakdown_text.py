"""The terminal report's breakdowns: the calls by context length and by turn depth, the replay beside its recorded
timeline, and the host's own metrics scraped each window, each as the summary's JSON holds it (docs/metrics.md)."""

from __future__ import annotations

from typing import Any

from replay.reports.units import pct, seconds
from replay.workload.words import plural

COUNTER_SUMS = ("prefix_cache_hits", "prefix_cache_queries", "preemptions", "prompt_tokens", "generation_tokens")
GAUGE_PEAKS = ("kv_cache_usage", "requests_waiting", "requests_running")


def breakdown_lines(s: dict[str, Any]) -> list[str]:
    b = s.get("breakdown") or {}
    lines: list[str] = []
    for key, title in (("by_context", "By prompt length"), ("by_turn", "By turn depth")):
        rows = [r for r in b.get(key) or () if r["requests"]]
        if not rows:
            continue
        left_out = len(b[key]) - len(rows)
        note = f"; {plural(left_out, 'empty bucket')} left out" if left_out else ""
        lines += [
            "",
            f"{title} (calls sent in the window; prompt tokens from {b.get('prompt_tokens_from')}{note})",
            "  bucket       calls   TTFT p50   TTFT p95  decode p25  decode p50  host hit  efficiency",
        ]
        lines += [_bucket(r) for r in rows]
    return lines + _timeline(b.get("recorded_timeline")) + host_metrics_lines(s.get("windows") or [])


def _bucket(r: dict[str, Any]) -> str:
    ttft, decode = r["ttft_s"], r["decode_tps"]
    return (
        f"  {r['bucket']:<10} {r['requests']:>7,} {seconds(ttft['p50']):>10} {seconds(ttft['p95']):>10}"
        f" {_tps(decode['p25']):>11} {_tps(decode['p50']):>11} {pct(r['host_hit_ratio']):>9}"
        f" {pct(r['cache_efficiency']):>11}"
    )


def _tps(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def _timeline(t: dict[str, Any] | None) -> list[str]:
    if not t:
        return []
    if not t["tasks"]:
        return ["", f"Beside the recorded timeline: nothing compared ({'; '.join(t['notes'])})"]
    m, tool = t["model_time_s"], t["tool_time_s"]
    lines = [
        "",
        f"Beside the recorded timeline ({plural(t['tasks'], 'complete task')} whose every call was recorded)",
        f"  model time per task: replayed {seconds(m['replayed_mean'])}, recorded {seconds(m['recorded_mean'])}"
        f" (ratio p50 {_ratio(m['ratio_p50'])}; drift p50 {seconds(m['drift_p50'])}, p95 {seconds(m['drift_p95'])})",
        f"  tool time per task: replayed {seconds(tool['replayed_mean'])}, recorded {seconds(tool['recorded_mean'])}"
        f" (drift p50 {seconds(tool['drift_p50'])}, p95 {seconds(tool['drift_p95'])})",
    ]
    return lines + [f"  note: {n}" for n in t["notes"]]


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def host_metrics_lines(windows: list[dict[str, Any]]) -> list[str]:
    """The host's own metrics over the windows that scraped them: counters summed, gauges at their peak."""
    scraped = [w.get("host_metrics") or {} for w in windows]
    good = [m for m in scraped if m and "error" not in m]
    failed = sum(1 for m in scraped if "error" in m)
    if not good:
        return ["", f"The host's own metrics: {plural(failed, 'window')} could not be scraped"] if failed else []
    sums = {k: sum(m.get(k, 0.0) for m in good) for k in COUNTER_SUMS if any(k in m for m in good)}
    peaks = {k: max(m[k] for m in good if k in m) for k in GAUGE_PEAKS if any(k in m for m in good)}
    parts = []
    if "prefix_cache_hits" in sums and sums.get("prefix_cache_queries"):
        hits, queries = sums.pop("prefix_cache_hits"), sums.pop("prefix_cache_queries")
        parts.append(f"prefix cache hits {hits:,.0f} of {queries:,.0f} tokens queried ({pct(hits / queries)})")
    parts += [f"{k.replace('_', ' ')} {v:,.0f}" for k, v in sums.items()]
    parts += [
        f"{k.replace('_', ' ')} peak {pct(v) if k == 'kv_cache_usage' else f'{v:,.0f}'}" for k, v in peaks.items()
    ]
    missing = f"; {plural(failed, 'window')} could not be scraped" if failed else ""
    return ["", f"The host's own metrics ({plural(len(good), 'window')} scraped{missing})", "  " + " · ".join(parts)]


def _peak(name: str, v: float) -> str:
    return pct(v) if name == "kv_cache_usage" else f"{v:,.0f}"
