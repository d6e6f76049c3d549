"""The virtual clock (``replay.clock``): time jumps to the next timer when nothing is ready, tasks see it through
``now()``, timers fire in order at their exact times, and a loop that can never wake again says so instead of
hanging."""

from __future__ import annotations

import asyncio
import time

import pytest

from replay import clock
from replay.clock import VIRTUAL_START_S, VirtualClockStalled, run_virtual


def test_an_hour_of_sleeps_takes_no_wall_time_and_keeps_its_order() -> None:
    seen: list[tuple[str, float]] = []

    async def sleeper(name: str, delays: list[float]) -> None:
        for d in delays:
            await asyncio.sleep(d)
            seen.append((name, clock.now() - VIRTUAL_START_S))

    async def main() -> float:
        await asyncio.gather(sleeper("a", [600.0, 1200.0]), sleeper("b", [900.0, 1000.0, 1700.0]))
        return clock.now()

    t0 = time.perf_counter()
    end, at = run_virtual(main())
    assert time.perf_counter() - t0 < 5.0  # an hour of sleeping, in (far) less than a wall second or so
    assert end == at == VIRTUAL_START_S + 3600.0
    assert seen == [("a", 600.0), ("b", 900.0), ("a", 1800.0), ("b", 1900.0), ("b", 3600.0)]


def test_the_clock_is_the_runs_own_and_perf_counter_elsewhere() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        loop.call_at(VIRTUAL_START_S + 5.0, lambda: None)
        await asyncio.sleep(5.0)
        return clock.now() - loop.time()

    assert run_virtual(main())[0] == 0.0
    assert abs(clock.now() - time.perf_counter()) < 1.0  # back to the real clock outside


def test_a_loop_that_can_never_wake_is_an_error_not_a_hang(monkeypatch) -> None:
    monkeypatch.setattr(clock, "STALL_S", 0.05)

    async def main() -> None:
        await asyncio.Event().wait()  # nobody will set it, and no timer is left

    with pytest.raises(VirtualClockStalled, match="no timer"):
        run_virtual(main())
