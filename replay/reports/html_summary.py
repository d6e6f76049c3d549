"""The summary's figures as page sections: the headline block, then latency, throughput, cache, tasks, answers,
client and the truth check, the same figures as the text report (replay.reports.text_report), grouped the same way.

Every function takes a ``RunReport`` and returns a ``Section`` (or ``None`` when the run has nothing for it).
"""

from __future__ import annotations

from typing import Any

from replay.metrics.client_pauses import paused_warning
from replay.reports.client_pauses import html_rows as pause_rows
from replay.reports.html_answers import answers
from replay.reports.html_page import Section, note, num, paragraph, pct, secs, table, text, tiles
from replay.reports.html_served import served
from replay.reports.report_input import RunReport


def _one(v: float | None) -> str:
    return num(v, 1)


def _row(name: str, d: dict[str, Any], keys: tuple[str, ...], fmt: Any = secs) -> list[str]:
    unmeasured = f" ({d['not_measured']:,} not measured)" if d.get("not_measured") else ""
    return [name, *[fmt(d.get(k)) for k in keys], f"{d.get('n', 0):,}{unmeasured}"]


def headline(rep: RunReport) -> Section:
    """The figures analysts quote (Artificial Analysis style), and what they include and exclude."""
    s = rep.summary
    t, k = s["throughput"], s["tasks"]
    items = [
        (num(t["total_tps"]), "total tokens/s (cached input + new input + output)"),
        (num(t["total_tokens_per_min"]), "total tokens/min, cached input included"),
        (_one(s["user_decode_tps"]["p25"]), "per-user output tokens/s after the first token, p25"),
        (secs(s["ttfat_s"]["p50"]), "time to first answer token, p50"),
        (secs(s["ttfat_s"]["p95"]), "time to first answer token, p95"),
    ]
    words = (
        "Tool time is excluded from every model figure: latencies and speeds run from a call's bytes sent to its"
        " stream's end, and throughput counts the tokens of the steady window, whatever the agents did between calls."
    )
    if k["count"]:
        words += (
            f" Tasks spent {pct(k['model_share'])} of their wall time waiting for the model, and a mean"
            f" {secs(k['tool_time_s'])} per task in tools."
        )
    return Section("headline", "At a glance", tiles(items) + paragraph(text(words)))


def latency(rep: RunReport) -> Section:
    s = rep.summary
    keys = ("p50", "p90", "p95", "p99", "mean")
    rows = [
        _row("TTFT", s["ttft_s"], keys),
        _row("time to first answer token", s["ttfat_s"], keys),
        _row("end-to-end", s["e2e_s"], keys),
        _row("inter-token latency", s["itl_s"], keys),
    ]
    wait = s["user_output_tps_incl_wait"]
    speeds = [
        _row("per-user decode tok/s (after the first token)", s["user_decode_tps"], ("p25", "p50", "p75"), _one),
        ["per-user tok/s incl. wait", _one(wait["p25"]), _one(wait["p50"]), "-", f"{wait.get('n', 0):,}"],
    ]
    ikeys = ("p50", "p75", "p90", "p95")
    inter = [
        _row("interactivity (1 / ITL pX)", s["interactivity"] | {"n": s["itl_s"]["n"]}, ikeys, _one),
        _row("E2E-normalised interactivity (1 / pX of e2e / output tokens)", s["interactivity_e2e"], ikeys, _one),
    ]
    body = (
        paragraph(text(f"Calls sent in the steady window: {s['window']['requests']:,}."))
        + table(["latency", *keys, "n"], rows)
        + table(["speed", "p25", "p50", "p75", "n"], speeds)
        + table(["tokens/s a user sees", *ikeys, "n"], inter)
        + note(
            "Interactivity inverts the slow tail after the percentile: p90 is the speed nine calls (or gaps) in"
            " ten get or beat. The E2E-normalised one includes queueing and prefill (InferenceX AgentX's x axis)."
        )
    )
    return Section("latency", "Latency", body + _goodput(s.get("goodput")))


def _goodput(g: dict[str, Any] | None) -> str:
    """Goodput at the run's per-call SLO (``--slo``), when it has one."""
    if not g or not g.get("slo"):
        return ""
    rows = [
        ["calls in the window", pct(g["calls_met_share"]), f"{g['calls_met']:,}", f"{g['calls']:,}"],
        ["complete tasks (every call met it)", pct(g["tasks_met_share"]), f"{g['tasks_met']:,}", f"{g['tasks']:,}"],
    ]
    return table([f"goodput at {g['slo']}", "met", "n met", "of"], rows) + paragraph(
        text(
            f"Good throughput (the met calls' tokens over the window): total {num(g['total_tps'])}"
            f" tokens/s, output {num(g['output_tps'])} tokens/s."
        )
    )


def throughput(rep: RunReport) -> Section:
    s = rep.summary
    t, tokens, w = s["throughput"], s["throughput"]["tokens"], s["window"]
    rows = [
        ["total", num(t["total_tps"]), num(t["total_tokens_per_min"]), num(sum(tokens.values()))],
        *[
            [name, num(t[f"{key}_tps"]), num(t[f"{key}_tps"] and t[f"{key}_tps"] * 60), num(tokens[key])]
            for name, key in (("cached input", "cached_input"), ("new input", "new_input"), ("output", "output"))
        ],
    ]
    body = table(["tokens", "per second", "per minute", "in the window"], rows)
    if t.get("input_from_client_estimate"):
        body += note("The host sent no usage: input tokens are the client's estimate.")
    body += paragraph(text(f"Steady window {s['window_s']:.1f} s ({w['start_s']:.1f} s to {w['end_s']:.1f} s)."))
    if not w["steady"]:
        body += note("No steady state was reached: the figures cover the whole run.")
    return Section("throughput", "Throughput", body)


def cache(rep: RunReport) -> Section:
    c = rep.summary["cache"]
    rows = [
        ["client reuse (exact prefix of the previous request + its output)", pct(c["client_reuse_ratio"])],
        ["host hit (cached tokens the host reported)", pct(c["host_hit_ratio"])],
        ["efficiency (host hit / client reuse)", pct(c["efficiency"])],
        ["calls with cached tokens reported", f"{c['requests_with_cached_tokens']:,} of {c['requests']:,}"],
    ]
    return Section("cache", "Prompt cache", table(["figure", "value"], rows))


def tasks(rep: RunReport) -> Section:
    k = rep.summary["tasks"]
    if not k["count"]:
        return Section("tasks", "Tasks", note(f"No task complete ({k['incomplete']} cut short): run longer."))
    proj, save = k["projected_wall_s"], k["projected_saving"]
    rows = [
        ["complete (cut short)", f"{k['count']} ({k['incomplete']})"],
        ["mean wall time", secs(k["wall_s"])],
        ["mean model time", secs(k["model_time_s"])],
        ["mean tool time", secs(k["tool_time_s"])],
        ["model share of wall time", pct(k["model_share"])],
        ["if the model were 2x faster", f"{secs(proj['2x'])} per task ({pct(save['2x'])} saved)"],
        ["if the model were 10x faster", f"{secs(proj['10x'])} per task ({pct(save['10x'])} saved)"],
    ]
    if k.get("subagents"):
        rows.append(["subagents", f"{k['subagents']} runs, {k['subagent_calls']} calls"])
    return Section("tasks", "Tasks", table(["figure", "value"], rows))


def client(rep: RunReport) -> Section:
    cl = rep.summary["client"]
    wait = cl.get("send_wait_s") or {}
    lag = cl["loop_lag_p99_ms"]
    rows = [
        ["CPU, share of one core", pct(cl["cpu_share"])],
        ["event-loop lag p99", "-" if lag is None else f"{lag:.1f} ms"],
        ["send wait p50 / p99 (not in TTFT)", f"{secs(wait.get('p50'))} / {secs(wait.get('p99'))}"],
    ]
    for w in cl.get("workers") or []:  # --workers: each process's own load
        lag_w = w["loop_lag_p99_ms"]
        rows.append([f"worker {w['worker']}: CPU / lag p99" + (" (saturated)" if w["saturated"] else ""),
                     f"{pct(w['cpu_share'])} / " + ("-" if lag_w is None else f"{lag_w:.1f} ms")])  # fmt: skip
    rows += pause_rows(cl)
    body = table(["figure", "value"], rows)
    if cl["saturated"]:
        body += note(
            "The client itself was the bottleneck: figures may understate the host. Lower --concurrency, or raise "
            "--workers (one process per core)."
        )
    elif cl.get("held_up"):
        load = cl.get("machine_load")
        body += note(
            f"The machine was busy (load {'-' if load is None else f'{load:.1f}'} on {cl.get('cores') or '?'} cores): "
            "the client's event loop lagged while it used little CPU, so timings may include that wait. Other "
            "processes had the cores; more --workers would not help."
        )
    if warning := paused_warning(rep.summary):
        body += note(warning[0].upper() + warning[1:] + ".")
    return Section("client", "Client", body)


def truth(rep: RunReport) -> Section | None:
    tr = rep.summary.get("truth")
    if not tr:
        return None
    keys = ("p50", "p95", "p99", "max", "bias")
    rows = [
        _row("TTFT", tr["ttft_dev_s"], keys),
        _row("token times", tr["token_dev_s"], keys),
        _row("inter-token gaps", tr["itl_dev_s"], keys),
    ]
    q, pf, ik = tr["host_queue_wait_s"], tr["host_prefill_s"], tr.get("host_intake_s") or {}
    host = tr.get("host_ttft_s") or {}
    whole = f"TTFT mean {secs(host.get('mean'))} over {host.get('n', 0)} calls = " if host.get("n") else ""
    split = (
        f"Host's TTFT split: {whole}intake mean {secs(ik.get('mean'))} (p50 {secs(ik.get('p50'))}) + queue wait mean"
        f" {secs(q.get('mean'))} (p50 {secs(q['p50'])}, p95 {secs(q['p95'])}) + prefill mean {secs(pf.get('mean'))}"
        f" (p50 {secs(pf['p50'])}, p95 {secs(pf['p95'])}); preemptions {tr['host_preemptions']}. Output tokens equal in"
        f" {tr['output_tokens_equal']} of {tr['ok_matched']}, cached tokens equal in {tr['cached_tokens_equal']} of"
        f" {tr['cached_tokens_reported']} reported."
    )
    body = (
        paragraph(text(f"{tr['matched']} of {tr['requests']} calls matched by id; client minus host, absolute."))
        + table(["deviation", "p50", "p95", "p99", "max", "median signed", "n"], rows)
        + paragraph(text(split))
    )
    return Section("truth", "Against the host's truth log", body)


SUMMARY_SECTIONS = (headline, latency, throughput, cache, tasks, answers, client, served, truth)
