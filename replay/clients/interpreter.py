"""Finished streams read a slice at a time, so the event loop never stalls when many streams end together.

Reading a 500-token stream into figures takes a few hundred microseconds of CPU. When 256 streams ended in the same
instant, each call read its own at once, and the event loop was held for a quarter of a second: no other stream's
reads were stamped and no request was sent. Now every finished stream goes into one queue per event
loop, and one task reads them in turn, ``STEP_BYTES`` at a time, while the loop's turn has budget left
(``replay.clients.loop_turns``, shared with the sessions' work at a call's end); between turns the loop stamps
reads, sends requests and runs the sessions as usual. The reading costs the same; it just no longer happens in one
piece. (A worker thread would not do: it needs the interpreter lock, and the loop thread then waits for it after
every poll, which made the client's stamps later, not sooner: measured.)"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Iterator
from typing import Any

from replay.clients.loop_turns import loop_turns
from replay.clients.stream import StreamState

STEP_BYTES = 64 << 10


class StreamInterpreter:
    """The queue of one event loop's finished streams and the task that reads them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.queue: deque[list[Any]] = deque()  # [steps, future, last state]
        self.wake = asyncio.Event()
        self.task = loop.create_task(self._run(), name="replay-stream-interpreter")

    def submit(self, steps: Iterator[StreamState]) -> asyncio.Future[StreamState]:
        future: asyncio.Future[StreamState] = asyncio.get_running_loop().create_future()
        self.queue.append([steps, future, None])
        self.wake.set()
        return future

    async def _run(self) -> None:
        turns = loop_turns()  # this loop's budget per turn, shared with the sessions
        while True:
            if not self.queue:
                self.wake.clear()
                await self.wake.wait()
                continue
            try:
                while self.queue and not turns.spent():
                    self._step(self.queue[0])
            except Exception as exc:  # never dies with calls waiting on it: the call at the head fails, named
                entry = self.queue.popleft()
                if not entry[1].done():
                    entry[1].set_exception(exc)
            await asyncio.sleep(0)  # the loop's turn: reads stamped, requests sent, sessions run

    def _step(self, entry: list[Any]) -> None:
        steps, future, _ = entry
        if future.done():  # its call was cancelled: nobody waits for it
            self.queue.popleft()
            return
        try:
            entry[2] = next(steps)
        except StopIteration:
            self.queue.popleft()
            future.set_result(entry[2])
        except Exception as exc:  # interpret_steps catches the flavours' own; anything else reaches the call
            self.queue.popleft()
            future.set_exception(exc)


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StreamInterpreter] = weakref.WeakKeyDictionary()


def interpreter() -> StreamInterpreter:
    """The running loop's interpreter (made on first use; its task ends with the loop)."""
    loop = asyncio.get_running_loop()
    found = _BY_LOOP.get(loop)
    if found is None or found.task.done():
        found = _BY_LOOP[loop] = StreamInterpreter(loop)
    return found
