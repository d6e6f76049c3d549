"""``until_stop``: it returns when every worker is done, when a stop is asked for, or at the deadline, and a run's
end costs a step per worker, not one per worker still running each time another ends (counted, not timed)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from replay.clock import now
from replay.loops.stop import RunStop, until_stop

WORKERS = 60


async def _worker(ends: asyncio.Event) -> None:
    await ends.wait()


async def _one_by_one(n: int) -> tuple[list[asyncio.Task[None]], list[asyncio.Event]]:
    """``n`` workers, each ending when its event is set."""
    events = [asyncio.Event() for _ in range(n)]
    return [asyncio.create_task(_worker(e)) for e in events], events


async def _end_in_turn(events: list[asyncio.Event]) -> None:
    for e in events:
        e.set()
        await asyncio.sleep(0)  # one worker ends per turn of the loop: the waiter wakes for each
        await asyncio.sleep(0)


def test_it_returns_when_every_worker_ended_at_a_step_per_worker() -> None:
    added = 0

    def count(_frame: Any, event: str, arg: Any) -> None:
        nonlocal added
        if event == "c_call" and getattr(arg, "__name__", "") == "add_done_callback":
            added += 1

    async def go() -> None:
        workers, events = await _one_by_one(WORKERS)
        ender = asyncio.create_task(_end_in_turn(events))
        sys.setprofile(count)
        try:
            await until_stop(workers, RunStop(60.0), None)
        finally:
            sys.setprofile(None)
        assert all(w.done() for w in workers)
        await ender

    asyncio.run(go())
    # a callback per worker, and the waiter's own two a wake-up; waiting on every running worker at each end made
    # it WORKERS * (WORKERS + 1) / 2 (1,830)
    assert WORKERS <= added <= 4 * WORKERS, added


def test_it_returns_on_a_stop_and_at_the_deadline_with_workers_still_running() -> None:
    async def go() -> None:
        workers, events = await _one_by_one(3)
        asked = RunStop(60.0)
        asyncio.get_running_loop().call_soon(asked.ask, "tasks")
        await until_stop(workers, asked, None)
        assert asked.reason == "tasks" and not any(w.done() for w in workers)
        await until_stop(workers, RunStop(60.0), now() + 0.05)
        assert not any(w.done() for w in workers)
        for e in events:
            e.set()
        await asyncio.gather(*workers)

    asyncio.run(go())
