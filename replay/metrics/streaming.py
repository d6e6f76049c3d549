"""A run's summary made as its records come, in the order they were written: no list of requests is kept.

A request's place in the figures is decided when it arrives, from the phase marks seen so far. That is exact for a
run file, because records are written as things happen: a request written before the ``steady_start`` mark was
sent before it (warm-up); one written after it was sent after it unless its own ``t_sent`` says otherwise; one
sent after the ``stop`` mark (the drain of a run that ran out of tasks) is not in the window, and tokens after it
are the drain's. Until the window opens nobody knows whether it will (a run may stop during warm-up, and then its
window is the whole run): per-call figures of those requests are kept aside and used only if it never opens.
The live run, ``replay report`` and the window records of a soak all summarise this way: a ``StreamSummary`` holds
everything a summary is made of (the accumulators, each segment's phase marks, the window and segment records,
the client's samples, each task beside its recording), whichever way its records came.
"""

from __future__ import annotations

from typing import Any

from replay.metrics.accumulator import Accumulator
from replay.metrics.goodput import CallSlo
from replay.metrics.recorded_timeline import TimelineTally
from replay.metrics.summary import Window, figures, header_card, header_slo, joined, window_from
from replay.metrics.summary_types import Summary
from replay.records.mark_log import MarkLog
from replay.records.run_file import RequestRecord, RunData, TaskRecord

WARMUP, STEADY, AFTER = "warmup", "steady", "after"  # where a token fell


class StreamSummary:
    """Feed phases, requests, tasks and client samples in file order; ``summary`` at any point."""

    def __init__(
        self, keep_tasks: bool = False, recorded: Any = None, ship_tasks: bool = False, slo: CallSlo | None = None
    ) -> None:
        self.phases: dict[str, float] = {}  # the current segment's marks (a resumed run has several segments)
        self.done: list[Window] = []  # the windows of the segments before the current one
        self.first_phases: dict[str, float] | None = None
        self.later_phases: list[dict[str, float]] = []  # the marks of each segment after the first
        self.acc = Accumulator()  # every request's counts and tokens; per-call figures of steady-window calls
        self.early = Accumulator()  # per-call figures of calls sent before the window opened (if it never does)
        self.keep_tasks = keep_tasks  # the HTML report's per-task timelines read them; a run keeps only tallies
        self.tasks: list[TaskRecord] = []
        self.timeline = TimelineTally(recorded)  # ``recorded``: header -> the workload's recorded times
        self.client: list[dict[str, Any]] = []
        self.marks = MarkLog()  # window and segment records, in file order (the windows on disk, not in memory)
        self.first_sent: float | None = None
        self.last_done: float | None = None
        self.ship_tasks = ship_tasks  # a sharded run's worker: its task records go to the parent with its part
        self.shipped: list[TaskRecord] = []
        self.slo = slo  # goodput's per-call SLO over the header's (replay report --slo re-judges a run)

    def header(self, header: dict[str, Any]) -> None:
        """The run's header, before any request: its rate card prices each request as it comes."""
        self.acc.host.card = self.early.host.card = header_card(header)
        self.slo = self.slo or header_slo(header)
        self.acc.goodput.slo = self.early.goodput.slo = self.slo
        self.timeline.header(header)

    def phase(self, name: str, t: float) -> None:
        self.phases[name] = t
        if name == "steady_start" and self.acc.recipe.origin is None:
            self.acc.recipe.origin = t  # coverage slices count from the window's start

    def segment(self, mark: dict[str, Any]) -> None:
        """A resumed run's next segment begins: the segment so far is closed with the window it had."""
        self.done.append(self._window())
        self.first_phases = self.first_phases if self.first_phases is not None else self.phases
        self.phases = {}
        self.later_phases.append(self.phases)
        self.first_sent = self.last_done = None

    def mark(self, record: dict[str, Any]) -> None:
        """A window or segment record (``{"type": ..., ...}``), kept for the figures over time and the segments."""
        self.marks.append(record)

    def _window(self) -> Window:
        first = self.first_sent if self.first_sent is not None else self.phases.get("start", 0.0)
        return window_from(self.phases, first, self.last_done if self.last_done is not None else first)

    def token_key(self, t: float) -> str:
        steady, stop = self.phases.get("steady_start"), self.phases.get("stop")
        if stop is not None and t >= stop:
            return AFTER
        return STEADY if steady is not None and t >= steady else WARMUP

    def request(self, r: RequestRecord) -> None:
        self.first_sent = r.t_sent if self.first_sent is None else min(self.first_sent, r.t_sent)
        done = r.t_done or r.t_sent
        self.last_done = done if self.last_done is None else max(self.last_done, done)
        steady, stop = self.phases.get("steady_start"), self.phases.get("stop")
        in_steady = steady is not None and r.t_sent >= steady and (stop is None or r.t_sent < stop)
        self.acc.add(r, r.error is None and in_steady, self.token_key)
        if r.error is None and steady is None and (stop is None or r.t_sent < stop):
            self.early.add(r, True, self.token_key)

    def task(self, t: TaskRecord) -> None:
        self.acc.add_task(t)
        if self.ship_tasks:
            self.shipped.append(t)
            return
        self.timeline.task(t)
        if self.keep_tasks:
            self.tasks.append(t)

    def sample(self, s: dict[str, Any]) -> None:
        self.client.append(s)

    def run_data(self, header: dict[str, Any], footer: dict[str, Any] | None) -> RunData:
        """The run as read so far, less its requests (their figures are in the accumulators)."""
        phases = self.first_phases if self.first_phases is not None else self.phases
        return RunData(header=header, requests=[], tasks=self.tasks, phases=phases, client=self.client,
                       footer=footer, marks=self.marks, later_phases=self.later_phases)  # fmt: skip

    # --- a sharded run: each worker summarises its own records, the parent merges (replay.scale.collect) --------
    def take_part(self) -> tuple[Accumulator, Accumulator, float | None, float | None, list[TaskRecord]]:
        """What was added since the last take (the run's accumulators of those records, their first send and last
        end, and the task records, which the parent sets beside their recording), this summary starting afresh: a
        worker ships it to the parent, which ``merge_part``s it."""
        part = (self.acc, self.early, self.first_sent, self.last_done, self.shipped)
        self.shipped = []
        card, origin = self.acc.host.card, self.acc.recipe.origin
        self.acc, self.early = Accumulator(card, self.slo), Accumulator(card, self.slo)
        self.acc.recipe.origin = origin
        self.first_sent = self.last_done = None
        return part

    def merge_part(self, part: tuple[Accumulator, Accumulator, float | None, float | None, list[TaskRecord]]) -> None:
        """Another summary's records added in: the same figures as if each of them had been ``request``ed here
        (the accumulators merge exactly; the worker placed each record by the marks this one had by its end)."""
        acc, early, first_sent, last_done, tasks = part
        for t in tasks:  # their counts are in ``acc``; the recorded timeline and the kept tasks are this side's
            self.timeline.task(t)
            if self.keep_tasks:
                self.tasks.append(t)
        self.acc.merge(acc)
        self.early.merge(early)
        if first_sent is not None:
            self.first_sent = first_sent if self.first_sent is None else min(self.first_sent, first_sent)
        if last_done is not None:
            self.last_done = last_done if self.last_done is None else max(self.last_done, last_done)

    def summary(self, header: dict[str, Any], footer: dict[str, Any] | None = None) -> Summary:
        win = joined([*self.done, self._window()])
        acc = self.acc
        if not win.steady:  # the window never opened: it is the whole run, warm-up calls included
            acc = Accumulator()
            acc.merge(self.acc)
            acc.merge_measured(self.early)  # (merge_measured: the early calls' counts are in self.acc already)
        steady_tokens = Accumulator()
        keys = (STEADY,) if win.steady else (WARMUP, STEADY)  # without a steady window: everything before the stop
        for key in keys:
            if key in acc.tokens:
                steady_tokens.tokens.setdefault(True, [0.0, 0.0, 0.0])
                for i, v in enumerate(acc.tokens[key]):
                    steady_tokens.tokens[True][i] += v
        merged = _with_tokens(acc, steady_tokens.tokens.get(True, [0.0, 0.0, 0.0]))
        return figures(merged, win, self.run_data(header, footer))


def _with_tokens(acc: Accumulator, inside: list[float]) -> Accumulator:
    """``acc`` seen by ``figures``: its tokens inside the window under the key ``figures`` reads (True)."""
    view = Accumulator()
    view.sums, view.errors_by_class, view.hist = acc.sums, acc.errors_by_class, acc.hist
    view.by_context, view.by_turn, view.estimated_input = acc.by_context, acc.by_turn, acc.estimated_input
    view.host, view.recipe, view.tasks, view.answers = acc.host, acc.recipe, acc.tasks, acc.answers
    view.goodput, view.lanes, view.pauses = acc.goodput, acc.lanes, acc.pauses
    view.tokens = {True: inside}
    return view


def read_stream(path: Any, notes: Any = None, stream: StreamSummary | None = None) -> tuple[StreamSummary, RunData]:
    """A run file read once into ``stream`` (a new one by default), in flat memory; with the RunData of everything
    but its requests, as ``stream.run_data`` gives it."""
    from replay.records.reader import read_run

    stream = stream if stream is not None else StreamSummary(keep_tasks=True)
    data = read_run(path, notes, sink=stream)
    return stream, stream.run_data(data.header, data.footer)


def summarize_file(path: Any, notes: Any = None) -> tuple[Summary, RunData]:
    """The summary of a run file read once, in flat memory; with the RunData of everything but its requests."""
    stream, data = read_stream(path, notes)
    return stream.summary(data.header, data.footer), data
