"""A history's figures night by night, with their change points: one document (``replay history show --json``)
the text, the HTML page and the gate are all made from.

Each figure of replay.verdict.baseline.FIGURES has its ``points`` (every night: its value, its relative noise
from the windows' spread, the series it belongs to, why it is not judged when its client set its figures) and
its ``change_points``, found within each series (a night whose identity differs starts a series: another model,
workload or option is a deliberate change, not a regression) over the judged nights only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay.history.changes import Change, changes
from replay.history.store import FIGURE_NAMES, Night
from replay.verdict.baseline import FIGURES

HIGHER = {name: higher for name, (_, _, higher) in zip(FIGURE_NAMES, FIGURES, strict=True)}
ABSOLUTE = {"error_rate"}  # steps in the figure's own unit: a rate from 0 has no relative step


def series_of(nights: list[Night]) -> list[dict[str, Any]]:
    """The history's series in the order they first ran: each one identity, with its nights' count."""
    out: dict[str, dict[str, Any]] = {}
    for n in nights:
        s = out.setdefault(n.series, {"series": n.series, "identity": n.identity, "nights": 0, "first_run": n.path})
        s["nights"] += 1
        s["last_run"] = n.path
    return list(out.values())


def _point(n: Night, name: str) -> dict[str, Any]:
    value, noise, windows = n.figures.get(name, (None, 0.0, 0))
    return {"run": n.path, "run_id": n.run_id, "created": n.created, "series": n.series, "value": value,
            "noise": noise, "noise_windows": windows, "unjudged": n.unjudged}  # fmt: skip


def _change_row(c: Change, night: Night) -> dict[str, Any]:
    return {"run": night.path, "run_id": night.run_id, "created": night.created, "series": night.series,
            "direction": c.direction, "step": c.step, "confidence": c.confidence, "before": c.before,
            "after": c.after, "nights": c.nights}  # fmt: skip


def figure_changes(nights: list[Night], name: str) -> list[dict[str, Any]]:
    """The change points of one figure, series by series, over the nights judged and with a value."""
    rows = []
    for series in dict.fromkeys(n.series for n in nights):
        judged = [n for n in nights if n.series == series and not n.unjudged and n.figures.get(name, (None,))[0]
                  is not None]  # fmt: skip
        if len(judged) < 2:
            continue
        values = [float(n.figures[name][0]) for n in judged]  # type: ignore[arg-type]
        noises = [n.figures[name][1] for n in judged]
        for c in changes(values, noises, HIGHER[name], absolute=name in ABSOLUTE):
            rows.append(_change_row(c, judged[c.index]))
    return rows


def build(nights: list[Night], path: str | Path, detect: bool = True) -> dict[str, Any]:
    """The history document: its series and, per figure, its points and (``detect``) its change points."""
    history = {}
    for name in FIGURE_NAMES:
        history[name] = {
            "better": "higher" if HIGHER[name] else "lower",
            "step_unit": "absolute" if name in ABSOLUTE else "relative",
            "points": [_point(n, name) for n in nights],
            "change_points": figure_changes(nights, name) if detect else None,
        }
    return {"file": str(path), "nights": len(nights), "series": series_of(nights), "history": history}


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.6g}"


def _step(name: str, step: float) -> str:
    return f"{step:+.4f}" if name in ABSOLUTE else f"{100 * step:+.1f}%"


def list_text(nights: list[Night]) -> str:
    """One line a night: when it ran, its series, its throughput, whether it is judged, its run file."""
    if not nights:
        return "no nights in the history yet"
    lines = [f"{'#':>3}  {'created':<25} {'series':<16} {'total tok/s':>12}  run"]
    for i, n in enumerate(nights, 1):
        tps = n.figures.get("throughput.total_tps", (None,))[0]
        flag = f"  (not judged: {n.unjudged})" if n.unjudged else ""
        lines.append(f"{i:>3}  {n.created or '-':<25} {n.series:<16} {_fmt(tps):>12}  {n.path}{flag}")
    return "\n".join(lines)


def show_text(doc: dict[str, Any]) -> str:
    """Each figure's series: every night's value with its noise band (± twice its standard error), the change
    points found, in the figure's better direction."""
    lines = [f"History {doc['file']}: {doc['nights']} nights in {len(doc['series'])} series"]
    for s in doc["series"]:
        ident = s["identity"]
        load = ident.get("load") or {}
        lines.append(f"  series {s['series']}: {s['nights']} nights, model {ident.get('model')}, concurrency "
                     f"{load.get('concurrency')}, workload {str(ident.get('workload'))[:19]}")  # fmt: skip
    for name, fig in doc["history"].items():
        marks = {c["run_id"]: c for c in fig["change_points"] or ()}
        lines.append(f"\n{name} ({fig['better']} is better)")
        for p in fig["points"]:
            band = f"± {200 * p['noise']:.1f}%" if p["noise"] else "(no noise estimate)"
            c = marks.get(p["run_id"])
            mark = f"  <- {c['direction']} regime: {_step(name, c['step'])}" if c else ""
            mark += f", confidence {c['confidence']:.4f}" if c else ""
            judged = "  not judged" if p["unjudged"] else ""
            lines.append(f"  {p['created'] or '-':<25} {_fmt(p['value']):>12} {band:<20}{judged}{mark}")
        if fig["change_points"] == []:
            lines.append("  no change points")
    return "\n".join(lines)
