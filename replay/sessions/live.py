"""What a running run is doing right now, for the progress line (and any live view): cheap counters and each
session's phase, updated as records arrive and pauses begin, never per token.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from time import perf_counter

from replay.results.records import RequestRecord, TaskRecord
from replay.workload.words import plural


@dataclass(slots=True)
class LiveState:
    """Counters and phases of one run."""

    t0: float = field(default_factory=perf_counter)
    tasks_total: int | None = None  # None: the run stops on time, not on a task count
    duration_s: float | None = None
    requests: int = 0
    errors: int = 0
    retries: int = 0
    output_tokens: int = 0
    tasks_done: int = 0
    tasks_failed: int = 0
    pauses: dict[int, float] = field(default_factory=dict)  # session -> when its tool pause ends
    in_flight: int = 0

    def request(self, rec: RequestRecord) -> None:
        self.requests += 1
        self.errors += rec.error is not None
        self.retries += rec.attempt > 1
        self.output_tokens += rec.output_tokens or rec.output_events

    def task(self, rec: TaskRecord) -> None:
        self.tasks_done += 1
        self.tasks_failed += rec.status == "failed"

    def pausing(self, slot: int, until: float | None) -> None:
        """Session ``slot`` entered a tool pause ending at ``until`` (None: it left it)."""
        if until is None:
            self.pauses.pop(slot, None)
        else:
            self.pauses[slot] = until


class ProgressLine:
    """A line every few seconds on stderr: done of total, time left, rates, sessions in tool pauses."""

    def __init__(self, state: LiveState) -> None:
        self.state = state
        self._tokens, self._t = 0, state.t0

    def line(self, draining: bool) -> str:
        s = self.state
        now = perf_counter()
        rate = (s.output_tokens - self._tokens) / max(now - self._t, 1e-9)
        self._tokens, self._t = s.output_tokens, now
        elapsed = now - s.t0
        tasks = f"tasks {s.tasks_done}" + (f"/{s.tasks_total}" if s.tasks_total else "")
        if s.tasks_failed:
            tasks += f" ({s.tasks_failed} failed)"
        left = ""
        if s.duration_s is not None:
            left = f" · {max(s.duration_s - elapsed, 0):,.0f} s left"
        parts = [f"{elapsed:6.0f}s{left}", tasks, f"requests {s.requests}"]
        if s.errors or s.retries:
            parts.append(f"errors {s.errors} (retries {s.retries})")
        parts.append(f"output {rate:,.0f} tok/s")
        if s.pauses:
            longest = max(max(s.pauses.values()) - now, 0)
            parts.append(f"{plural(len(s.pauses), 'session')} in tool pauses (longest ends in {longest:,.0f} s)")
        return "  " + " · ".join(parts) + (" (draining)" if draining else "")

    def print(self, draining: bool) -> None:
        print(self.line(draining), file=sys.stderr, flush=True)
