"""The run's phase marks as a loop writes them (``start``, ``all_started``, ``steady_start``, ``stop``, ``end``;
docs/metrics.md): one piece for the closed loop, the open loop and the parent of a sharded run."""

from __future__ import annotations

from collections.abc import Callable

from replay.clock import now
from replay.records.run_file import RecordSink


class PhaseMarks:
    """``mark`` stamps a phase now (or at ``t``); the steady window, open from the start, closes once, at the stop
    (``on_close`` then runs: a worker tells its parent)."""

    def __init__(self, writer: RecordSink, on_close: Callable[[], None] | None = None) -> None:
        self.writer, self.on_close = writer, on_close
        self.window_open = True

    def mark(self, name: str, t: float | None = None) -> None:
        self.writer.phase(name, now() if t is None else t)

    def close_window(self) -> None:
        if self.window_open:
            self.window_open = False
            self.mark("stop")
            if self.on_close is not None:
                self.on_close()
