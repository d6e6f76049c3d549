"""A budget for the work one turn of the event loop does between two polls, so no read waits long to be stamped.

A read is stamped when the loop polls its socket (``wire_stamps``), and the loop polls only after it has run every
callback that was ready. When 256 streams end together, each end is a few hundred microseconds of work (the
stream read into figures, the record written and summarised, the next call built and sent); run as they came,
they made turns of several milliseconds, and the next calls' first tokens, arriving meanwhile, were stamped that
much late (+2.4 ms TTFT at 256 streams). Work that can wait a turn asks ``turn()`` first: the first such
piece in a turn opens the budget, and once ``BUDGET_S`` has passed, the rest wait, in order, one let go per turn.
The work is the same; a burst of it is only spread over turns, with the loop's poll between them.

A client that stays busy is no burst: it is saturated (more work comes than its core does), its timing suffers
either way, and short turns then cost throughput (measured on this project's 2-core machine: a quarter more CPU
per token with whole answers, every turn's few requests waking the host apart). So while the loop's thread has
used more than ``SATURATED_SHARE`` of its core over the last ``TAU_S`` or so, turns take ``SATURATED_BUDGET_S``,
every waiter goes at once and new pieces do not wait. The report says when the client was saturated (its CPU and
the loop's lag).
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from time import perf_counter, thread_time

BUDGET_S = 0.00025
SATURATED_BUDGET_S = 0.001
SATURATED_SHARE = 0.8
TAU_S = 0.5  # the time over which the loop thread's share of its core is averaged


class LoopTurns:
    """One event loop's budget per turn (see the module's docstring)."""

    __slots__ = ("budget", "cpu", "loop", "opened", "share", "waiting", "wall")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.opened: float | None = None  # when this turn's first budgeted work began
        self.waiting: deque[asyncio.Future[None]] = deque()
        self.budget = BUDGET_S
        # The loop thread's share of its core, averaged over about TAU_S. It starts at 0.7: a run's first burst
        # (every session's first call) is still spread, and a client that stays busy counts as saturated within
        # 0.2 s (from idle it would take 0.8 s, a quarter of a benchmark's window).
        self.share = 0.7
        self.wall, self.cpu = perf_counter(), thread_time()

    def spent(self) -> bool:
        """True once this turn's budget is used: the caller should leave the rest for the next turn."""
        now = perf_counter()
        if self.opened is None:
            self.opened = now
            self.loop.call_soon(self._next_turn)  # runs in the next turn, after its poll
            return False
        return now - self.opened >= self.budget

    def _measure(self, now: float) -> bool:
        """Update the loop thread's share of its core; True while it is saturated."""
        span = now - self.wall
        if span > 0.002:  # (thread_time is a system call, not a vDSO read: at most 500 a second, not one per turn)
            cpu = thread_time()
            weight = min(1.0, span / TAU_S)
            self.share += weight * (min(1.0, (cpu - self.cpu) / span) - self.share)
            self.wall, self.cpu = now, cpu
        return self.share > SATURATED_SHARE

    def _next_turn(self) -> None:
        self.opened = None
        saturated = self._measure(perf_counter())
        self.budget = SATURATED_BUDGET_S if saturated else BUDGET_S
        released = False
        while self.waiting:
            waiter = self.waiting.popleft()
            if not waiter.done():  # (a cancelled caller's)
                waiter.set_result(None)
                released = True
                if not saturated:
                    break
        if released:
            self.spent()  # the released pieces' turn opens the budget; the next waiter's comes after

    async def turn(self) -> None:
        """Return at once while this turn has budget left and nobody waits, or while the loop is saturated (its
        turns are long anyway: waiting would only add a wake-up); otherwise in a later turn, in order."""
        spent = self.spent()  # (also keeps the turns, and so the share of the core, counted while saturated)
        if not self.waiting and (not spent or self.budget == SATURATED_BUDGET_S):
            return
        waiter = self.loop.create_future()
        self.waiting.append(waiter)
        await waiter


class Unbudgeted:
    """A loop whose turns take no time (the virtual clock's): every piece goes at once, in the order it came."""

    __slots__ = ()

    def spent(self) -> bool:
        return False

    async def turn(self) -> None:
        return


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopTurns | Unbudgeted] = weakref.WeakKeyDictionary()


def loop_turns() -> LoopTurns | Unbudgeted:
    """The running loop's budget (made on first use; none on a virtual clock's loop, where a turn takes no time)."""
    loop = asyncio.get_running_loop()
    found = _BY_LOOP.get(loop)
    if found is None:
        found = _BY_LOOP[loop] = Unbudgeted() if getattr(loop, "virtual", False) else LoopTurns(loop)
    return found
