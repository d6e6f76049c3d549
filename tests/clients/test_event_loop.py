"""The event loop replay runs on: uvloop where installed, asyncio's own when asked."""

from __future__ import annotations

import asyncio

import pytest

from replay import event_loop


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_uvloop_by_default_where_installed(monkeypatch) -> None:
    pytest.importorskip("uvloop")
    monkeypatch.delenv("REPLAY_EVENT_LOOP", raising=False)
    assert event_loop.loop_factory()[0] == "uvloop"
    assert event_loop.run(_loop_module()).startswith("uvloop")


def test_asyncio_loop_when_asked(monkeypatch) -> None:
    monkeypatch.setenv("REPLAY_EVENT_LOOP", "asyncio")
    assert event_loop.loop_factory() == ("asyncio", None)
    assert event_loop.run(_loop_module()).startswith("asyncio")


def test_a_coroutine_interrupted_before_it_started_is_closed_without_a_warning(monkeypatch) -> None:
    """Ctrl-C between a probe's passes can land after a pass's coroutine is made and before the loop runs it: the
    user saw "RuntimeWarning: coroutine 'run_loop' was never awaited" under "interrupted"."""
    import gc as gc_module
    import inspect

    from replay import event_loop

    async def never() -> None:
        raise AssertionError("not run")

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(gc_module, "collect", interrupted)
    coro = never()
    try:
        event_loop.run(coro)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the interrupt was swallowed")
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED
