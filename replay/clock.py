"""The clock a run's loop, sessions and records read: ``time.perf_counter`` in real time, the virtual loop's time on
the virtual clock, so the same session code runs on either.

``now()`` reads the clock of the current context: a virtual run sets it for itself (``run_virtual``) and every task
it starts inherits it, so a real-time run in another thread or context is never touched. The per-read path of a real
call (``replay.clients.wire_stamps``) reads ``perf_counter`` itself: it stays a timestamp and a byte scan.

The virtual clock is an asyncio event loop whose time jumps: when no callback is ready (every task waits on a timer
or on another task), its time moves at once to the next timer's, so a run takes the CPU its code needs, not the wall
time its pauses and the simulated engine's steps would. A loop where every task waits and no timer is set can never
wake again (nothing outside it runs on the virtual clock): that is an error (``VirtualClockStalled``), not a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
from collections.abc import Callable, Coroutine, Iterator
from contextvars import ContextVar
from time import perf_counter
from typing import Any, TypeVar

from replay.errors import ReplayError

T = TypeVar("T")
_SOURCE: ContextVar[Callable[[], float]] = ContextVar("replay_clock", default=perf_counter)
STALL_S = 5.0  # wall seconds a virtual loop with no timer waits for another thread before it gives up
VIRTUAL_START_S = 1000.0  # where a virtual run's clock starts (a fixed value: a repeated run gives the same figures)


def now() -> float:
    """Seconds on the run's clock (``perf_counter`` unless a virtual clock is being read)."""
    return _SOURCE.get()()


def source() -> Callable[[], float]:
    """The clock ``now()`` reads in this context, to be bound once (a run's sessions stamp each call with it, without
    a context lookup per stamp); it is the current context's at the time of asking."""
    return _SOURCE.get()


@contextlib.contextmanager
def reading(source: Callable[[], float]) -> Iterator[None]:
    """Within, ``now()`` in this context (and the tasks started from it) reads ``source``."""
    token = _SOURCE.set(source)
    try:
        yield
    finally:
        _SOURCE.reset(token)


class VirtualClockStalled(ReplayError, RuntimeError):
    """Every task of a virtual-clock run waits and no timer is set: nothing can ever wake it."""


class _Jumping(selectors.DefaultSelector):
    """The virtual loop's selector: it polls its sockets (signals come in by them) without waiting, and when nothing
    is ready moves the loop's time to its next timer instead of sleeping until then."""

    loop: VirtualClockLoop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # no timer: only another thread (an executor's) could still wake the loop
            ready = super().select(STALL_S)
            if not ready:
                raise VirtualClockStalled(f"virtual clock: every task waits and no timer is set ({STALL_S:g} s)")
            return ready
        loop = self.loop
        timers: list[asyncio.TimerHandle] = getattr(loop, "_scheduled", [])  # asyncio's heap: earliest first
        loop.virtual_now = max(loop.virtual_now, timers[0].when() if timers else loop.virtual_now + timeout)
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on a virtual clock (see the module): ``time()`` is ``virtual_now``, which only its selector
    moves, to the next timer, when nothing is ready."""

    virtual = True  # replay.clients.loop_turns gives it no per-turn budget: its turns take no time

    def __init__(self, start: float = VIRTUAL_START_S) -> None:
        selector = _Jumping()
        selector.loop = self
        self.virtual_now = start
        super().__init__(selector)

    def time(self) -> float:
        return self.virtual_now


def run_virtual(main: Coroutine[Any, Any, T], start: float = VIRTUAL_START_S) -> tuple[T, float]:
    """Run ``main`` on a fresh virtual-clock loop starting at ``start``, with ``now()`` reading that loop's time in
    everything it runs; its result and the clock's time at its end."""
    loop = VirtualClockLoop(start)
    with reading(loop.time), asyncio.Runner(loop_factory=lambda: loop) as runner:
        result = runner.run(main)  # its tasks run in a copy of this context: they read the virtual clock
    return result, loop.virtual_now
