"""A sharded run's records on their way to its one run file, with the parent doing no per-record work.

The parent of thousands of sessions receives every record of every worker; one event loop that decoded,
encoded, summarised and windowed each of them (about 0.4 ms a record with windows and Prometheus on) would cap a
fleet at a few thousand calls a second. So the work is split where it can be done in parallel:

- A worker encodes each record as its run-file line (already in the parent's clock) and sends it in its next batch
  (``replay.scale.channel``): the parent writes a batch with one write and one flush, and scrubs it as a whole.
- A worker summarises its own records into sinks like the parent's (the run's summary, its windows, the Prometheus
  counters: ``plan``), and ships what they gathered (``take_part``) about once a second; the parent merges the parts
  (``merge_part``: histograms and counts add exactly), so its figures are those of every record, its cost per part.

Where a record falls (warm-up, steady window, after the stop; which window) depends on the phase marks the parent
makes as the run goes. The parent sends each mark to every worker as it makes it, and answers every batch with its
clock. A worker summarises a record only once the parent's clock has passed the record's end: the marks made before
that end have reached the worker by then (they were sent before that clock), and a mark made after it cannot change
where the record falls (the record lies wholly before it). So each record lands where the parent would have put it,
and the live summary equals ``replay report``'s of the file. If a worker dies, the records it sent but had not yet
summarised are summarised by the parent from their lines (``Uncovered``): the summary still covers the whole file.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable
from typing import Any

import orjson

from replay.loops.live import RECENT_S, LiveState
from replay.metrics.streaming import StreamSummary
from replay.metrics.windows import Tee, WindowRecorder
from replay.records.run_file import RequestRecord, TaskRecord, encode_record
from replay.reports.prometheus_export import PrometheusSink
from replay.scale.clock_sync import REQUEST_TIMES, TASK_TIMES, shift

PART_S = 1.0  # how often a worker ships what its sinks gathered
LIVE_COUNTS = (
    "in_flight",
    "requests",
    "errors",
    "retries",
    "output_tokens",
    "tasks_done",
    "tasks_failed",
    "call_s",
    "task_s",
)  # fmt: skip  (the live view's counters a worker reports)

Plan = list[tuple[str, Any]]  # the parent's sinks, for a worker to mirror: (kind, what it needs)


def plan(sink: Any) -> Plan:
    """What a worker needs to mirror the parent's sinks (a Tee of them, one, or none)."""
    sinks = sink.sinks if isinstance(sink, Tee) else () if sink is None else (sink,)
    out: Plan = []
    for s in sinks:
        if isinstance(s, StreamSummary):
            out.append(("summary", None))
        elif isinstance(s, WindowRecorder):
            out.append(("windows", (s.length, s.first)))
        elif isinstance(s, PrometheusSink):
            out.append(("prometheus", s.host))
        else:
            raise TypeError(f"a sharded run cannot merge the parts of a {type(s).__name__}")
    return out


def mirror(sinks: Plan, header: dict[str, Any]) -> Tee:
    """The worker's own sinks, as the parent's, given the run's header (its rate card prices each call)."""
    made: list[Any] = []
    for kind, arg in sinks:
        if kind == "summary":
            made.append(StreamSummary(ship_tasks=True))
        elif kind == "windows":
            made.append(WindowRecorder(arg[0], arg[1]))
        else:
            made.append(PrometheusSink(arg))
    tee = Tee(*made)
    tee.header(header)
    return tee


class WorkerCollector:
    """A worker's side: records out as lines, summarised into its own sinks once the parent's clock has passed them,
    their parts out every ``PART_S``. ``send`` queues a message to the parent; ``offset`` brings this worker's stamps
    to the parent's clock (remote workers; 0 on one machine)."""

    def __init__(self, send: Callable[[tuple[Any, ...]], Any], sinks: Plan, header: dict[str, Any], offset: float):
        self.send, self.offset = send, offset
        self.sinks = mirror(sinks, header) if sinks else None
        self.pending: collections.deque[tuple[float, bool, Any]] = collections.deque()  # (end, is a request, record)
        self.summarised = 0  # records summarised so far (the parent keeps the lines of the others)
        self.shipped = 0
        self.clock = -math.inf  # the parent's clock, as its last answer said

    def request(self, rec: RequestRecord) -> None:
        if self.offset:
            shift(rec, REQUEST_TIMES, self.offset)
        self.send(("line", 1, encode_record(b"request", rec)))
        self.pending.append((rec.t_done or rec.t_sent, True, rec))

    def task(self, rec: TaskRecord) -> None:
        if self.offset:
            shift(rec, TASK_TIMES, self.offset)
        self.send(("line", 0, encode_record(b"task", rec)))
        self.pending.append((rec.t_end, False, rec))

    def phase(self, name: str, t: float) -> None:
        """A mark the parent made (in its clock, as every record here is)."""
        if self.sinks is not None:
            self.sinks.phase(name, t)

    def parent_clock(self, t: float, final: bool = False) -> None:
        """The parent's clock when it answered a batch: every record that ended before it can be placed now
        (``final``: the run is over and every mark that matters is known: place the rest)."""
        self.clock = max(self.clock, t)
        pending, sinks = self.pending, self.sinks
        while pending and (final or pending[0][0] <= self.clock):
            _, is_request, rec = pending.popleft()
            if sinks is not None:
                sinks.request(rec) if is_request else sinks.task(rec)
            self.summarised += 1

    def ship(self) -> None:
        """What the sinks gathered since the last part (if anything), with how many records it covers in all."""
        if self.summarised != self.shipped:
            self.shipped = self.summarised
            self.send(("part", self.summarised, self.sinks.take_part() if self.sinks is not None else None))


class Uncovered:
    """The parent's side, per worker: the lines whose records no part has covered yet, in order, so that a worker
    that dies leaves none of its written records out of the summary."""

    def __init__(self) -> None:
        self.lines: collections.deque[tuple[int, bytes]] = collections.deque()  # (1 request / 0 task, line)
        self.covered = 0  # records the parts received cover
        self.received = 0

    def add(self, is_request: int, line: bytes) -> None:
        self.lines.append((is_request, line))
        self.received += 1

    def cover(self, summarised: int) -> None:
        drop = summarised - self.covered
        for _ in range(min(drop, len(self.lines))):
            self.lines.popleft()
        self.covered = summarised

    def summarise(self, sink: Any) -> int:
        """The rest, into ``sink`` one record at a time (the worker is gone); how many."""
        n = 0
        while self.lines:
            is_request, line = self.lines.popleft()
            obj = orjson.loads(line)
            del obj["type"]
            if sink is not None:
                sink.request(RequestRecord(**obj)) if is_request else sink.task(TaskRecord(**obj))
            n += 1
        self.covered += n
        return n


def merge_live(live: LiveState, before: dict[str, Any], state: dict[str, Any], lanes: set[int]) -> None:
    """A worker's live state (``state``; ``before``: what it said last) into the run's: its counters by what changed
    since, its lanes' pauses and turns left as its own keys (lanes are the run's numbers), the calls that ended in the
    meantime. Once a second per worker, whatever the number of records."""
    for name in LIVE_COUNTS:
        setattr(live, name, getattr(live, name) + state[name] - before.get(name, 0))
    for i in (0, 1):
        live.input_tokens[i] += state["input_tokens"][i] - before.get("input_tokens", (0, 0))[i]
    seen = before.get("errors_by_class", {})
    for cls, n in state["errors_by_class"].items():
        live.errors_by_class[cls] = live.errors_by_class.get(cls, 0) + n - seen.get(cls, 0)
    for name in ("pauses", "paused_at", "left"):
        table = getattr(live, name)
        for lane in [k for k in table if k in lanes]:
            del table[lane]
        table.update(state[name])
    live.recent.extend(state["recent"])
    while live.recent and live.recent[0][0] < live.recent[-1][0] - RECENT_S:
        live.recent.popleft()
