"""WebSocket messages stamped at the read that completed them (replay.clients.ws_arrivals), not when the receiving
task woke: on a loop busy with other sessions' callbacks the wake-up came 3.8-8.3 ms later at p50 (issue 29)."""

from __future__ import annotations

import asyncio
from collections import deque
from time import perf_counter
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from replay.clients import ws_arrivals
from replay.clients.ws_arrivals import Arrivals, install
from tests.support.servers import serve_route


class _Parser:
    """A parser that queues the messages each read completes (``script``: per read, what it completes)."""

    def __init__(self, buffer: deque[Any], script: list[list[str]]) -> None:
        self.buffer, self.script, self.eof = buffer, script, False

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        for m in self.script.pop(0):
            self.buffer.append((m, len(m)))
        return False, b""

    def feed_eof(self) -> None:
        self.eof = True


def test_each_message_takes_the_time_of_the_read_that_completed_it(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([10.0, 20.0, 30.0])
    monkeypatch.setattr(ws_arrivals, "perf_counter", lambda: next(clock))
    buffer: deque[Any] = deque()
    parser = _Parser(buffer, [["a", "ping"], [], ["b", "c"]])
    arrivals = Arrivals(parser, buffer)
    for chunk in (b"1", b"2", b"3"):  # a read that completes two, one that completes none (a partial frame), two
        assert arrivals.feed_data(chunk) == (False, b"")
    got = [buffer.popleft()[0] for _ in range(4)]
    assert got == ["a", "ping", "b", "c"]
    # "ping" is answered by aiohttp and never reaches the receiving task: its entry goes with the next message's
    assert [arrivals.stamp(m) for m in ("a", "b", "c")] == [10.0, 30.0, 30.0]
    assert not arrivals.pending
    arrivals.feed_eof()
    assert parser.eof and arrivals.script == []  # anything else is the parser's own


def test_a_message_the_wrapper_never_saw_costs_no_later_message_its_stamp(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp resumes a parse stalled by its own back-pressure on the parser itself, not through the wrapper."""
    monkeypatch.setattr(ws_arrivals, "perf_counter", lambda: 5.0)
    buffer: deque[Any] = deque()
    arrivals = Arrivals(_Parser(buffer, [["x", "y"]]), buffer)
    arrivals.feed_data(b"")
    assert arrivals.stamp("unseen") is None
    assert arrivals.stamp("x") == 5.0 and arrivals.stamp("y") == 5.0


def test_the_stamp_is_the_read_even_when_the_receiving_task_wakes_late() -> None:
    """A real socket on aiohttp as installed: its parser is wrapped, and a callback the loop runs between the read
    and the receiving task's wake-up (another session's work, here a 20 ms spin) is not in the message's time."""

    async def main() -> tuple[list[float], list[float], int]:
        async def serve(request: web.Request) -> web.WebSocketResponse:
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            async for _ in ws:
                for i in range(3):
                    await ws.send_str(f"event {i}")
            return ws

        origin, runner = await serve_route("GET", "/ws", serve)
        stamps: list[float] = []
        woke: list[float] = []
        try:
            async with aiohttp.ClientSession() as session, session.ws_connect(f"{origin}/ws") as ws:
                arrivals = install(ws)
                assert arrivals is not None, "aiohttp's internals moved: WebSocket stamps fall back to wake-ups"
                real = arrivals._parser
                loop = asyncio.get_running_loop()

                class Busy:  # before each read is parsed, a callback queued ahead of the task's wake-up
                    def feed_data(self, data: Any) -> Any:
                        loop.call_soon(_spin, 0.02)
                        return real.feed_data(data)

                arrivals._parser = Busy()
                await ws.send_str("go")
                while len(stamps) < 3:
                    msg = await ws.receive()
                    woke.append(perf_counter())
                    t = arrivals.stamp(msg)
                    assert t is not None and msg.type is aiohttp.WSMsgType.TEXT
                    stamps.append(t)
                return stamps, woke, len(arrivals.pending)
        finally:
            await runner.cleanup()

    stamps, woke, left = asyncio.run(main())
    assert left == 0
    assert stamps == sorted(stamps)
    for t, w in zip(stamps, woke, strict=True):
        assert t <= w  # never after the task had it
    assert woke[0] - stamps[0] >= 0.02  # the first message's read came before the 20 ms the loop spent elsewhere


def _spin(seconds: float) -> None:
    end = perf_counter() + seconds
    while perf_counter() < end:
        pass
