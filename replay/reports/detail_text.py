"""The terminal report's detail: the breakdowns by context length and turn depth, the replay against the recorded
timeline, the host's own metrics per window (what ``--scrape-metrics`` kept) and goodput per window (``--slo``).
Each was in the JSON and the HTML report only; every line fits 100 columns and says what it covers (calls per
bucket, tasks compared, windows)."""

from __future__ import annotations

from typing import Any

from replay.metrics.host.speculation import from_host_metrics
from replay.reports.units import pct as _pct
from replay.reports.units import rate as _rate
from replay.reports.units import seconds as _ms
from replay.workload.words import plural


def _n(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def breakdown_lines(b: dict[str, Any] | None) -> list[str]:
    """The per-call figures by prompt length and by turn depth: the buckets holding calls (empty ones left out)."""
    if not b:
        return []
    out: list[str] = []
    for key, title in (("by_context", "prompt tokens"), ("by_turn", "turn")):
        rows = [r for r in b.get(key) or () if r["requests"]]
        if not rows:
            continue
        out += [
            "",
            f"By {title} (calls measured in the window; prompt length from the {b.get('prompt_tokens_from')})"
            if key == "by_context"
            else f"By {title} (0 = a trajectory's first call)",
            f"  {'bucket':<8} {'calls':>7}  {'TTFT p50':>10} {'TTFT p95':>10}  {'decode p25':>10}"
            f"  {'host hit':>8}  {'reusable':>8}",
        ]
        for r in rows:
            t, d = r["ttft_s"], r["decode_tps"]
            out.append(
                f"  {r['bucket']:<8} {r['requests']:>7,}  {_ms(t['p50']):>10} {_ms(t['p95']):>10}  {_n(d['p25']):>10}"
                f"  {_pct(r['host_hit_ratio']):>8}  {_pct(r['client_reuse_ratio']):>8}"
            )
    return out


def drift_lines(rt: dict[str, Any] | None) -> list[str]:
    """The replay's model and tool time per task against the recording's (``breakdown.recorded_timeline``)."""
    if not rt:
        return []
    if not rt.get("tasks"):
        notes = "; ".join(rt.get("notes") or ()) or "nothing to compare"
        return ["", "Against the recorded timeline: no task compared", f"  {notes}"]
    lines = ["", f"Against the recorded timeline ({plural(rt['tasks'], 'complete task')} with a recorded latency on"
                 " every turn; per task, replayed − recorded)"]  # fmt: skip
    for key, name in (("model_time_s", "model time"), ("tool_time_s", "tool time")):
        f = rt.get(key)
        if f:
            lines.append(
                f"  {name:<10} mean {_ms(f['replayed_mean'])} vs {_ms(f['recorded_mean'])} recorded · ratio p50"
                f" {f['ratio_p50']:.2f} · drift p50 {_ms(f['drift_p50'])}, p95 {_ms(f['drift_p95'])}"
            )
    lines += [f"  note: {n}" for n in rt.get("notes") or ()]
    return lines


HOST_FIGURES = (("prefix hit", None), ("kv use", "kv_cache_usage"), ("waiting", "requests_waiting"),
                ("running", "requests_running"), ("preempt", "preemptions"))  # fmt: skip


def _host_cell(m: dict[str, Any], key: str | None) -> str:
    if key is None:  # the window's prefix-cache hits over queries (vLLM, the simulated host), or SGLang's own rate
        hits, queries = m.get("prefix_cache_hits"), m.get("prefix_cache_queries")
        if hits is not None and queries:
            return _pct(hits / queries)
        return _pct(m.get("cache_hit_rate"))
    if key == "speculation":  # the window's mean acceptance length from the host's counters (or SGLang's gauge)
        sp = from_host_metrics(m)
        length = sp["acceptance_length_mean"] if sp else None
        return "-" if length is None else f"{length:.2f}"
    v = m.get(key)
    if v is None:
        return "-"
    return _pct(v) if key == "kv_cache_usage" else f"{v:,.0f}"


def host_metrics_lines(windows: list[dict[str, Any]] | None, max_rows: int = 24) -> list[str]:
    """The host's own figures per window, as ``--scrape-metrics`` kept them (counters: the window's increase;
    gauges: their value as it closed); windows whose scrape failed say so."""
    rows = [w for w in windows or () if w.get("host_metrics")]
    if not rows:
        return []
    figures = HOST_FIGURES + (
        (("accept.", "speculation"),) if any(from_host_metrics(w["host_metrics"]) for w in rows) else ()
    )
    step = -(-len(rows) // max_rows)
    every = f", every {step}th shown" if step > 1 else ""
    lines = ["", f"The host's own metrics per window ({plural(len(rows), 'window')} scraped{every})",
             "     start" + "".join(f" {name:>10}" for name, _ in figures)]  # fmt: skip
    for w in rows[::step]:
        m = w["host_metrics"]
        if m.get("error"):
            lines.append(f"  {w['start_s']:>6.0f} s  {m['error']}")
            continue
        lines.append(f"  {w['start_s']:>6.0f} s" + "".join(f" {_host_cell(m, key):>10}" for _, key in figures))
    return lines


def goodput_windows_lines(windows: list[dict[str, Any]] | None, max_rows: int = 24) -> list[str]:
    """Goodput per window (a run with ``--slo``): the calls completed in the window that met every term, the complete
    tasks that ended in it none of whose calls missed, and the met calls' tokens/s over the window."""
    rows = [w for w in windows or () if (w.get("goodput") or {}).get("slo")]
    if rows and not rows[-1]["requests"] and not rows[-1]["total_tps"]:  # the run stopped as it opened
        rows = rows[:-1]
    if not rows:
        return []
    step = -(-len(rows) // max_rows)
    every = f", every {step}th shown" if step > 1 else ""
    lines = [
        "",
        f"Goodput over time at the per-call SLO {rows[0]['goodput']['slo']} ({plural(len(rows), 'window')}{every})",
        "     start   calls  calls met   tasks  tasks met  good out t/s  good total t/s",
    ]
    for w in rows[::step]:
        g = w["goodput"]
        lines.append(
            f"  {w['start_s']:>6.0f} s {g['calls']:>7,} {_pct(g['calls_met_share']):>10} {g['tasks']:>7,}"
            f" {_pct(g['tasks_met_share']):>10} {_rate(g['output_tps']):>13} {_rate(g['total_tps']):>15}"
        )
    lines.append("  calls: completed in the window; tasks: complete tasks that ended in it, judged by all their calls")
    return lines
