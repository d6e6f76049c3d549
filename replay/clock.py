"""The clock a run's loop and sessions read: ``time.perf_counter`` in real time, or another source a run sets for
itself (a virtual clock's loop time), so the same session code runs on either.

``now()`` reads the clock of the current context: a virtual run sets it for itself (``reading``) and every task it
starts inherits it, so a real-time run in another thread or context is never touched. The per-read path of a real
call (``replay.clients.wire_stamps``) reads ``perf_counter`` itself: it stays a timestamp and a byte scan.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from time import perf_counter

_SOURCE: ContextVar[Callable[[], float]] = ContextVar("replay_clock", default=perf_counter)


def now() -> float:
    """Seconds on the run's clock (``perf_counter`` unless a virtual clock is being read)."""
    return _SOURCE.get()()


@contextlib.contextmanager
def reading(source: Callable[[], float]) -> Iterator[None]:
    """Within, ``now()`` in this context (and the tasks started from it) reads ``source``."""
    token = _SOURCE.set(source)
    try:
        yield
    finally:
        _SOURCE.reset(token)
