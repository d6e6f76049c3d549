"""The history's page (``replay history show --html FILE``): one chart per figure across the nights, each night's
noise band, the change points marked, each point a link to its run's report.

The charts are drawn as inline SVG here (a line, a band, dots, a marker per change point): no matplotlib needed,
and each dot is an SVG link, which a picture made by a plotting library would not be. A night's link goes to its
run's HTML report when one was written beside the run file (``replay report RUN --html RUN.html``), else to the
run file itself.
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Any

from replay.reports.html_page import Section, figure, paragraph, render_page, table, text

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 960, 240, 64, 16, 14, 28
SERIES_COLOURS = ("#1f77b4", "#9467bd", "#8c564b", "#17becf", "#7f7f7f")
WORSE, BETTER = "#d62728", "#2ca02c"
SVG_NS = "http://www.w3.org/2000/svg"


def _link(run: str, page: Path) -> str:
    """Where a night's dot leads: its HTML report beside the run file, else the run file, relative to the page."""
    report = Path(run).with_suffix(".html")
    target = report if report.is_file() else Path(run)
    try:
        return Path(os.path.relpath(target, page.parent)).as_posix()
    except ValueError:  # another drive
        return target.as_posix()


def _scale(points: list[dict[str, Any]]) -> tuple[float, float]:
    vals = [p["value"] * (1 + s * 2 * p["noise"]) for p in points if p["value"] is not None for s in (-1, 1)]
    lo, hi = min(vals), max(vals)
    if hi == lo:
        lo, hi = lo - (abs(lo) or 1) * 0.05, hi + (abs(hi) or 1) * 0.05
    pad = (hi - lo) * 0.08
    return lo - pad, hi + pad


def chart(name: str, fig: dict[str, Any], page: Path) -> str:
    """One figure's SVG: nights left to right, the noise band, the dots (links), change points as vertical lines."""
    pts = fig["points"]
    if not any(p["value"] is not None for p in pts):
        return paragraph(text(f"{name}: no night has this figure"))
    lo, hi = _scale(pts)
    n = len(pts)

    def x(i: int) -> float:
        return PAD_L + (W - PAD_L - PAD_R) * (i + 0.5) / n

    def y(v: float) -> float:
        return PAD_T + (H - PAD_T - PAD_B) * (hi - v) / (hi - lo)

    colour = {s: SERIES_COLOURS[k % len(SERIES_COLOURS)] for k, s in enumerate(dict.fromkeys(p["series"] for p in pts))}
    parts = [f'<line x1="{PAD_L}" y1="{H - PAD_B}" x2="{W - PAD_R}" y2="{H - PAD_B}" stroke="#999"/>']
    for v in (lo + (hi - lo) * k / 4 for k in range(5)):
        parts.append(f'<text x="{PAD_L - 6}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="11">{v:.4g}</text>')
    index = {p["run_id"]: i for i, p in enumerate(pts)}
    for c in fig["change_points"] or ():
        cx, col = x(index[c["run_id"]]) - (W - PAD_L - PAD_R) / n / 2, WORSE if c["direction"] == "worse" else BETTER
        parts.append(f'<line class="change" x1="{cx:.1f}" y1="{PAD_T}" x2="{cx:.1f}" y2="{H - PAD_B}" stroke="{col}" '
                     f'stroke-dasharray="4 3"><title>{c["direction"]} regime from here: step {c["step"]:+.4g}, '
                     f'confidence {c["confidence"]:.4f}</title></line>')  # fmt: skip
    for i, p in enumerate(pts):
        if p["value"] is None:
            continue
        v, band = p["value"], 2 * p["noise"] * abs(p["value"])
        if band:
            parts.append(f'<line x1="{x(i):.1f}" y1="{y(v + band):.1f}" x2="{x(i):.1f}" y2="{y(v - band):.1f}" '
                         f'stroke="{colour[p["series"]]}" stroke-opacity="0.35" stroke-width="5"/>')  # fmt: skip
        fill = "#fff" if p["unjudged"] else colour[p["series"]]
        tip = escape(f"{p['created']}: {v:.6g} ± {200 * p['noise']:.1f}% ({Path(p['run']).name})")
        parts.append(f'<a class="night" href="{escape(_link(p["run"], page))}"><circle cx="{x(i):.1f}" '
                     f'cy="{y(v):.1f}" r="4" fill="{fill}" stroke="{colour[p["series"]]}"><title>{tip}</title>'
                     f"</circle></a>")  # fmt: skip
    svg = f'<svg xmlns="{SVG_NS}" viewBox="0 0 {W} {H}" font-family="sans-serif">{"".join(parts)}</svg>'
    cps = len(fig["change_points"] or ())
    caption = (f"{name} night by night ({fig['better']} is better): bars are ± twice the night's noise, dashed "
               f"lines the {cps} change point(s) (red worse, green better), a hollow dot a night not "
               "judged")  # fmt: skip
    return figure(svg, caption, f"history of {name}")


def _changes_table(doc: dict[str, Any]) -> str:
    rows = []
    for name, fig in doc["history"].items():
        for c in fig["change_points"] or ():
            step = f"{c['step']:+.4f}" if fig["step_unit"] == "absolute" else f"{100 * c['step']:+.1f}%"
            rows.append([name, c["created"] or "-", c["direction"], step, f"{c['confidence']:.4f}", c["nights"]])
    if not rows:
        return paragraph("No change points: every figure kept its regime across the nights of each series.")
    return table(["figure", "night", "direction", "step", "confidence", "nights since"], rows, numeric_from=3)


def render(doc: dict[str, Any], page: str | Path) -> str:
    """The whole page for the history document ``doc`` (replay.history.report.build), to be written at ``page``."""
    where = Path(page).resolve()
    sections = [Section("changes", "Change points", _changes_table(doc))]
    for name, fig in doc["history"].items():
        sections.append(Section("f-" + name.replace(".", "-"), name, chart(name, fig, where)))
    series = "; ".join(f"{s['series']} ({s['nights']} nights, model {s['identity'].get('model')})"
                       for s in doc["series"])  # fmt: skip
    meta = [f"{doc['nights']} nights from {doc['file']}", f"series: {series or 'none'}"]
    return render_page("Nights over time", sections, meta)
