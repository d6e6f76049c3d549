"""The HTML pages of a sweep and of a capacity search, made of sections (replay.reports.html_page, docs/reports.md).

Every section takes the study's JSON (what ``replay sweep --json`` / ``replay capacity --json`` print), so a page
is rebuilt from the index and its run files like everything else.
"""

from __future__ import annotations

from typing import Any

from replay.metrics.level_figures import value
from replay.reports import plots
from replay.reports.html_page import Section, figure, note, num, paragraph, pct, render_page, secs, table, text, tiles
from replay.reports.studies import study_plots
from replay.reports.studies.study_text import GOODPUT_NOTE, recipe_words, warmup_words
from replay.verdict.thresholds import parse_all

LEVEL_COLUMNS = (
    ("total tok/s", "throughput.total_tps", num),
    ("output tok/s", "throughput.output_tps", num),
    ("TTFT p50", "ttft_s.p50", secs),
    ("TTFT p95", "ttft_s.p95", secs),
    ("answer p50", "ttfat_s.p50", secs),
    ("decode p25", "user_decode_tps.p25", lambda v: num(v, 1)),
    ("decode p50", "user_decode_tps.p50", lambda v: num(v, 1)),
    ("E2E intvty p90", "interactivity_e2e.p90", lambda v: num(v, 1)),
    ("cache hit", "cache.host_hit_ratio", pct),
    ("errors", "error_rate", pct),
)


GOODPUT_COLUMNS = (
    ("calls met", "goodput.calls_met_share", pct),
    ("tasks met", "goodput.tasks_met_share", pct),
    ("good out tok/s", "goodput.output_tps", num),
)


def levels_section(sw: dict[str, Any]) -> Section:
    has_slo = bool(sw.get("slo"))
    columns = LEVEL_COLUMNS + (GOODPUT_COLUMNS if sw.get("goodput_slo") else ())
    rows = []
    for lv in sw["levels"]:
        cells = [lv["concurrency"], *[fmt(value(lv, key)) for _, key, fmt in columns]]
        rows.append(cells + (["yes" if lv.get("slo_ok") else "no"] if has_slo else []))
    headers = ["sessions", *[h for h, _, _ in columns], *(["meets SLO"] if has_slo else [])]
    words = (
        f"Each level: {warmup_words(sw)}, then a {sw['window_s']:g} s steady window ({sw['mode']}){recipe_words(sw)}."
        f" Sessions {sw['sessions']}."
    )
    body = paragraph(text(words)) + table(headers, rows)
    if has_slo:
        body += paragraph(text("SLO: " + ", ".join(sw["slo"])))
    if sw.get("goodput_slo"):
        words = GOODPUT_NOTE.format(slo=",".join(sw["goodput_slo"]))
        body += paragraph(text(words[0].upper() + words[1:] + "."))
    return Section("levels", "Levels", body)


def curves_section(sw: dict[str, Any]) -> Section:
    caption = "Each point one level's steady window; the dashed line is the knee (rule below)."
    svg = study_plots.sweep_curves(sw["levels"], sw["knee"]["concurrency"])
    return Section("curves", "Against concurrency", figure(svg, caption, "sweep curves"))


def knee_section(sw: dict[str, Any]) -> Section:
    """The knee, its rule, and the figures analysts quote at that level."""
    k = sw["knee"]
    where = f"{k['concurrency']} sessions" if k["concurrency"] is not None else "no knee in the sweep"
    items = [(where, "the knee")]
    at = next((lv for lv in sw["levels"] if lv["concurrency"] == k["concurrency"]), None)
    if at is not None:
        items += [
            (num(value(at, "throughput.total_tps")), "total tokens/s there (cached input included)"),
            (num(value(at, "throughput.total_tokens_per_min")), "total tokens/min there"),
            (num(value(at, "user_decode_tps.p25"), 1), "per-user decode tokens/s there, p25"),
            (secs(value(at, "ttfat_s.p95") or value(at, "ttft_s.p95")), "time to first answer token there, p95"),
        ]
    body = tiles(items) + paragraph(text(f"Rule: {k['rule']}."))
    if k.get("note"):
        body += paragraph(text(k["note"]))
    return Section("knee", "The knee", body)


def frontier_section(sw: dict[str, Any]) -> Section:
    per = "GPU" if sw["hardware"].get("gpus") else "host"
    name = sw.get("frontier_x") or "user_decode_tps_p25"
    label = (sw.get("frontier_axes") or {}).get("x_label") or name
    points = sw.get("frontier_points") or []  # the sweep's JSON holds them (a sweep file older than that: no plot)
    rows = [[p["concurrency"], num(p["x"], 1), num(p["total_tps_per_gpu"]), num(p["output_tps_per_gpu"])]
            for p in sw["frontier"]]  # fmt: skip
    words = (
        f"Levels no other level beats on both {label} and total tokens/s per {per}"
        f" (GPUs: {sw['hardware'].get('gpus') or 'unknown'}): the settings worth choosing from."
        f" The x axis is --frontier-x {name}."
    )
    headers = ["sessions", name, f"total tok/s per {per}", f"output tok/s per {per}"]
    body = paragraph(text(words)) + table(headers, rows)
    if points:
        svg = study_plots.frontier(points, sw["frontier"], per, label)
        body += figure(svg, "Grey: every level; blue: the frontier.", "frontier")
    return Section("frontier", "Pareto frontier", body)


def slo_section(sw: dict[str, Any]) -> Section | None:
    """With --slo: the most sessions before the SLO first breaks, at the sweep's resolution (its levels)."""
    k = sw.get("slo_knee")
    if not k:
        return None
    gpus = sw["hardware"].get("gpus")
    items = [("-" if k["concurrency"] is None else str(k["concurrency"]), "sessions within the SLO")]
    if k["concurrency"] is not None and gpus:
        items.append((_short(k["concurrency"] / gpus), "sessions per GPU"))
    words = f"SLO {', '.join(sw['slo'])}; {k['rule']}. {k.get('note', '')}. Exact to the sweep's levels only:"
    words += " replay capacity searches to one agent."
    return Section("slo", "Capacity at the SLO", tiles(items) + paragraph(text(words)))


SWEEP_SECTIONS = (levels_section, curves_section, knee_section, slo_section, frontier_section)


def sweep_meta(sw: dict[str, Any]) -> list[str]:
    hw = sw["hardware"]
    return [
        f"replay {sw.get('replay_version', '')} · {sw.get('created', '')} · host {sw['host']} · {sw['mode']}",
        f"levels {', '.join(str(c) for c in sw['concurrency'])} · GPUs {hw.get('gpus') or 'unknown'}"
        f" ({hw.get('source')})",
        sw.get("command") or "",
    ]


def sweep_page(sw: dict[str, Any]) -> str:
    plots.require_matplotlib()
    sections = [sec for fn in SWEEP_SECTIONS if (sec := fn(sw)) is not None]
    return render_page(f"replay sweep: {sw['host']}", sections, sweep_meta(sw))


def answer_section(cap: dict[str, Any]) -> Section:
    items = [(f"{cap['max_concurrency']}", "concurrent agents at the SLO")]
    for key, label in (("per_gpu", "agents per GPU"), ("per_mw", "agents per MW (accelerator power)")):
        if cap.get(key) is not None:
            items.append((_short(cap[key]), label))
    if cap.get("per_dollar_hour") is not None:
        items.append((_short(cap["per_dollar_hour"]), "agents per dollar-hour"))
    words = (
        f"SLO {', '.join(cap['slo'])}: the largest number of concurrent agents for which every threshold held, found"
        f" in {cap['runs']} runs (a sweep of every level from 1 to the first that breaks takes"
        f" {cap['full_sweep_runs']})."
    )
    body = tiles(items) + paragraph(text(words)) + paragraph(text("Uncertainty: " + cap["uncertainty"]["text"]))
    body += note(f"Power: {cap['power_note']}.")
    return Section("answer", "Capacity at the SLO", body)


def probes_section(cap: dict[str, Any]) -> Section:
    thresholds = parse_all(cap["slo"])
    rows = [
        [i + 1, p["concurrency"], p["step"], "held" if p["ok"] else "broke", *[_check(c) for c in p["checks"]]]
        for i, p in enumerate(cap["probes"])
    ]
    body = table(["#", "agents", "step", "SLO", *[t.expr for t in thresholds]], rows, numeric_from=1)
    svg = study_plots.capacity_probes(cap["probes"], thresholds, cap["max_concurrency"])
    caption = "Each probe's figure against its concurrency (circles held, crosses broke); dotted: the limit."
    return Section("probes", "The search", body + figure(svg, caption, "capacity probes"))


def _short(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"


def _check(c: dict[str, Any]) -> str:
    v = c["value"]
    return "-" if v is None else f"{v:,.4g}"


def capacity_page(cap: dict[str, Any]) -> str:
    plots.require_matplotlib()
    meta = [
        f"replay {cap.get('replay_version', '')} · {cap.get('created', '')} · host {cap['host']} · {cap['mode']}",
        f"each probe {cap['warmup_s']:g} s warm-up, {cap['window_s']:g} s window · search {cap['search']}",
        cap.get("command") or "",
    ]
    return render_page(f"replay capacity: {cap['host']}", [answer_section(cap), probes_section(cap)], meta)


def tiers_page(doc: dict[str, Any]) -> str:
    """A tiered capacity search: each tier's answer, and every level run once for all of them."""
    plots.require_matplotlib()
    rows = [[t["name"], secs(t["ttft_s"]), num(t["speed_tps"], 1), t["max_concurrency"],
             "-" if t["first_broken"] is None else t["first_broken"],
             *[_short(t[k]) if t.get(k) is not None else "-" for k in ("per_gpu", "per_mw", "per_dollar_hour")],
             t["runs"]] for t in doc["tiers"]]  # fmt: skip
    words = (
        f"Each tier's largest number of concurrent agents with TTFT p75 within its limit and per-user decode p25 at "
        f"least its floor, found in {doc['runs']} runs for all tiers (separate searches: {doc['separate_runs']})."
    )
    body = table(["tier", "TTFT", "tok/s", "max agents", "broke at", "per GPU", "per MW", "per $/h", "probes"], rows)
    body += paragraph(text(words)) + "".join(paragraph(text(f"{t['name']}: {t['uncertainty']['text']}"))
                                             for t in doc["tiers"])  # fmt: skip
    body += note(f"Power: {doc['power_note']}.")
    caption = ("Each level run once for every tier: its per-user decode p25 and TTFT p75; dotted, each tier's floor "
               "and limit; dashed, its boundary (the most agents that met it).")  # fmt: skip
    body += figure(study_plots.tiers_chart(doc["levels"], doc["tiers"]), caption, "tier boundaries")
    level_rows = [
        [lv["concurrency"], lv["attempt"], *[_short(v) if v is not None else "-" for v in lv["figures"].values()]]
        for lv in doc["levels"]
    ]
    levels = table(["agents", "attempt", "total tok/s", "output tok/s", "TTFT p75", "decode p25"], level_rows)
    meta = [
        f"replay {doc.get('replay_version', '')} · {doc.get('created', '')} · host {doc['host']} · {doc['mode']}",
        f"each level {doc['warmup_s']:g} s warm-up, {doc['window_s']:g} s window · search {doc['search']}",
        doc.get("command") or "",
    ]
    sections = [Section("tiers", "Capacity per SLO tier", body), Section("levels", "The levels run", levels)]
    return render_page(f"replay capacity: {doc['host']}", sections, meta)
