"""``replay report RUN --html OUT``: one run's page, built from sections (replay.reports.html_page).

Each section is a function of a ``RunReport`` (replay.reports.report_input) that returns a ``Section``, or
``None`` when it has nothing to show (no truth log, no recorded latencies). ``RUN_SECTIONS`` is the run page
in order: the summary's tables (replay.reports.html_summary), then the pictures and the breakdowns. Other
pages (sweeps, comparisons, capacity searches) take any of these and add their own (docs/reports.md).
Figures come from the summary, never recomputed; pictures draw the records they come from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from replay.clients.flavours.responses import chained_state_warning
from replay.metrics.breakdowns import ttft_s
from replay.metrics.timeline import series, session_intervals
from replay.metrics.windows import series as window_series
from replay.reports import plots
from replay.reports.html_page import Section, figure, note, num, paragraph, pct, render_page, secs, table, text
from replay.reports.html_summary import SUMMARY_SECTIONS
from replay.reports.report_input import RunReport, SectionFn


def distributions(rep: RunReport) -> Section:
    calls = rep.measured()
    ttft = [v for v in map(ttft_s, calls) if v is not None]
    ttfat = [r.t_first_answer - r.t_sent for r in calls if r.t_first_answer is not None]
    e2e = [r.t_done - r.t_sent for r in calls if r.t_done is not None]
    title = "Latency distributions"
    if not e2e:
        return Section("distributions", title, note("No successful call in the steady window."))
    caption = "Share of the window's calls at or below each latency; dotted lines at p50, dashed at p95."
    return Section("distributions", title, figure(plots.latency_cdfs(ttft, ttfat, e2e), caption, title))


def over_time(rep: RunReport) -> Section:
    title = "Throughput and calls in flight over time"
    if not rep.run.requests:
        return Section("over-time", title, note("No calls recorded."))
    caption = (
        "Input tokens placed at each call's first token, output tokens at the reads that carried them; calls in"
        " flight averaged over each bin."
    )
    return Section("over-time", title, figure(plots.over_time(series(rep.run), rep.window()), caption, title))


def windows(rep: RunReport) -> Section | None:
    """A soak's windows (``--window``), when the run has them: each figure over time, exactly as the windows hold
    it (a host that degrades, or a speculator that warms up, shows here)."""
    rows = window_series(rep.run)
    if not rows:
        return None
    title = f"Over time, by window ({len(rows)} windows)"
    caption = (
        "Each window's figures from its own histograms: the calls completed in it and the tokens that fell in it"
        " (a long call's early tokens count in earlier windows). The same rows as the text report's over-time table."
    )
    if any((r.get("goodput") or {}).get("slo") for r in rows):
        caption += (" Goodput (--slo): the share of the calls completed in each window that met every term, and of the"
                    " complete tasks that ended in it whose every call met it.")  # fmt: skip
    return Section("windows", title, figure(plots.window_figures(rows, rep.window()), caption, title))


def sessions(rep: RunReport) -> Section:
    title = "Sessions over time"
    intervals = session_intervals(rep.run)
    if not intervals:
        return Section("sessions", title, note("No calls recorded."))
    caption = (
        "Each session's model calls, the client's send wait before them, and the pauses between an agent's calls"
        " (its tools, and waiting for its subagents, whose calls run in the lower half of the row)."
    )
    return Section("sessions", title, figure(plots.session_timelines(intervals, rep.window()), caption, title))


BUCKET_HEADERS = ("calls", "host hit", "client reuse", "efficiency", "TTFT p50", "TTFT p95", "decode p25", "decode p50")


def _bucket_row(r: dict[str, Any]) -> list[str]:
    t, d = r["ttft_s"], r["decode_tps"]
    ratios = [pct(r[k]) for k in ("host_hit_ratio", "client_reuse_ratio", "cache_efficiency")]
    speeds = [num(d["p25"], 1), num(d["p50"], 1)]
    return [r["bucket"], f"{r['requests']:,}", *ratios, secs(t["p50"]), secs(t["p95"]), *speeds]


def _buckets(rep: RunReport, key: str, sid: str, title: str, what: str, caption: str) -> Section | None:
    b = rep.summary.get("breakdown")
    if not b:
        return None
    rows = b[key]
    body = table([what, *BUCKET_HEADERS], map(_bucket_row, rows))
    if any(r["requests"] for r in rows):
        body += figure(plots.bucket_figures(rows, what), caption, title)
    return Section(sid, title, body)


def by_context(rep: RunReport) -> Section | None:
    src = (rep.summary.get("breakdown") or {}).get("prompt_tokens_from", "host")
    caption = f"The window's calls by prompt length (tokens as counted by the {src}; k = 1024); empty buckets left out."
    return _buckets(rep, "by_context", "by-context", "By context length", "prompt tokens", caption)


def by_turn(rep: RunReport) -> Section | None:
    caption = "The window's calls by turn index within their trajectory (0 = first call); empty buckets left out."
    return _buckets(rep, "by_turn", "by-turn", "By turn depth", "turn", caption)


def recorded(rep: RunReport) -> Section | None:
    rt = (rep.summary.get("breakdown") or {}).get("recorded_timeline")
    if rt is None:
        return None
    title = "Against the recorded timeline"
    body = "".join(note(n) for n in rt["notes"])
    if rt["tasks"]:
        keys = ("replayed_mean", "recorded_mean", "ratio_p50", "drift_p50", "drift_p95")
        rows = [
            [name, *[num(d[k], 2) if k == "ratio_p50" else secs(d[k]) for k in keys]]
            for name, d in (("model time", rt["model_time_s"]), ("tool time", rt["tool_time_s"]))
        ]
        body += paragraph(text(f"{rt['tasks']} complete tasks whose trajectories carry recorded latencies."))
        body += table(["per task", "replayed mean", "recorded mean", "ratio p50", "drift p50", "drift p95"], rows)
        if rep.drift:
            caption = "Each point a task; above the diagonal the replay took longer than the recording."
            body += figure(plots.drift_scatter(rep.drift), caption, title)
    return Section("recorded", title, body)


RUN_SECTIONS: tuple[SectionFn, ...] = (
    *SUMMARY_SECTIONS,
    distributions,
    over_time,
    windows,
    sessions,
    by_context,
    by_turn,
    recorded,
)


def meta_lines(rep: RunReport) -> list[str]:
    """What was run, against what, in plain text."""
    h, s = rep.run.header, rep.summary
    host, load, work = h.get("host") or {}, h.get("load") or {}, h.get("workload") or {}
    sim = f" (simulated, profile {h['simulated_host']})" if h.get("simulated_host") else ""
    errors = f", {s['errors']} errors {s['errors_by_class']}" if s["errors"] else ", no errors"
    padded = work.get("padded_tokens")
    pad = f" · {padded:,} stand-in tokens padded (--unrecorded-context pad)" if padded else ""
    over = " over WebSocket" if host.get("transport") == "websocket" else ""
    lost = chained_state_warning((h.get("request") or {}).get("responses_state"), host.get("dialect"), bool(sim))
    return [
        f"replay {h.get('replay_version', '')} · {h.get('created', '')} · host {host.get('base_url')}"
        f" ({host.get('api', 'chat')}{over}) · model {host.get('model')}{sim}",
        *([lost[0].upper() + lost[1:]] if lost else []),
        f"workload {work.get('trajectories')} trajectories, {work.get('turns')} turns{pad} · concurrency"
        f" {load.get('concurrency')} · tool time {load.get('tool_time')} · seed {load.get('seed')}",
        f"{s['requests']:,} calls{errors}",
    ]


def render(rep: RunReport, sections: Sequence[SectionFn] = RUN_SECTIONS) -> str:
    """The run's page: every section that has something to show, in order (needs matplotlib)."""
    plots.require_matplotlib()
    made = [sec for fn in sections if (sec := fn(rep)) is not None]
    return render_page(f"replay report: {rep.name}", made, meta_lines(rep))
