"""A request-rate cap shared by every session (``--max-rpm``: a provider's rate limit, enforced by the client).

A sliding window of the last N call starts: a call may start once the oldest of them is a whole period old. The
wait is computed, not polled, and ends at once when the run stops (no call is sent after the stop). The time
waited is the client's doing (throttled time), so the caller records it outside model time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from replay import clock


class RateLimit:
    """At most ``calls`` call starts in any ``period`` seconds."""

    def __init__(self, calls: int, period: float) -> None:
        if calls < 1 or period <= 0:
            raise ValueError(f"rate limit: expected at least 1 call per positive period; got {calls} per {period}")
        self.calls, self.period = calls, period
        self._starts: deque[float] = deque()
        self._lock = asyncio.Lock()  # first come, first served

    async def wait(self, stop: asyncio.Event) -> float | None:
        """Wait for a slot and take it; the moment it was taken (the call's start), or None when the run stopped
        first (no slot taken)."""
        async with self._lock:
            while True:
                if stop.is_set():
                    return None
                now = clock.now()
                while self._starts and now - self._starts[0] >= self.period:
                    self._starts.popleft()
                if len(self._starts) < self.calls:
                    self._starts.append(now)
                    return now
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._starts[0] + self.period - now)
