"""The phase marks of a sharded run: made by the parent from every worker's records, by the single-process rules
(``replay.loops.phases``), and sent to every worker as they are made (the workers place their records by them:
``replay.scale.collect``)."""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any

from replay.loops.phases import PhaseMarks
from replay.records.run_file import RunWriter


class RunMarks(PhaseMarks):
    """The run's phase decisions, made here from every worker's records by the single-process rules; each mark goes
    to every worker as it is made (they place their records by them: ``replay.scale.collect``)."""

    def __init__(self, writer: RunWriter, slots: int, auto: bool, tell: Callable[[tuple[Any, ...]], None]) -> None:
        super().__init__(writer)
        self.slots, self.tell = slots, tell
        self.auto = auto  # the window opens when every lane's first call is back
        self.stopping = False  # the stop was passed to the workers: no new work
        self.first_call_done: set[int] = set()

    def mark(self, name: str, t: float | None = None) -> None:
        t = perf_counter() if t is None else t
        super().mark(name, t)
        self.tell(("phase", name, t))

    def first(self, lane: int) -> None:
        """Lane ``lane``'s first call is back."""
        if lane not in self.first_call_done:
            self.first_call_done.add(lane)
            if self.auto and len(self.first_call_done) == self.slots and not self.stopping:
                self.mark("steady_start")
