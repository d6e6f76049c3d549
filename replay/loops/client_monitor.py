"""The client measuring itself while a run goes on: event-loop lag and CPU use of this process.

A report uses these samples to say when the client, not the host, was the bottleneck.
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

CLIENT_SAMPLE_S = 5.0
LAG_PROBE_S = 0.05


class ClientMonitor:
    """Event-loop lag and CPU use of this process, sampled while the run goes on."""

    def __init__(self, write: Callable[[dict[str, Any]], None]) -> None:
        self.write = write
        self.lags: list[float] = []

    async def run(self) -> None:
        loop_t = perf_counter()
        cpu0, wall0 = time.process_time(), loop_t
        while True:
            await asyncio.sleep(LAG_PROBE_S)
            now = perf_counter()
            self.lags.append(max(0.0, now - loop_t - LAG_PROBE_S))
            loop_t = now
            if now - wall0 >= CLIENT_SAMPLE_S:
                self.flush(now, cpu0, wall0)
                cpu0, wall0 = time.process_time(), now

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
            }
        )
        self.lags.clear()


def _load1() -> float | None:
    """The machine's 1-minute load average (None where the platform has none)."""
    with contextlib.suppress(OSError, AttributeError):
        return round(os.getloadavg()[0], 2)
    return None
