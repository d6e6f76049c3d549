"""The loop's turn budget: work that asks for a turn is spread so that the loop polls between pieces, and none
is starved; a fake clock stands for the work's duration, so the test counts pieces per turn, not milliseconds."""

from __future__ import annotations

import asyncio
import itertools
import socket

import pytest

from replay.clients import loop_turns
from replay.clients.loop_turns import LoopTurns
from replay.event_loop import loop_factory

LOOPS = ["asyncio", "uvloop"] if loop_factory()[0] == "uvloop" else ["asyncio"]


def run(main, loop: str):  # type: ignore[no-untyped-def]
    """``main()`` on the loop named: asyncio's own, or uvloop (the one ``replay run`` uses)."""
    factory = loop_factory()[1] if loop == "uvloop" else None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main())


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(loop_turns, "perf_counter", fake)
    monkeypatch.setattr(loop_turns, "thread_time", lambda: 0.0)  # the loop's thread idle: never saturated
    monkeypatch.setattr(loop_turns, "BUDGET_S", 0.00025)
    return fake


async def pieces_per_turn(clock: FakeClock, n: int, cost_s: float) -> tuple[list[int], list[int], LoopTurns]:
    """``n`` pieces that each ask for a turn and then "cost" ``cost_s`` of the fake clock, on a loop with time to
    spare at first: the order they ran in, how many ran in each turn of the loop, and the budget they shared."""
    loop = asyncio.get_running_loop()
    turns = LoopTurns(loop)
    turns.share = 0.0  # saturated only by working, not by starting so
    ran: list[int] = []
    per_turn: list[int] = []

    def mark() -> None:  # once per turn of the loop
        per_turn.append(len(ran))
        if len(ran) < n:
            loop.call_soon(mark)

    async def piece(i: int) -> None:
        await turns.turn()
        ran.append(i)
        clock.now += cost_s

    loop.call_soon(mark)
    await asyncio.gather(*(piece(i) for i in range(n)))
    return ran, [b - a for a, b in itertools.pairwise(per_turn)], turns


@pytest.mark.parametrize("loop", LOOPS)
def test_pieces_past_the_budget_wait_for_the_next_turn_and_all_run(clock: FakeClock, loop: str) -> None:
    ran, counts, _ = run(lambda: pieces_per_turn(clock, 40, 0.0001), loop)  # each piece "costs" 0.1 ms
    assert sorted(ran) == list(range(40))  # every piece ran, none twice
    assert max(counts) <= 3  # 0.25 ms of budget: pieces starting at 0, 0.1 and 0.2 ms of a turn
    assert sum(c > 0 for c in counts) >= 40 // 3  # spread over turns, not run in one


@pytest.mark.parametrize("loop", LOOPS)
def test_without_work_to_spread_a_piece_runs_at_once(clock: FakeClock, loop: str) -> None:
    async def main() -> bool:
        turns = LoopTurns(asyncio.get_running_loop())
        turns.share = 0.0  # a loop with time to spare
        assert not turns.spent()  # the first piece of a turn opens its budget
        clock.now += 0.001
        assert turns.spent()  # past it: the rest of this turn's pieces wait
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return turns.spent()  # a new turn: a new budget

    assert run(main, loop) is False


@pytest.mark.parametrize("loop", LOOPS)
def test_a_socket_read_is_served_between_budgeted_pieces(clock: FakeClock, loop: str) -> None:
    """The point of it all: bytes arriving while pieces are queued are read before all of those pieces ran."""

    async def main() -> int:
        loop = asyncio.get_running_loop()
        turns = LoopTurns(loop)
        turns.share = 0.0  # a loop with time to spare
        ran: list[int] = []
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)
        seen_after: list[int] = []
        loop.add_reader(a, lambda: (a.recv(10), seen_after.append(len(ran))))
        try:

            async def piece(i: int) -> None:
                await turns.turn()
                ran.append(i)
                if i == 0:
                    b.send(b"x")  # a token arrives while 59 pieces are still to come
                clock.now += 0.0001

            await asyncio.gather(*(piece(i) for i in range(60)))
        finally:
            loop.remove_reader(a)
            a.close()
            b.close()
        return seen_after[0]

    assert run(main, loop) <= 6  # read within two turns, not after the 60 pieces


@pytest.mark.parametrize("loop", LOOPS)
def test_a_loop_that_stays_busy_takes_longer_turns_and_lets_every_waiter_go(
    clock: FakeClock, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saturated (its thread busy all the time), short turns only cost throughput: the waiters go together."""
    monkeypatch.setattr(loop_turns, "thread_time", lambda: clock.now)  # every second of wall time is CPU

    ran, counts, turns = run(lambda: pieces_per_turn(clock, 200, 0.01), loop)  # 10 ms each: 2 s of a busy thread
    assert sorted(ran) == list(range(200))
    assert turns.budget == loop_turns.SATURATED_BUDGET_S
    assert max(counts) > 3  # once saturated, a turn lets every waiter go


@pytest.mark.parametrize("loop", LOOPS)
def test_the_share_of_the_core_follows_the_loop_threads_cpu(clock: FakeClock, loop: str, monkeypatch) -> None:
    cpu = [0.0]
    monkeypatch.setattr(loop_turns, "thread_time", lambda: cpu[0])

    async def main() -> list[bool]:
        turns = LoopTurns(asyncio.get_running_loop())
        turns.share = 0.0
        seen = []
        for busy in (True,) * 10 + (False,) * 10:
            clock.now += 0.1
            cpu[0] += 0.1 if busy else 0.0
            seen.append(turns._measure(clock.now))
        return seen

    seen = run(main, loop)
    assert seen[:3] == [False, False, False]  # a burst is not saturation: it takes about TAU_S to count
    assert seen[9] is True  # a second of a busy thread is
    assert seen[-1] is False  # and a second of an idle one ends it


@pytest.mark.parametrize("loop", LOOPS)
def test_a_new_loop_spreads_its_first_burst_and_counts_as_saturated_soon_if_it_stays_busy(
    clock: FakeClock, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop_turns, "thread_time", lambda: clock.now)  # every second of wall time is CPU

    async def main() -> tuple[bool, bool]:
        turns = LoopTurns(asyncio.get_running_loop())
        at_start = turns._measure(clock.now)
        clock.now += 0.25
        return at_start, turns._measure(clock.now)

    assert run(main, loop) == (False, True)
