"""The event loop replay runs on: uvloop where it is installed, asyncio's own otherwise.

Both the client and the simulated host spend most of their time in the event loop's socket path (a read,
a parse, a wake-up per stream per token). uvloop does that work in C (libuv): on this project's 64-stream
check it cut the client's CPU and the spread of its timestamps against the host's truth (docs/benchmarks.md).
Set ``REPLAY_EVENT_LOOP=asyncio`` to use the standard loop (to compare, or where uvloop misbehaves).
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> tuple[str, Callable[[], asyncio.AbstractEventLoop] | None]:
    """The loop's name and a factory for it (None: asyncio's default)."""
    if os.environ.get("REPLAY_EVENT_LOOP", "").lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return "uvloop", uvloop.new_event_loop
    return "asyncio", None


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the chosen loop, with what exists before it (the workload's pre-serialised messages,
    modules, tables) frozen out of the cyclic collector: a full collection then walks only what the run made,
    instead of stalling every stream for tens of milliseconds (measured: the simulated host's arrival stamps were
    16 ms late for a burst of 64 first calls until it froze its start-up heap; docs/benchmarks.md)."""
    try:
        _, factory = loop_factory()
        gc.collect()
        gc.freeze()
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(main)
    finally:
        gc.unfreeze()  # a library caller's later garbage is collected as before
        if inspect.getcoroutinestate(main) == inspect.CORO_CREATED:  # Ctrl-C before it started: no "never awaited"
            main.close()
