"""How a run stops, whatever asks: the duration, the task count, a signal, a failure with ``--on-error abort``, a
check that says so (``--abort-on-fail``), or the parent of a sharded run. Then no new call starts, tool pauses and
waits end at once, the calls in flight get a grace (the drain, outside the window), and what still runs after it is
cancelled. One path for every loop (``replay.loops.skeleton``) and for the parent of a sharded run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from replay.clock import now

CHECK_S = 5.0
SIGNAL_GRACE_S = 10.0  # after a signal, in-flight calls get at most this long (and at most the drain timeout)


class RunStop:
    """The one place a run's stop is asked for, whoever asks: a reason, a grace for calls in flight, a wake-up."""

    def __init__(self, drain_timeout_s: float) -> None:
        self.requested = asyncio.Event()
        self.reason: str | None = None
        self.grace = drain_timeout_s
        self.cut = False  # a second signal: cancel what is in flight now
        self.signal: str | None = None

    def ask(self, reason: str, grace: float | None = None) -> None:
        if self.reason is None:
            self.reason = reason
            if grace is not None:
                self.grace = min(self.grace, grace)
        self.requested.set()

    def on_signal(self, name: str) -> None:
        self.signal = name
        self.reason = None  # a signal says more than a softer reason already noted ("tasks")
        self.ask(f"interrupted ({name})", SIGNAL_GRACE_S)

    def on_second_signal(self) -> None:
        self.cut = True
        self.grace = 0.0
        self.requested.set()


async def until_stop(workers: list[asyncio.Task[None]], asked: RunStop, deadline: float | None) -> None:
    """Return when every worker is done, the deadline passes, or a stop is asked for. Each worker's end is counted by
    a callback of its own, once: waiting again on every worker still running whenever one ended cost a run's end
    O(sessions²) (65,000 steps for 256 sessions, 3 % of a run's client CPU with one call per task)."""
    pending = [w for w in workers if not w.done()]
    if not pending:
        return
    left = len(pending)
    every = asyncio.get_running_loop().create_future()

    def ended(_task: asyncio.Task[None]) -> None:
        nonlocal left
        left -= 1
        if not left and not every.done():
            every.set_result(None)

    for w in pending:
        w.add_done_callback(ended)
    try:
        while not every.done() and not asked.requested.is_set():
            timeout = None if deadline is None else deadline - now()
            if timeout is not None and timeout <= 0:
                return
            wake = asyncio.create_task(asked.requested.wait())
            try:
                await asyncio.wait([every, wake], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                wake.cancel()
    finally:
        for w in pending:
            w.remove_done_callback(ended)
        every.cancel()


async def drain(workers: Iterable[asyncio.Task[None]], asked: RunStop) -> None:
    """Calls in flight finish within the grace (a second signal ends it at once); the rest is cancelled."""
    pending = {w for w in workers if not w.done()}
    end = now() + asked.grace
    while pending and not asked.cut:
        left = end - now()
        if left <= 0:
            break
        asked.requested.clear()
        wake = asyncio.create_task(asked.requested.wait())
        await asyncio.wait([*pending, wake], timeout=left, return_when=asyncio.FIRST_COMPLETED)
        wake.cancel()
        pending = {w for w in pending if not w.done()}
        end = min(end, now() + asked.grace)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    if pending:
        asked.reason = f"{asked.reason}+drain_timeout({len(pending)} sessions cancelled)"


async def run_checks(check: Callable[[], str | None], asked: RunStop) -> None:
    """``check`` every few seconds; a reason it returns stops the run (thresholds with --abort-on-fail)."""
    while True:
        await asyncio.sleep(CHECK_S)
        reason = check()
        if reason:
            asked.ask(reason)
            return
