"""The client measuring itself while a run goes on: event-loop lag, CPU use and garbage collections of this process,
and its pauses (collections and loop stalls over 5 ms: ``replay.loops.gc_watch``) that a call's timing overlapped.

A report uses these samples to say when the client, not the host, was the bottleneck, and how many calls' timings
include a pause of the client's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from time import perf_counter
from typing import Any

from replay.histogram import US, percentile
from replay.loops.gc_watch import PAUSE_S, CollectorPolicy, GcWatch, PauseLog

CLIENT_SAMPLE_S = 5.0
LAG_PROBE_S = 0.05


class ClientMonitor:
    """Event-loop lag, CPU use and collections of this process, sampled while the run goes on (the last, shorter
    sample when it ends); the pauses a call's timing overlapped (``pause_ms``)."""

    def __init__(self, write: Callable[[dict[str, Any]], None]) -> None:
        self.write = write
        self.lags: list[float] = []
        self.pauses = PauseLog()
        self.gc = GcWatch(self.pauses)
        self.due = float("inf")  # when the probe is next due to wake
        self.policy = CollectorPolicy()

    def sessions_started(self) -> None:
        """Every session has started: the collector's turn before the first call (``CollectorPolicy``)."""
        self.policy.sessions_started()

    async def run(self) -> None:
        loop_t = perf_counter()
        cpu0, wall0 = time.process_time(), loop_t
        with self.gc, self.policy:
            try:
                while True:
                    self.due = loop_t + LAG_PROBE_S
                    await asyncio.sleep(LAG_PROBE_S)
                    now = perf_counter()
                    lag = max(0.0, now - self.due)
                    self.lags.append(lag)
                    self.pauses.add(self.due, now)  # a stall (kept when over PAUSE_S)
                    self.policy.idle(lag)
                    loop_t = perf_counter()
                    if now - wall0 >= CLIENT_SAMPLE_S:
                        self.flush(now, cpu0, wall0)
                        cpu0, wall0 = time.process_time(), now
            finally:  # the run ended: the last sample covers the rest (the run's collections in all)
                self.due = float("inf")
                now = perf_counter()
                if now > wall0:
                    self.flush(now, cpu0, wall0)

    def pause_ms(self, t0: float, t1: float) -> float | None:
        """Milliseconds of [t0, t1] the client spent paused (collections, loop stalls, a stall still going on: the
        probe overdue); None when no pause over PAUSE_S overlapped it."""
        now = perf_counter()
        if now - self.due > PAUSE_S:
            self.pauses.add(self.due, now)
        paused = self.pauses.overlap(t0, t1)
        return round(1000 * paused, 3) if paused > 0 else None

    def flush(self, now: float, cpu0: float, wall0: float) -> None:
        lag_p99 = percentile(self.lags, 99, US) or 0.0
        lag_max = max(self.lags, default=0.0)
        self.write(
            {
                "t": now,
                "wall_s": now - wall0,
                "cpu_s": time.process_time() - cpu0,
                "lag_p99_ms": 1000 * lag_p99,
                "lag_max_ms": 1000 * lag_max,
                "load1": _load1(),  # the machine's: whether others had the cores when the loop lagged
                "cores": os.cpu_count(),
                **self.gc.take(),
            }
        )
        self.lags.clear()


def _load1() -> float | None:
    """The machine's 1-minute load average (None where the platform has none)."""
    with contextlib.suppress(OSError, AttributeError):
        return round(os.getloadavg()[0], 2)
    return None
