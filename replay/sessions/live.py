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
    paused_at: dict[int, float] = field(default_factory=dict)  # session -> when its tool pause began
    left: dict[int, tuple[int, float]] = field(default_factory=dict)  # session -> (turns left, tool seconds left)
    tasks_started: int = 0
    call_s: float = 0.0  # Σ t_done - t_call of finished calls, for the time-left estimate
    task_s: float = 0.0  # Σ wall time of finished tasks

    def request(self, rec: RequestRecord) -> None:
        self.requests += 1
        if rec.t_done is not None and rec.t_call is not None:
            self.call_s += rec.t_done - rec.t_call
        self.errors += rec.error is not None
        self.retries += rec.attempt > 1
        self.output_tokens += rec.output_tokens or rec.output_events

    def task(self, rec: TaskRecord) -> None:
        self.tasks_done += 1
        self.task_s += rec.t_end - rec.t_start
        self.left.pop(rec.session, None)
        self.tasks_failed += rec.status == "failed"

    def turn(self, slot: int, turns_left: int, tool_left_s: float) -> None:
        """Session ``slot`` is at a call with ``turns_left`` calls and ``tool_left_s`` seconds of pauses after it."""
        self.left[slot] = (turns_left, tool_left_s)

    def time_left(self) -> float | None:
        """An estimate of the run's time left, when it stops on a task count: the slowest session's calls left
        (at the mean call time so far) and pauses left, plus the tasks not started yet, at the mean task time."""
        if self.tasks_total is None or not self.requests:
            return None
        per_call = self.call_s / self.requests
        now = perf_counter()

        def session_left(slot: int, n: int, tool: float) -> float:
            if slot in self.pauses:  # in a pause: what is left of it, not its whole length
                tool -= min(now - self.paused_at[slot], self.pauses[slot] - self.paused_at[slot])
            return n * per_call + max(tool, 0.0)

        running = max((session_left(slot, n, tool) for slot, (n, tool) in self.left.items()), default=0.0)
        queued = max(self.tasks_total - self.tasks_started, 0)
        if queued and not self.tasks_done:
            return None  # no task has finished yet: nothing to say how long one takes
        sessions = max(len(self.left), 1)
        return running + (-(-queued // sessions)) * (self.task_s / self.tasks_done if queued else 0.0)

    def pausing(self, slot: int, until: float | None) -> None:
        """Session ``slot`` entered a tool pause ending at ``until`` (None: it left it)."""
        if until is None:
            self.pauses.pop(slot, None)
            self.paused_at.pop(slot, None)
        else:
            self.pauses[slot], self.paused_at[slot] = until, perf_counter()


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
        elif (estimate := s.time_left()) is not None:
            left = f" · about {estimate:,.0f} s left"
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
