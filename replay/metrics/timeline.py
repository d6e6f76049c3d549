"""A run over time: token rates and calls in flight per time bin, and each session's intervals.

The summary gives one number per figure over the steady window; these series show how the run got there
(warm-up, a host that slows as contexts grow, a stall, the drain). Tokens are placed in time as the summary's
throughput places them: a call's input (cached and new) at its first token, its output at the reads that
carried it. All times are seconds from the run's start.

Session intervals are open-ended by kind: every source in ``INTERVAL_SOURCES`` yields ``Interval`` values and
the picture draws whatever kinds come out, so a new kind of record (the lead's "throttled" waits) needs one
more source, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from replay.records.run_file import RequestRecord, RunData

MAX_BINS = 120
MIN_BIN_S = 0.05


def run_start(run: RunData) -> float:
    """Time zero of the run: its ``start`` phase mark, or its first call."""
    return run.phases.get("start", min((r.t_call or r.t_sent for r in run.requests), default=0.0))


def run_end(run: RunData) -> float:
    return run.phases.get("end") or max((r.t_done or r.t_sent for r in run.requests), default=run_start(run))


@dataclass(slots=True)
class Series:
    """Per-bin rates over the run: bin starts (s from the run start), tokens/s by kind, mean calls in flight."""

    t: np.ndarray
    bin_s: float
    cached_input_tps: np.ndarray
    new_input_tps: np.ndarray
    output_tps: np.ndarray
    in_flight: np.ndarray


def bin_width(seconds: float) -> float:
    """A round bin width giving at most ``MAX_BINS`` bins (1, 2 or 5 times a power of ten)."""
    raw = max(seconds / MAX_BINS, MIN_BIN_S)
    power = 10 ** np.floor(np.log10(raw))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= raw))


def _input_tokens(r: RequestRecord) -> tuple[float, float]:
    if r.prompt_tokens is None:
        return 0.0, float(r.prompt_tokens_est)
    cached = r.cached_tokens or 0
    return float(cached), float(r.prompt_tokens - cached)


def series(run: RunData) -> Series:
    """Token rates and the time-averaged number of calls in flight, per bin."""
    t0, span = run_start(run), max(run_end(run) - run_start(run), MIN_BIN_S)
    width = bin_width(span)
    n = max(1, int(np.ceil(span / width)))
    edges = np.arange(n + 1) * width
    cached, new, out = np.zeros(n), np.zeros(n), np.zeros(n)

    def index(t: float) -> int:
        return min(n - 1, max(0, int((t - t0) / width)))

    for r in run.requests:
        if r.t_first_token is not None:
            c, w = _input_tokens(r)
            cached[index(r.t_first_token)] += c
            new[index(r.t_first_token)] += w
        if r.chunks:
            scale = r.output_tokens / r.output_events if (r.output_tokens and r.output_events) else 1.0
            for dt, k in zip(r.chunks[0::2], r.chunks[1::2], strict=True):
                out[index(r.t_sent + dt)] += k * scale
    busy = np.zeros(n)  # call-seconds inside each bin, from each call's [t_sent, t_done)
    for r in run.requests:
        a, b = r.t_sent - t0, (r.t_done or r.t_sent) - t0
        busy += np.clip(np.minimum(edges[1:], b) - np.maximum(edges[:-1], a), 0.0, None)
    return Series(edges[:-1], width, cached / width, new / width, out / width, busy / width)


@dataclass(frozen=True, slots=True)
class Interval:
    """Something a session spent time on, from ``start`` to ``end`` (s from the run start)."""

    session: int
    kind: str
    start: float
    end: float


def _call_intervals(run: RunData) -> Iterable[Interval]:
    """Model calls (bytes sent to stream closed), subagents' apart, and the client's send wait before each."""
    t0 = run_start(run)
    for r in run.requests:
        end = (r.t_done or r.t_sent) - t0
        kind = "subagent call" if r.parent else ("model call" if r.ok else "failed call")
        yield Interval(r.session, kind, r.t_sent - t0, end)
        if r.t_call is not None and r.t_sent > r.t_call:
            yield Interval(r.session, "send wait", r.t_call - t0, r.t_sent - t0)


def _tool_intervals(run: RunData) -> Iterable[Interval]:
    """The gap between one call's end and the next call of the same agent: its tools (and subagents) ran."""
    t0 = run_start(run)
    agents: dict[tuple[int, int, str, str | None], list[RequestRecord]] = {}
    for r in run.requests:
        agents.setdefault((r.session, r.task, r.trajectory, r.parent), []).append(r)
    for calls in agents.values():
        calls.sort(key=lambda r: r.turn)
        for prev, nxt in pairwise(calls):
            start, end = prev.t_done, nxt.t_call if nxt.t_call is not None else nxt.t_sent
            if start is not None and end > start:
                yield Interval(prev.session, "tool pause", start - t0, end - t0)


IntervalSource = Callable[[RunData], Iterable[Interval]]
INTERVAL_SOURCES: list[IntervalSource] = [_call_intervals, _tool_intervals]


def session_intervals(run: RunData, sources: Iterable[IntervalSource] = INTERVAL_SOURCES) -> list[Interval]:
    """Every interval of every session, from every source, in time order."""
    out = [iv for source in sources for iv in source(run)]
    out.sort(key=lambda iv: (iv.session, iv.start))
    return out
