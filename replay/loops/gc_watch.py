"""The client's own pauses: its garbage collections, timed as they happen (``gc.callbacks``), and its event-loop
stalls (the lag probe of ``replay.loops.client_monitor``), kept as intervals so that a call can say how much of its
timing window (sent to last token) the client itself spent paused (``client_pause_ms``, docs/metrics.md).

And the collector's policy for a run: the start-up heap is frozen (``replay.event_loop``), and again once every
session has started; the young generation is collected less often and the oldest only when one is due, by the probe
when the loop has just kept up (no lag), not by an allocation in the middle of a burst of reads (docs/benchmarks.md).
``REPLAY_GC=default`` leaves Python's own thresholds (to compare).
"""

from __future__ import annotations

import gc
import os
from bisect import bisect_right
from time import perf_counter
from typing import Any

PAUSE_S = 0.005  # a pause longer than this is one a call's timing carries
KEEP_S = 660.0  # pauses kept this long: past the longest call (the default --request-timeout, 600 s)
# The collector during a run: young collections a tenth as often as Python's default (each walks only the young
# objects, so their total cost is about the same, in fewer pauses), and the oldest generation left to the idle loop.
RUN_THRESHOLDS = (7000, 10, 1_000_000)
FULL_DUE = 10  # young-to-old collections since the last full one at which the idle loop runs one (Python's default)
FULL_OVERDUE = 4 * FULL_DUE  # ... and at which it runs one anyway (a loop never idle must not keep its garbage)
IDLE_LAG_S = 0.002  # the probe woke within this of its time (libuv's timers have 1 ms steps): no backlog


class PauseLog:
    """The client's pauses over PAUSE_S, disjoint and in time order (a collection inside a stall is one pause)."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []

    def add(self, start: float, end: float) -> None:
        """A pause from ``start`` to ``end``: merged with those it overlaps; those older than KEEP_S dropped."""
        if end - start <= PAUSE_S:
            return
        starts, ends = self.starts, self.ends
        j = bisect_right(starts, end)  # [0, j): the pauses that began by this one's end
        i = j
        while i and ends[i - 1] >= start:
            i -= 1
        if i < j:
            start, end = min(start, starts[i]), max(end, ends[j - 1])
        starts[i:j], ends[i:j] = [start], [end]
        if ends[0] < end - KEEP_S:
            old = bisect_right(ends, end - KEEP_S)
            del starts[:old], ends[:old]

    def overlap(self, t0: float, t1: float) -> float:
        """Seconds of [t0, t1] the client spent in its pauses."""
        starts, ends = self.starts, self.ends
        total = 0.0
        for k in range(bisect_right(ends, t0), len(ends)):
            if starts[k] >= t1:
                break
            total += min(ends[k], t1) - max(starts[k], t0)
        return total


class GcWatch:
    """This process's collections, timed by ``gc.callbacks`` while installed: in all, and since the last ``take``
    (a client sample's window); each over PAUSE_S goes into ``pauses``."""

    def __init__(self, pauses: PauseLog) -> None:
        self.pauses = pauses
        self.total = GcTally()
        self.window = GcTally()
        self._began = 0.0

    def __enter__(self) -> GcWatch:
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = perf_counter()
            return
        end = perf_counter()
        took, full = end - self._began, info.get("generation") == 2
        self.total.add(took, full)
        self.window.add(took, full)
        if took > PAUSE_S:
            self.pauses.add(self._began, end)

    def take(self) -> dict[str, Any]:
        """The collections since the last take, as a client sample's ``gc_*`` keys (docs/run-file.md)."""
        w, self.window = self.window, GcTally()
        return {"gc_collections": w.collections, "gc_full": w.full, "gc_pause_s": w.pause_s,
                "gc_pause_max_ms": 1000 * w.pause_max_s}  # fmt: skip


class GcTally:
    """Collections counted: how many, how many full (the oldest generation), their total and longest pause."""

    __slots__ = ("collections", "full", "pause_max_s", "pause_s")

    def __init__(self) -> None:
        self.collections = self.full = 0
        self.pause_s = self.pause_max_s = 0.0

    def add(self, took: float, full: bool) -> None:
        self.collections += 1
        self.full += full
        self.pause_s += took
        self.pause_max_s = max(self.pause_max_s, took)


class CollectorPolicy:
    """The collector's settings for the length of a run, restored after it (a library caller's own stay theirs);
    runs at once in one process (``replay run --host A --host B``, each on a thread) share them: the first to start
    sets them, the last to end restores the caller's."""

    _runs = 0  # runs of this process inside the policy now
    _callers: tuple[int, int, int] = (700, 10, 10)

    def __init__(self) -> None:
        self.on = os.environ.get("REPLAY_GC", "").lower() != "default"

    def __enter__(self) -> CollectorPolicy:
        if self.on:
            if CollectorPolicy._runs == 0:
                CollectorPolicy._callers = gc.get_threshold()
                gc.set_threshold(*RUN_THRESHOLDS)
            CollectorPolicy._runs += 1
        return self

    def __exit__(self, *exc: object) -> None:
        if self.on:
            CollectorPolicy._runs -= 1
            if CollectorPolicy._runs == 0:
                gc.set_threshold(*CollectorPolicy._callers)

    def sessions_started(self) -> None:
        """Every session has started (no call sent yet): what the run made to get here is collected once and frozen
        with the start-up heap, so no full collection walks it again."""
        if self.on:
            gc.collect()
            gc.freeze()

    def idle(self, lag_s: float) -> None:
        """The probe's turn: a full collection that is due runs now when the loop has just kept up (``lag_s``: how
        late the probe woke), rather than when an allocation in a burst of reads would set it off."""
        due = gc.get_count()[2]
        if self.on and (due >= FULL_OVERDUE or (due >= FULL_DUE and lag_s < IDLE_LAG_S)):
            gc.collect(2)
