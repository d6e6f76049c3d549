"""Windows: a soak's figures over time, written as each window closes, and any span of a run summarised from them.

A ``WindowRecorder`` takes each record as the run writer writes it. Each request goes, as it completes, into the
accumulator of the window it completed in: ``steady`` when it is one of the summary's per-call calls (successful,
sent in the steady window), ``other`` otherwise; its tokens are keyed by the window and phase each token fell in,
so a long call's early tokens reach earlier windows' throughput from a later record (``late`` tokens). When a
window closes, its record (``{"type": "window", ...}``) is appended and synced. Merged, the windows rebuild the
run's summary (the same histograms, so the same percentiles); a span of them (``replay report --from --to``) is
summarised the same way, over the calls completed in the span and the tokens that fell in it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

from replay.metrics.accumulator import Accumulator
from replay.metrics.client_pauses import gc_figures
from replay.metrics.concurrency import LaneTally
from replay.metrics.goodput import CallSlo
from replay.metrics.host import speculation
from replay.metrics.summary import Window, figures, header_card, header_slo
from replay.metrics.summary_types import Summary
from replay.records.run_file import RequestRecord, RunData

WARMUP, STEADY, AFTER = "warmup", "steady", "after"


class WindowRecorder:
    """Per-window accumulators of a running run; ``close(t)`` returns the record of the window ending at ``t``."""

    def __init__(self, length_s: float, first_index: int = 0) -> None:
        self.length = length_s
        self.t0 = self.start = 0.0  # set by the run's "start" mark
        self.first = self.index = first_index  # a resumed run's windows go on numbering from its last one
        self.phases: dict[str, float] = {}
        self.card: dict[str, Any] | None = None  # the run's rate card, from its header
        self.slo: CallSlo | None = None  # goodput's per-call SLO, from its header
        self.origin: float | None = None  # the steady window's start (recipe coverage slices count from it)
        self._new()

    def _new(self) -> None:
        self.steady, self.other = Accumulator(self.card, self.slo), Accumulator(self.card, self.slo)
        self.steady.recipe.origin = self.other.recipe.origin = self.origin
        self.host_metrics: dict[str, float] = {}

    def window_of(self, t: float) -> int:
        return self.first + max(0, int((t - self.t0) // self.length))

    def token_key(self, t: float) -> tuple[int, str]:
        steady, stop = self.phases.get("steady_start"), self.phases.get("stop")
        phase = AFTER if stop is not None and t >= stop else STEADY if steady is not None and t >= steady else WARMUP
        return self.window_of(t), phase

    # --- the sink the run writer feeds --------------------------------------------------------------------
    def header(self, header: dict[str, Any]) -> None:
        self.card, self.slo = header_card(header), header_slo(header)
        self.steady.host.card = self.other.host.card = self.card
        self.steady.goodput.slo = self.other.goodput.slo = self.slo

    def phase(self, name: str, t: float) -> None:
        self.phases[name] = t
        if name == "steady_start":
            self.origin = t
            self.steady.recipe.origin = self.other.recipe.origin = t
        if name == "start":
            self.t0 = self.start = t

    def request(self, r: RequestRecord) -> None:
        steady, stop = self.phases.get("steady_start"), self.phases.get("stop")
        in_steady = steady is not None and r.t_sent >= steady and (stop is None or r.t_sent < stop)
        if r.error is None and in_steady:
            self.steady.add(r, True, self.token_key)
        else:
            self.other.add(r, r.error is None, self.token_key)

    def task(self, t: Any) -> None:
        self.steady.add_task(t)  # in the window it ended in

    def sample(self, _: Any) -> None:
        pass

    # --- a sharded run: each worker fills its own, the parent merges them into the open window -------------------
    def take_part(self) -> tuple[Accumulator, Accumulator]:
        """The window accumulators of the records added since the last take; these start afresh."""
        part = (self.steady, self.other)
        self._new()
        return part

    def merge_part(self, part: tuple[Accumulator, Accumulator]) -> None:
        """A worker's records into the open window, as if each had completed now (their tokens keep the windows
        they fell in, as late tokens do)."""
        self.steady.merge(part[0])
        self.other.merge(part[1])

    # --- closing -----------------------------------------------------------------------------------------------
    def due(self) -> float:
        """When the open window ends."""
        return self.t0 + (self.index - self.first + 1) * self.length

    def close(self, t: float) -> dict[str, Any]:
        """The record of the open window, which ends at ``t``; the next one opens."""
        record = {
            "index": self.index,
            "t_start": self.start,
            "t_end": t,
            "steady": self.steady.encode(),
            "other": self.other.encode(),
            "host_metrics": self.host_metrics,
        }
        self.index += 1
        self.start = t
        self._new()
        return record


def has_windows(run: RunData) -> bool:
    """Whether the run wrote window records (read up to its first one, not all of them)."""
    return next(_windows(run), None) is not None


def _windows(run: RunData) -> Iterator[dict[str, Any]]:
    """The run's window records one at a time (a live run's are read back from disk as they are asked for)."""
    return (m for m in run.marks if m.get("type") == "window")


def _decoded(w: dict[str, Any]) -> tuple[Accumulator, Accumulator]:
    """A window record's two accumulators. Decoded, a window's histograms take megabytes (9 MB a window, measured:
    docs/benchmarks.md, "Accelerated soak memory"), so a run's windows are decoded one at a time, never all at once:
    an eight-hour soak's 480 windows held together would take gigabytes as its summary is made."""
    return Accumulator.decode(w["steady"]), Accumulator.decode(w["other"])


def _light(run: RunData) -> tuple[list[tuple[Hashable, list[float]]], set[int]]:
    """What every window's figures need from all the others, read from the records without decoding their
    histograms: each record's token sums by key (window, phase), in record order, and the tasks that missed the SLO
    in any window (as ``Accumulator.decode`` reads them)."""
    tokens: list[tuple[Hashable, list[float]]] = []
    missed: set[int] = set()
    for w in _windows(run):
        for part in (w["steady"], w["other"]):
            tokens += [(tuple(k) if isinstance(k, list) else k, list(v)) for k, v in part["tokens"]]
            missed.update(int(task) for task in (part.get("goodput") or {}).get("missed", ()))
    return tokens, missed


def _lanes(run: RunData) -> LaneTally:
    """The whole run's lane tally from every window record (a task that ended in a later window was running in this
    one), read without decoding the windows' histograms."""
    lanes = LaneTally()
    for w in _windows(run):
        for part in (w["steady"], w["other"]):
            lanes.merge(LaneTally.decode(part.get("lanes")))
    return lanes


def _tokens_in(tokens: list[tuple[Hashable, list[float]]], keep: Any) -> list[float]:
    """Σ tokens, over every window record, of the (window, phase) keys ``keep`` accepts: late tokens included."""
    inside = [0.0, 0.0, 0.0]
    for key, values in tokens:
        if keep(key):
            inside = [a + b for a, b in zip(inside, values, strict=True)]
    return inside


def rebuild(run: RunData, win: Window) -> Summary:
    """The run's summary from its window records alone (tasks, phases and client samples of ``run`` as read)."""
    acc = Accumulator()
    for w in _windows(run):
        steady, other = _decoded(w)
        acc.merge(steady)
        acc.merge(other, measured=not win.steady)  # without a steady window the whole run's calls are per-call
    phases = (STEADY,) if win.steady else (WARMUP, STEADY)
    acc.tokens = {True: _tokens_in(_light(run)[0], lambda key: key[1] in phases)}
    return figures(acc, win, run)


def span(run: RunData, start_s: float, end_s: float) -> Summary:
    """The summary of the windows whose middle lies in [start_s, end_s) seconds after the run's start: the calls
    that completed in them, the tokens that fell in them, and what the lanes did in them (from every window's records:
    a task that ended later was running in them)."""
    t0 = run.phases.get("start", 0.0)
    acc = Accumulator()
    indices: list[int] = []
    lo = hi = 0.0
    for w in _windows(run):
        if start_s <= (w["t_start"] + w["t_end"]) / 2 - t0 < end_s:
            steady, other = _decoded(w)
            acc.merge(steady)
            acc.merge(other)
            lo, hi = (w["t_start"] if not indices else lo), w["t_end"]
            indices.append(w["index"])
    if not indices:
        raise ValueError(f"no window of the run lies between {start_s:g} s and {end_s:g} s after its start")
    chosen = set(indices)
    acc.tokens = {True: _tokens_in(_light(run)[0], lambda key: key[0] in chosen)}
    acc.lanes = _lanes(run)
    samples = [s for s in run.client if lo <= s["t"] < hi]
    part = RunData(header=run.header, requests=[], tasks=[], phases=run.phases, client=samples, footer=run.footer)
    return figures(acc, Window(lo, hi, steady=True), part)


def series(run: RunData) -> list[dict[str, Any]]:
    """Per window: its figures (calls completed in it; tokens that fell in it, late ones included). Its goodput
    judges the calls completed in it and the complete tasks that ended in it, each task by every call it made,
    whichever window that call completed in (so a task that missed in an earlier window is a miss where it ends)."""
    tokens, missed = _light(run)
    lanes = _lanes(run)
    timed = gc_figures(run.client)["collections"] is not None  # the client timed its pauses (not the virtual clock)
    out = []
    t0 = run.phases.get("start", 0.0)
    for w in _windows(run):
        steady, other = _decoded(w)
        acc = Accumulator()
        acc.merge(steady)
        acc.merge(other)
        acc.goodput.missed = set(missed)
        acc.lanes = lanes
        acc.tokens = {True: _tokens_in(tokens, lambda key, i=w["index"]: key[0] == i)}
        part = RunData(run.header, [], [], run.phases, [], run.footer)  # the footer: every task's record is in
        f = figures(acc, Window(w["t_start"], w["t_end"], True), part)
        out.append({
            "index": w["index"],
            "start_s": w["t_start"] - t0,
            "end_s": w["t_end"] - t0,
            "requests": f.requests,
            "errors": f.errors,
            "total_tps": f.throughput.total_tps,
            "output_tps": f.throughput.output_tps,
            "ttft_p50_s": f.ttft_s.points["p50"],
            "ttft_p95_s": f.ttft_s.points["p95"],
            "user_decode_tps_p25": f.user_decode_tps.points["p25"],
            "user_decode_tps_p50": f.user_decode_tps.points["p50"],
            "interactivity_e2e_p90": f.interactivity_e2e["p90"],
            "host_hit_ratio": f.cache.host_hit_ratio,
            "host_metrics": w.get("host_metrics") or {},
            "speculation": f.host_figures["speculation"],
            "goodput": dict(f.goodput),
            "concurrency": _lane_row(f),
            "client_paused_share": acc.pauses.figures(acc.sums["measured"], timed)["share"],
            "client_gc": gc_figures(s for s in run.client if w["t_start"] <= s["t"] < w["t_end"]),
        })  # fmt: skip
    if not any(row["speculation"] for row in out):  # no call reported it: the host's counters, as the summary's
        for row in out:
            row["speculation"] = speculation.from_host_metrics(row["host_metrics"])
    return out


def _lane_row(f: Summary) -> dict[str, Any]:
    """A window's lanes: what they did over its whole seconds (the keys of the summary's ``concurrency``)."""
    c = f.concurrency
    keys = ("seconds", "in_call_mean", "in_call_min", "in_tool_mean", "between_tasks_mean", "client_wait_mean",
            "idle_mean", "active_mean", "active_min", "active_share")  # fmt: skip
    return {k: getattr(c, k) for k in keys} if c is not None else {}


class Tee:
    """Hands every record to several sinks (the run's summary and its windows)."""

    def __init__(self, *sinks: Any) -> None:
        self.sinks = sinks

    def header(self, header: dict[str, Any]) -> None:
        for s in self.sinks:
            if hasattr(s, "header"):
                s.header(header)

    def phase(self, name: str, t: float) -> None:
        for s in self.sinks:
            s.phase(name, t)

    def request(self, r: RequestRecord) -> None:
        for s in self.sinks:
            s.request(r)

    def task(self, t: Any) -> None:
        for s in self.sinks:
            s.task(t)

    def sample(self, s: Any) -> None:
        for sink in self.sinks:
            sink.sample(s)

    def segment(self, mark: dict[str, Any]) -> None:
        for s in self.sinks:
            if hasattr(s, "segment"):
                s.segment(mark)

    def mark(self, record: dict[str, Any]) -> None:
        for s in self.sinks:
            if hasattr(s, "mark"):
                s.mark(record)

    def take_part(self) -> list[Any]:
        """Each sink's part (``take_part``), in order: what a worker of a sharded run ships to its parent."""
        return [s.take_part() for s in self.sinks]

    def merge_part(self, parts: list[Any]) -> None:
        """A worker's parts, each into the sink it came from (the worker's Tee mirrors this one: ``kinds``)."""
        for sink, part in zip(self.sinks, parts, strict=True):
            sink.merge_part(part)
