"""Pictures of the studies for their HTML pages: a sweep's curves against concurrency with its knee, the Pareto
frontier, a capacity search's probes against each SLO threshold, and comparisons (ratios with their intervals,
two sweeps' curves overlaid).

Like replay.reports.plots (whose ``styled`` decorator and style they share): matplotlib's object API on Agg,
never pyplot; every function returns SVG text ready to inline. Each takes the study's JSON rows, never records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from replay.metrics.level_figures import value
from replay.reports.plots import styled

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
CURVES = (
    ("Throughput", "total tokens/s", (("throughput.total_tps", "total"), ("throughput.output_tps", "output"))),
    ("Time to first token", "seconds",
     (("ttft_s.p50", "TTFT p50"), ("ttft_s.p95", "TTFT p95"), ("ttfat_s.p50", "answer p50"))),
    ("Per-user decode speed", "tokens/s", (("user_decode_tps.p25", "p25"), ("user_decode_tps.p50", "p50"))),
    ("Cache hit and errors", "share", (("cache.host_hit_ratio", "host cache hit"), ("error_rate", "error rate"))),
)  # fmt: skip


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _concurrency_axis(ax: Any, levels: Sequence[int]) -> None:
    """Sessions on x: a log2 axis when the levels span 16x or more, ticks at the levels."""
    if levels and max(levels) >= 16 * max(min(levels), 1):
        ax.set_xscale("log", base=2)
    ax.set_xticks(list(levels), [str(c) for c in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrent sessions")


def _time_axis(ax: Any, values: Sequence[float]) -> None:
    """A seconds axis labelled in ms when everything on it is under a second."""
    from matplotlib.ticker import FuncFormatter

    finite = [v for v in values if np.isfinite(v)]
    ms = bool(finite) and max(finite) < 1.0
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v * 1000:g}" if ms else f"{v:g}"))
    ax.set_ylabel("ms" if ms else "seconds")


def _ratio_axis(ax: Any) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))


def _series(rows: Sequence[dict[str, Any]], key: str) -> list[float]:
    return [np.nan if (v := value(r, key)) is None else v for r in rows]


@styled
def sweep_curves(rows: Sequence[dict[str, Any]], knee: int | None) -> Any:
    """Throughput, TTFT, per-user decode speed, cache hit and error rate against concurrency; the knee dashed."""
    fig = _figure(9, 6.2)
    axes = fig.subplots(2, 2).ravel()
    levels = [r["concurrency"] for r in rows]
    for ax, (title, ylabel, series) in zip(axes, CURVES, strict=True):
        drawn: list[float] = []
        for i, (key, label) in enumerate(series):
            ys = _series(rows, key)
            if all(np.isnan(ys)):
                continue
            if key == "throughput.output_tps":  # a small share of the total: its own axis, on the right
                twin = ax.twinx()
                twin.plot(levels, ys, marker="s", markersize=3.5, color=COLOURS[i], label=f"{label} (right)")
                twin.set_ylabel("output tokens/s", color=COLOURS[i])
                twin.set_ylim(bottom=0)
                twin.grid(False)
                twin.legend(fontsize=7.5, loc="lower right")
                continue
            ax.plot(levels, ys, marker="o", markersize=3.5, color=COLOURS[i], label=label)
            drawn += ys
        if knee is not None:
            ax.axvline(knee, color="#555555", linestyle="--", linewidth=0.9, label=f"knee ({knee})")
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        if ylabel == "seconds":
            _time_axis(ax, drawn)
        ax.set_ylim(bottom=0, top=1.05 if ylabel == "share" else None)
        _concurrency_axis(ax, levels)
        ax.legend(fontsize=7.5, loc="best")
    return fig


@styled
def frontier(
    points: Sequence[dict[str, Any]],
    front: Sequence[dict[str, Any]],
    per: str,
    xlabel: str = "per-user decode speed p25 (tokens/s)",
) -> Any:
    """Every level as a point (a per-user speed ``x``, throughput per GPU); the frontier's points joined."""
    fig = _figure(9, 3.8)
    ax = fig.subplots()
    xs = [p["x"] for p in points]
    ys = [p["total_tps_per_gpu"] for p in points]
    ax.scatter(xs, ys, s=18, color="#aaaaaa", label="level", zorder=2)
    for p in points:
        ax.annotate(str(p["concurrency"]), (p["x"], p["total_tps_per_gpu"]), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")  # fmt: skip
    fx = [p["x"] for p in front]
    fy = [p["total_tps_per_gpu"] for p in front]
    ax.plot(fx, fy, marker="o", color=COLOURS[0], label="Pareto frontier", zorder=3)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"total tokens/s per {per}")
    ax.set_xlim(0, max(xs, default=1.0) * 1.1)
    ax.set_ylim(0, max(ys, default=1.0) * 1.15)
    ax.legend(loc="best")
    return fig


@styled
def capacity_probes(probes: Sequence[dict[str, Any]], thresholds: Sequence[Any], answer: int) -> Any:
    """Per SLO threshold: each probe's figure against its concurrency (held o, broke x), the limit and the answer."""
    n = max(len(thresholds), 1)
    fig = _figure(9, 3.2)
    axes = np.atleast_1d(fig.subplots(1, n))
    for i, (ax, t) in enumerate(zip(axes, thresholds, strict=True)):
        for ok, marker, colour, label in ((True, "o", "#2ca02c", "held"), (False, "x", "#d62728", "broke")):
            pts = [(p["concurrency"], p["checks"][i]["value"]) for p in probes if p["ok"] == ok]
            pts = [(c, v) for c, v in pts if v is not None]
            if pts:
                ax.scatter(*zip(*pts, strict=True), marker=marker, color=colour, label=label, zorder=3)
        ax.axhline(t.value, color="#555555", linestyle=":", linewidth=1, label=f"limit {t.expr}")
        if answer:
            ax.axvline(answer, color=COLOURS[0], linestyle="--", linewidth=0.9, label=f"answer ({answer})")
        ax.set_title(t.figure)
        ax.set_xlabel("concurrent agents")
        ax.set_ylim(bottom=0)
        ax.set_xlim(left=0)
        ax.legend(fontsize=7.5, loc="best")
    return fig


@styled
def tiers_chart(levels: Sequence[dict[str, Any]], tiers: Sequence[dict[str, Any]]) -> Any:
    """The levels run (per-user decode p25 and TTFT p75 against concurrency) with each tier's floor or limit and its
    boundary (the most agents that met it), one colour per tier."""
    fig = _figure(9, 3.4)
    speed_ax, ttft_ax = fig.subplots(1, 2)
    for ax, key, title, bound in ((speed_ax, "user_decode_tps.p25", "per-user decode p25 (tok/s)", "speed_tps"),
                                  (ttft_ax, "ttft_s.p75", "TTFT p75 (s)", "ttft_s")):  # fmt: skip
        pts = sorted((lv["concurrency"], lv["figures"][key]) for lv in levels if lv["figures"].get(key) is not None)
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", color="#333333", linewidth=1, label="levels run", zorder=3)
        for i, t in enumerate(tiers):
            colour = COLOURS[i % len(COLOURS)]
            ax.axhline(t[bound], color=colour, linestyle=":", linewidth=1)
            if t["max_concurrency"]:
                ax.axvline(t["max_concurrency"], color=colour, linestyle="--", linewidth=0.9,
                           label=f"{t['name']}: {t['max_concurrency']} agents")  # fmt: skip
        ax.set_title(title)
        ax.set_xlabel("concurrent agents")
        ax.set_ylim(bottom=0)
        ax.set_xlim(left=0)
        ax.legend(fontsize=7.5, loc="best")
    return fig


@styled
def ratio_bars(figures: Sequence[dict[str, Any]]) -> Any:
    """B/A per figure as a bar from 1, its 95 % interval as a whisker; green where B is better, red where worse."""
    rows = [f for f in figures if f["ratio"] is not None and f["ratio"] > 0]
    fig = _figure(9, 0.9 + 0.3 * max(len(rows), 1))
    ax = fig.subplots()
    y = np.arange(len(rows))
    colours = [{True: "#2ca02c", False: "#d62728"}.get(f["b_better"], "#999999") for f in rows]
    ratios = np.array([f["ratio"] for f in rows])
    ax.barh(y, ratios - 1, left=1, color=colours, height=0.6)
    for yi, f in zip(y, rows, strict=True):
        if f["ci"]:
            ax.plot(f["ci"], [yi, yi], color="#333333", linewidth=1.2)
    ax.axvline(1, color="#333333", linewidth=0.8)
    ax.set_xscale("log", base=2)
    _ratio_axis(ax)
    ax.set_yticks(y, [f["label"] for f in rows])
    ax.invert_yaxis()
    ax.set_xlabel("B / A (log scale; whiskers: 95 % interval; green B better, red B worse, grey within noise)")
    return fig


@styled
def sweeps_overlay(sweeps: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> Any:
    """Several sweeps' total throughput, TTFT p95 and decode p25 against concurrency, one line per sweep."""
    fig = _figure(9, 3.2)
    axes = fig.subplots(1, 3)
    panels = (("throughput.total_tps", "Total tokens/s"), ("ttft_s.p95", "TTFT p95"),
              ("user_decode_tps.p25", "Decode p25 (tokens/s)"))  # fmt: skip
    levels = sorted({r["concurrency"] for _, rows in sweeps for r in rows})
    for ax, (key, title) in zip(axes, panels, strict=True):
        for i, (name, rows) in enumerate(sweeps):
            ax.plot([r["concurrency"] for r in rows], _series(rows, key), marker="o", markersize=3,
                    color=COLOURS[i % len(COLOURS)], label=name)  # fmt: skip
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        if key.startswith("ttft"):
            _time_axis(ax, [v for _, rows in sweeps for v in _series(rows, key)])
        _concurrency_axis(ax, levels)
        ax.legend(fontsize=7, loc="best")
    return fig
