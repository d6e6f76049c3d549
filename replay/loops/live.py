"""What a running run is doing right now, for the progress line (and any live view): cheap counters and each
session's phase, updated as records arrive and pauses begin, never per token.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from dataclasses import dataclass, field

from replay import clock
from replay.histogram import TPS_SCALE, US, percentile
from replay.metrics.recipes.recipe_tally import decode_tps
from replay.records.run_file import RequestRecord, TaskRecord
from replay.workload.words import plural

RECENT_S = 30.0  # "the last window" of the live view
PROGRESS_S = 5.0
FIRST_PROGRESS_S = 2.0  # a newcomer sees live figures at once


@dataclass(slots=True)
class LiveState:
    """Counters and phases of one run."""

    t0: float = field(default_factory=clock.now)
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
    in_flight: int = 0
    errors_by_class: dict[str, int] = field(default_factory=dict)
    input_tokens: list[int] = field(default_factory=lambda: [0, 0])  # cached, new
    recent: deque[tuple[float, float | None, float | None]] = field(default_factory=deque)  # (t, ttft, decode)

    def request(self, rec: RequestRecord) -> None:
        self.requests += 1
        if rec.error:
            self.errors_by_class[rec.error] = self.errors_by_class.get(rec.error, 0) + 1
        if rec.prompt_tokens is not None:
            self.input_tokens[0] += rec.cached_tokens or 0
            self.input_tokens[1] += rec.prompt_tokens - (rec.cached_tokens or 0)
        if rec.error is None and rec.t_done is not None:
            ttft = rec.t_first_token - rec.t_sent if rec.t_first_token is not None else None
            self.recent.append((rec.t_done, ttft, decode_tps(rec)))
            while self.recent and self.recent[0][0] < rec.t_done - RECENT_S:
                self.recent.popleft()
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
        now = clock.now()

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

    def calling(self, delta: int) -> None:
        self.in_flight += delta

    def recent_figures(self) -> tuple[float | None, float | None]:
        """TTFT p50 and per-user decode p25 of the calls that finished in the last RECENT_S seconds."""
        ttfts = [x for _, x, _ in self.recent if x is not None]
        speeds = [x for _, _, x in self.recent if x is not None]
        return percentile(ttfts, 50, US), percentile(speeds, 25, TPS_SCALE)

    def pausing(self, slot: int, until: float | None) -> None:
        """Session ``slot`` entered a tool pause ending at ``until`` (None: it left it)."""
        if until is None:
            self.pauses.pop(slot, None)
            self.paused_at.pop(slot, None)
        else:
            self.pauses[slot], self.paused_at[slot] = until, clock.now()


class ProgressLine:
    """A line every few seconds on stderr: done of total, time left, rates, sessions in tool pauses."""

    def __init__(self, state: LiveState) -> None:
        self.state = state
        self._tokens, self._t = 0, state.t0

    def line(self, draining: bool) -> str:
        s = self.state
        now = clock.now()
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


class RichView:
    """The live view on a terminal: one table redrawn in place (rich), with what a soak's watcher asks."""

    def __init__(self, state: LiveState) -> None:
        from rich.console import Console
        from rich.live import Live

        self.state = state
        self._tokens, self._inputs, self._t = 0, [0, 0], state.t0
        self.live = Live(console=Console(stderr=True), auto_refresh=False, transient=False)
        self.live.start()

    def print(self, draining: bool) -> None:
        from rich.table import Table

        s, now = self.state, clock.now()
        dt = max(now - self._t, 1e-9)
        out_rate = (s.output_tokens - self._tokens) / dt
        cached_rate, new_rate = ((s.input_tokens[i] - self._inputs[i]) / dt for i in (0, 1))
        self._tokens, self._inputs, self._t = s.output_tokens, list(s.input_tokens), now
        ttft, decode = s.recent_figures()
        elapsed = now - s.t0
        left = max(s.duration_s - elapsed, 0.0) if s.duration_s is not None else s.time_left()
        table = Table(show_header=False, box=None, padding=(0, 2))
        table.add_row("elapsed", f"{elapsed:,.0f} s" + (f"   left {left:,.0f} s" if left is not None else "")
                      + ("   (draining)" if draining else ""))  # fmt: skip
        table.add_row("tasks", f"{s.tasks_done}" + (f" / {s.tasks_total}" if s.tasks_total else "")
                      + (f"   failed {s.tasks_failed}" if s.tasks_failed else ""))  # fmt: skip
        table.add_row(
            "calls", f"{s.requests:,} done   {s.in_flight} in flight   {len(s.pauses)} sessions in tool pauses"
        )
        table.add_row(
            "tokens/s", f"output {out_rate:,.0f}   cached input {cached_rate:,.0f}   new input {new_rate:,.0f}"
        )
        table.add_row(f"last {RECENT_S:.0f} s", f"TTFT p50 {_ms(ttft)}   per-user decode p25 "
                      + (f"{decode:,.1f} tok/s" if decode is not None else "-"))  # fmt: skip
        errors = ", ".join(f"{k} {v}" for k, v in sorted(s.errors_by_class.items())) or "none"
        table.add_row("errors", f"{errors}   retries {s.retries}")
        self.live.update(table, refresh=True)

    def stop(self) -> None:
        self.live.stop()


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:,.1f} ms" if v < 1 else f"{v:,.2f} s"


def progress_view(state: LiveState) -> ProgressLine | RichView:
    """A live table on a terminal; a line every few seconds otherwise (CI logs)."""
    return RichView(state) if sys.stderr.isatty() else ProgressLine(state)


async def print_progress(state: LiveState, stop: asyncio.Event) -> None:
    """The live view until cancelled: every second on a terminal, every few seconds otherwise."""
    view = progress_view(state)
    every = 1.0 if isinstance(view, RichView) else PROGRESS_S
    try:
        await asyncio.sleep(min(FIRST_PROGRESS_S, every))
        while True:
            view.print(stop.is_set())
            await asyncio.sleep(every)
    finally:
        if isinstance(view, RichView):
            view.print(stop.is_set())
            view.stop()
