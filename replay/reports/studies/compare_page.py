"""The HTML page of a comparison: two runs, several hosts, or two sweeps side by side (replay.reports.html_page).

Sections take the comparison's JSON (``replay compare --json``), so the page and the JSON say the same thing.
"""

from __future__ import annotations

from typing import Any

from replay.reports import plots
from replay.reports.html_page import Section, figure, note, paragraph, render_page, table, text
from replay.reports.studies import study_plots
from replay.reports.studies.study_text import better_mark, fmt


def _ci(f: dict[str, Any]) -> str:
    return "-" if not f.get("ci") else f"{f['ci'][0]:.3f} to {f['ci'][1]:.3f}"


def _verdict(f: dict[str, Any]) -> str:
    return f["verdict"] + better_mark(f, " (B better)", " (B worse)")


def figures_section(sid: str, title: str, figures: list[dict[str, Any]], noise: dict[str, Any]) -> Section:
    rows = [
        [f["label"], fmt(f["a"], f["unit"]), fmt(f["b"], f["unit"]), fmt(f["ratio"], "x"), _ci(f), _verdict(f)]
        for f in figures
    ]
    body = table(["figure", "A", "B", "B/A", "95 % interval", "verdict"], rows)
    body += paragraph(text(f"Noise: {noise['method']}; {noise['interval']} ({noise['resamples']} resamples)."))
    if any(f["ratio"] for f in figures):
        body += figure(study_plots.ratio_bars(figures), "B against A, figure by figure.", f"{title} ratios")
    return Section(sid, title, body)


def _who(side: dict[str, Any]) -> str:
    return f"{side['name']}: {side.get('host') or side.get('simulated_host') or ''}"


def costs_section(cmp: dict[str, Any], prefix: str = "") -> Section | None:
    c = cmp.get("costs") or {}
    if not any((c.get(k) or {}).get("price_per_hour") or (c.get(k) or {}).get("rate_card") for k in ("a", "b")):
        return None
    keys = (("price_per_hour", "price per hour"), ("per_task", "per task at that price"),
            ("per_million_tokens", "per M tokens at that price"), ("per_million_output_tokens", "per M output tokens"),
            ("rate_card_per_task", "per task (rate card)"),
            ("rate_card_per_million_tokens", "per M tokens (rate card)"))  # fmt: skip
    rows = [[label, fmt(c["a"].get(k), "usd"), fmt(c["b"].get(k), "usd")] for k, label in keys]
    words = "A closed loop of N agents with tasks of W s finishes N / W tasks a second: a task costs price/s x W / N."
    return Section(f"{prefix}costs", "Cost", table(["USD", "A", "B"], rows) + paragraph(text(words)))


def runs_sections(cmp: dict[str, Any], prefix: str = "") -> list[Section]:
    title = f"{cmp['a']['name']} against {cmp['b']['name']}"
    out = [figures_section(f"{prefix}figures", title, cmp["figures"], cmp["noise"])]
    if (cost := costs_section(cmp, prefix)) is not None:
        out.append(cost)
    if cmp.get("notes"):
        out.append(Section(f"{prefix}notes", "Not like for like", "".join(note(n) for n in cmp["notes"])))
    return out


LEVEL_KEYS = ("throughput.total_tps", "throughput.output_tps", "ttft_s.p95", "user_decode_tps.p25", "error_rate")


def _cell(f: dict[str, Any]) -> str:
    mark = better_mark(f, ", better", ", worse")
    return f"{fmt(f['ratio'], 'x')} ({f['verdict']}{mark})"


def sweeps_sections(
    cmp: dict[str, Any], levels: tuple[list[dict], list[dict]] | None, prefix: str = ""
) -> list[Section]:
    a, b = cmp["a"]["name"], cmp["b"]["name"]
    out = []
    if levels is not None:
        svg = study_plots.sweeps_overlay([(a, levels[0]), (b, levels[1])])
        caption = "Both sweeps' levels against concurrency."
        out.append(Section(f"{prefix}curves", f"{a} and {b}: curves", figure(svg, caption, "sweeps overlaid")))
    knees = [[name, k["rule"] if k else "-", "-" if not k or k["concurrency"] is None else k["concurrency"]]
             for name, k in ((a, cmp["knee"]["a"]), (b, cmp["knee"]["b"]))]  # fmt: skip
    fronts = [[name, ", ".join(str(p["concurrency"]) for p in f or [])] for name, f in
              ((a, cmp["frontier"]["a"]), (b, cmp["frontier"]["b"]))]  # fmt: skip
    body = table(["sweep", "rule", "knee"], knees, numeric_from=2) + table(["sweep", "frontier levels"], fronts, 2)
    out.append(Section(f"{prefix}knees", f"{a} and {b}: knees and frontiers", body))
    labels = {f["figure"]: f["label"] for lv in cmp["levels"][:1] for f in lv["figures"]}
    rows = []
    for lv in cmp["levels"]:
        by_key = {f["figure"]: f for f in lv["figures"]}
        rows.append([lv["concurrency"], *[_cell(by_key[k]) for k in LEVEL_KEYS if k in by_key]])
    words = f"B = {b} against A = {a} at each shared level: B/A and the noise verdict ({cmp['noise']['method']})."
    headers = ["sessions", *[labels.get(k, k) for k in LEVEL_KEYS if k in labels]]
    out.append(
        Section(f"{prefix}levels", f"{b} against {a}, level by level", paragraph(text(words)) + table(headers, rows))
    )
    out += (
        [Section(f"{prefix}notes", "Not like for like", "".join(note(n) for n in cmp["notes"]))]
        if cmp.get("notes")
        else []
    )
    return out


def compare_page(cmp: dict[str, Any], sweep_levels: list[tuple[list[dict], list[dict]]] | None = None) -> str:
    """A comparison's page; ``sweep_levels`` are the compared sweeps' level rows, for their curves."""
    plots.require_matplotlib()
    kind = cmp["kind"]
    if kind == "runs":
        sections = runs_sections(cmp)
        meta = [f"A = {_who(cmp['a'])}", f"B = {_who(cmp['b'])}"]
    elif kind == "sweeps":
        sections = sweeps_sections(cmp, sweep_levels[0] if sweep_levels else None)
        meta = [f"A = {cmp['a']['name']} ({cmp['a'].get('mode')})", f"B = {cmp['b']['name']} ({cmp['b'].get('mode')})"]
    else:
        sections, meta = [], [f"hosts run {cmp['mode']}"]
        for i, pair in enumerate(cmp["comparisons"]):
            if kind == "hosts":
                sections += runs_sections(pair, f"h{i + 2}-")
            else:
                sections += sweeps_sections(pair, sweep_levels[i] if sweep_levels else None, f"h{i + 2}-")
    return render_page(f"replay compare: {kind}", sections, meta)
