"""Pictures of a run for the HTML report: matplotlib figures turned into SVG text that can be inlined in a page.

matplotlib is the ``plots`` extra and is imported only here, lazily; ``require_matplotlib`` says which extra
to install when it is missing. Figures are made with the object API (``matplotlib.figure.Figure`` on the Agg
backend), never pyplot's global state, and saved as SVG with text drawn as paths: a page needs no font.
Each SVG's ids are prefixed with a digest of the figure, so several figures can share one HTML document.
Busy pictures (thousands of bars) are rasterised inside the SVG, which keeps the page small.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from replay.errors import ReplayError
from replay.histogram import US, percentile
from replay.metrics.recorded_timeline import TaskDrift
from replay.metrics.timeline import Interval, Series

if TYPE_CHECKING:  # matplotlib is the `plots` extra: imported where a picture is drawn
    from matplotlib.typing import RcKeyType

EXTRA_HINT = "pip install 'agentic-replay[plots]'"
RASTERISE_OVER = 3000  # bars in a timeline
KIND_COLOURS = {
    "model call": "#1f77b4",
    "subagent call": "#9467bd",
    "failed call": "#d62728",
    "send wait": "#ff7f0e",
    "tool pause": "#c7c7c7",
    "throttled": "#e377c2",
}
SPARE_COLOURS = ("#2ca02c", "#8c564b", "#17becf", "#bcbd22", "#7f7f7f")
STYLE: dict[RcKeyType, Any] = {
    "font.size": 8.5,
    "axes.titlesize": 9.5,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.fonttype": "path",
    "svg.hashsalt": "replay-report",  # stable clip-path ids: the same run gives the same page
    "figure.dpi": 100,
}


class PlotsUnavailable(ReplayError, RuntimeError):
    """matplotlib is not installed; the message names the extra."""


def require_matplotlib(option: str = "--html") -> Any:
    """The ``matplotlib`` module on the Agg backend, or PlotsUnavailable naming the extra to install."""
    try:
        import matplotlib
    except ImportError:
        raise PlotsUnavailable(f"{option} needs matplotlib: {EXTRA_HINT}") from None
    matplotlib.use("Agg")
    return matplotlib


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(href="#|url\(#)([^")]+)')


def to_svg(fig: Any) -> str:
    """The figure as one ``<svg>`` element: no XML prolog, scalable by CSS, ids unique to this figure."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(STYLE):
        fig.savefig(buf, format="svg", metadata={"Date": None}, dpi=150)
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.S)  # RDF about matplotlib: not needed
    prefix = "f" + hashlib.sha1(text.encode()).hexdigest()[:8] + "-"
    text = _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', text)
    text = _REF.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)}", text)
    # width/height in pt fix the size; without them the viewBox scales to the page's column
    return re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r"<svg\1", text, count=1)


def styled(draw: Any) -> Any:
    """Run a drawing function under the report's matplotlib style and return its SVG (matplotlib is imported when
    a picture is drawn, never when a module of pictures is imported: the core install has none)."""

    def wrapper(*args: Any, **kwargs: Any) -> str:
        import matplotlib

        with matplotlib.rc_context(STYLE):
            return to_svg(draw(*args, **kwargs))

    wrapper.__doc__, wrapper.__name__ = draw.__doc__, draw.__name__
    return wrapper


def _seconds_axis(ax: Any, axis: str, top: float, what: str = "") -> None:
    """Label a time axis in ms when everything on it is under a second, else in s."""
    from matplotlib.ticker import FuncFormatter

    ms = top < 1.0
    fmt = FuncFormatter(lambda v, _pos: f"{v * 1000:g}" if ms else f"{v:g}")
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_formatter(fmt)
    label = ("ms" if ms else "seconds") + (f" {what}" if what else "")
    (ax.set_xlabel if axis == "x" else ax.set_ylabel)(label)


def _cdf(ax: Any, values: Sequence[float], label: str, colour: str) -> None:
    v = np.sort(np.asarray(values, dtype=float))
    if v.size == 0:
        return
    y = np.arange(1, v.size + 1) / v.size
    ax.step(v, y, where="post", label=f"{label} (n={v.size})", color=colour)
    for p, style in ((50, ":"), (95, "--")):  # marked where the summary puts them (the one percentile method)
        ax.axvline(percentile(v, p, US), color=colour, linestyle=style, linewidth=0.8)


@styled
def latency_cdfs(ttft: Sequence[float], ttfat: Sequence[float], e2e: Sequence[float]) -> Any:
    """Distribution (CDF) of TTFT, time to first answer token and end-to-end latency, p50 and p95 marked."""
    fig = _figure(9, 3.2)
    first, whole = fig.subplots(1, 2)
    _cdf(first, ttft, "TTFT", "#1f77b4")
    if list(ttfat) != list(ttft):
        _cdf(first, ttfat, "first answer token", "#ff7f0e")
    _cdf(whole, e2e, "end-to-end", "#2ca02c")
    for ax, title, values in (
        (first, "Time to first token", [*ttft, *ttfat]),
        (whole, "End-to-end latency", list(e2e)),
    ):
        top = max(values, default=1.0) * 1.05 or 1.0
        ax.set_title(title)
        _seconds_axis(ax, "x", top, "(dotted p50, dashed p95)")
        ax.set_ylabel("share of calls")
        ax.set_ylim(0, 1.02)
        ax.set_xlim(0, top)
        ax.legend(loc="lower right")
    return fig


def _window(ax: Any, window: tuple[float, float]) -> None:
    ax.axvspan(window[0], window[1], color="#2ca02c", alpha=0.07, linewidth=0, zorder=0)


@styled
def over_time(s: Series, window: tuple[float, float]) -> Any:
    """Token rates (cached input, new input, output) stacked, and calls in flight, per time bin."""
    fig = _figure(9, 4.6)
    rates, flight = fig.subplots(2, 1, sharex=True, height_ratios=(2, 1))
    x = np.append(s.t, s.t[-1] + s.bin_s) if s.t.size else s.t
    parts = (s.cached_input_tps, s.new_input_tps, s.output_tps)
    rates.stackplot(
        x,
        *[np.append(p, p[-1:]) for p in parts],
        labels=("cached input", "new input", "output"),
        colors=("#aec7e8", "#1f77b4", "#ff7f0e"),
        step="post",
    )
    rates.set_ylabel("tokens/s")
    rates.set_title(f"Throughput per {s.bin_s:g} s (steady window shaded)")
    rates.legend(loc="upper left", ncols=3)
    flight.step(x, np.append(s.in_flight, s.in_flight[-1:]), where="post", color="#333333")
    flight.set_ylabel("calls in flight")
    flight.set_xlabel("seconds from the run's start")
    flight.set_ylim(bottom=0)
    for ax in (rates, flight):
        _window(ax, window)
        ax.set_xlim(0, x[-1] if x.size else 1)
    return fig


def _line(ax: Any, x: np.ndarray, rows: Sequence[dict[str, Any]], key: str, label: str, colour: str) -> None:
    y = np.asarray([np.nan if r.get(key) is None else r[key] for r in rows], dtype=float)
    if np.isfinite(y).any():
        ax.step(x, np.append(y, y[-1:]), where="post", label=label, color=colour)


@styled
def window_figures(rows: Sequence[dict[str, Any]], window: tuple[float, float]) -> Any:
    """A soak's figures per window (``replay.metrics.windows.series``): throughput, TTFT, per-user decode speed (and
    speculative decoding's mean acceptance length beside it, when the host reported one), and with ``--slo`` the
    share of each window's calls and tasks that met it."""
    from matplotlib.ticker import FuncFormatter

    good = [r["goodput"] for r in rows if (r.get("goodput") or {}).get("slo")]
    fig = _figure(9, 8.0 if good else 6.2)
    rates, ttft, speed, *met = fig.subplots(4 if good else 3, 1, sharex=True)
    x = np.asarray([r["start_s"] for r in rows] + [rows[-1]["end_s"]], dtype=float)
    output = rates.twinx()  # output is a few % of the total: on its own scale, or it lies flat on the axis
    _line(rates, x, rows, "total_tps", "total (left)", "#1f77b4")
    _line(output, x, rows, "output_tps", "output (right)", "#ff7f0e")
    thousands = FuncFormatter(lambda v, _pos: f"{v / 1000:g}k" if abs(v) >= 1000 else f"{v:g}")
    for ax in (rates, output):
        ax.yaxis.set_major_formatter(thousands)
        ax.set_ylim(bottom=0)
    output.grid(False)
    rates.set_ylabel("total tokens/s")
    output.set_ylabel("output tokens/s")
    rates.set_title("Per window: calls completed in it, tokens that fell in it (steady window shaded)")
    rates.legend(handles=rates.get_legend_handles_labels()[0] + output.get_legend_handles_labels()[0], loc="upper left",
                 ncols=2)  # fmt: skip
    _line(ttft, x, rows, "ttft_p50_s", "TTFT p50", "#1f77b4")
    _line(ttft, x, rows, "ttft_p95_s", "TTFT p95", "#d62728")
    top = max((r["ttft_p95_s"] or 0.0 for r in rows), default=0.0)
    _seconds_axis(ttft, "y", top or 1.0)
    _line(speed, x, rows, "user_decode_tps_p25", "per-user decode p25", "#2ca02c")
    _line(speed, x, rows, "user_decode_tps_p50", "per-user decode p50", "#17becf")
    _line(speed, x, rows, "interactivity_e2e_p90", "E2E-normalised interactivity p90", "#9467bd")
    speed.set_ylabel("tokens/s per user")
    (met or [speed])[-1].set_xlabel("seconds from the run's start")
    accept = [{"a": (r.get("speculation") or {}).get("acceptance_length_mean")} for r in rows]
    if any(a["a"] is not None for a in accept):  # speculative decoding's acceptance, beside the speed it buys
        spec = speed.twinx()
        _line(spec, x, accept, "a", "mean acceptance length (right)", "#8c564b")
        spec.set_ylabel("tokens per verify step")
        spec.set_ylim(bottom=1)
        spec.grid(False)
        speed.legend(handles=speed.get_legend_handles_labels()[0] + spec.get_legend_handles_labels()[0],
                     loc="upper left", ncols=2)  # fmt: skip
    if good:
        shares = [{k: None if (g := r.get("goodput") or {}).get(k) is None else 100 * g[k]
                   for k in ("calls_met_share", "tasks_met_share")} for r in rows]  # fmt: skip
        _line(met[0], x, shares, "calls_met_share", "calls completed in the window", "#1f77b4")
        _line(met[0], x, shares, "tasks_met_share", "complete tasks that ended in it", "#2ca02c")
        met[0].set_ylabel("% that met the SLO")
        met[0].set_title(f"Goodput at the per-call SLO {good[0]['slo']}")
        met[0].set_ylim(0, 105)
    for ax in (rates, ttft, speed, *met):
        _window(ax, window)
        ax.set_ylim(bottom=0)
        ax.set_xlim(x[0], x[-1])
    for ax in (ttft, speed, *met):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", ncols=2)
    return fig


def kind_colours(kinds: Sequence[str]) -> dict[str, str]:
    """A colour for every kind: the known ones fixed, any other from a spare list, in order."""
    spare = iter(SPARE_COLOURS * (1 + len(kinds) // len(SPARE_COLOURS)))
    return {k: KIND_COLOURS.get(k) or next(spare) for k in kinds}


@styled
def session_timelines(intervals: Sequence[Interval], window: tuple[float, float]) -> Any:
    """One row per session: every interval kind the records give, each in its colour; subagents below the row."""
    sessions = sorted({iv.session for iv in intervals})
    kinds = list(dict.fromkeys(iv.kind for iv in sorted(intervals, key=lambda iv: iv.kind != "tool pause")))
    colours = kind_colours(kinds)
    fig = _figure(9, min(9.0, 1.4 + 0.22 * len(sessions)))
    ax = fig.subplots()
    row = {s: i for i, s in enumerate(sessions)}
    raster = len(intervals) > RASTERISE_OVER
    for kind in kinds:
        bars: dict[int, list[tuple[float, float]]] = {}
        for iv in intervals:
            if iv.kind == kind:
                bars.setdefault(iv.session, []).append((iv.start, max(iv.end - iv.start, 1e-4)))
        low, height = (0.05, 0.4) if kind == "subagent call" else (0.05, 0.85) if kind == "tool pause" else (0.3, 0.6)
        for session, spans in bars.items():
            y = row[session] - 0.5 + low
            ax.broken_barh(spans, (y, height), color=colours[kind], rasterized=raster, linewidth=0)
        ax.barh([0], [0], color=colours[kind], label=kind)  # one legend entry per kind
    _window(ax, window)
    ax.set_yticks(range(len(sessions)), [str(s) for s in sessions])
    ax.set_ylim(len(sessions) - 0.5, -0.5)
    ax.set_ylabel("session")
    ax.set_xlabel("seconds from the run's start (steady window shaded)")
    ax.grid(axis="y", visible=False)
    fig.legend(loc="outside lower center", ncols=len(kinds))
    return fig


def _bars(ax: Any, labels: list[str], series: dict[str, list[float | None]], title: str, ylabel: str) -> None:
    x = np.arange(len(labels))
    width = 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        heights = [np.nan if v is None else v for v in values]
        ax.bar(x + (i - (len(series) - 1) / 2) * width, heights, width, label=name)
    ax.set_xticks(x, labels)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    top = max((v for values in series.values() for v in values if v is not None), default=0.0)
    ax.set_ylim(0, top * 1.3 or 1.0)  # room above the bars for the legend
    if len(series) > 1:
        ax.legend(fontsize=7.5, loc="upper right", ncols=len(series))


@styled
def bucket_figures(rows: Sequence[dict[str, Any]], xlabel: str) -> Any:
    """Cache hit, TTFT and decode speed per bucket (one breakdown: by context length or by turn depth)."""
    used = [r for r in rows if r["requests"]]
    labels = [r["bucket"] for r in used]
    fig = _figure(9, 3.0)
    cache, ttft, decode = fig.subplots(1, 3)
    _bars(
        cache,
        labels,
        {"host hit": [r["host_hit_ratio"] for r in used], "client reuse": [r["client_reuse_ratio"] for r in used]},
        "Prompt cache",
        "share of prompt tokens",
    )
    cache.set_ylim(0, 1.3)
    cache.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    _bars(
        ttft,
        labels,
        {"p50": [r["ttft_s"]["p50"] for r in used], "p95": [r["ttft_s"]["p95"] for r in used]},
        "TTFT",
        "",
    )
    _seconds_axis(ttft, "y", max((r["ttft_s"]["p95"] or 0.0 for r in used), default=0.0))
    _bars(
        decode,
        labels,
        {"p25": [r["decode_tps"]["p25"] for r in used], "p50": [r["decode_tps"]["p50"] for r in used]},
        "Decode speed per user",
        "tokens/s",
    )
    for ax in (cache, ttft, decode):
        ax.set_xlabel(xlabel)
    return fig


@styled
def drift_scatter(rows: Sequence[TaskDrift]) -> Any:
    """Per task, replayed against recorded model time and tool time; on the diagonal the replay kept time."""
    fig = _figure(9, 3.4)
    model, tool = fig.subplots(1, 2)
    for ax, recorded, replayed, title in (
        (model, [r.recorded_model_s for r in rows], [r.model_s for r in rows], "Model time per task"),
        (tool, [r.recorded_tool_s for r in rows], [r.tool_s for r in rows], "Tool time per task"),
    ):
        ax.scatter(recorded, replayed, s=14, color="#1f77b4", alpha=0.8)
        top = max([*recorded, *replayed, 1e-3]) * 1.05
        ax.plot([0, top], [0, top], color="#999999", linewidth=0.8, linestyle="--", label="replayed = recorded")
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.set_xlabel("recorded (s)")
        ax.set_ylabel("replayed (s)")
        ax.set_title(title)
        ax.legend(loc="upper left")
    return fig
