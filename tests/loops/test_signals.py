"""graceful_signals: a signal that arrives inside the block is answered, even at its very end; after it, the
process's own handler has it again."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading

import pytest

from replay.loops.signals import graceful_signals


def _inside(send: int, then_await: bool) -> tuple[list[str], int]:
    firsts: list[str] = []
    seconds = 0

    def second() -> None:
        nonlocal seconds
        seconds += 1

    async def body() -> None:
        with graceful_signals(firsts.append, second):
            if then_await:
                await asyncio.sleep(0)
            for _ in range(send):  # the block's last statement: nothing awaited after it
                os.kill(os.getpid(), signal.SIGTERM)

    asyncio.run(body())
    return firsts, seconds


@pytest.mark.parametrize("then_await", [False, True])
def test_a_signal_as_the_block_ends_is_answered(then_await: bool) -> None:
    # asyncio's add_signal_handler dropped it: its byte was still unread on the self-pipe when the handler went
    assert _inside(1, then_await) == (["SIGTERM"], 0)


def test_later_signals_are_the_second_kind() -> None:
    assert _inside(3, False) == (["SIGTERM"], 2)


def test_after_the_block_the_handler_before_is_back() -> None:
    got: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda n, _f: got.append(n))
    interrupt = signal.getsignal(signal.SIGINT)  # (ignored where the tests run as a background job)
    try:
        _inside(1, False)
        os.kill(os.getpid(), signal.SIGTERM)
        assert got == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGINT) is interrupt
    finally:
        signal.signal(signal.SIGTERM, before)


def _loops() -> list[object]:
    factories: list[object] = [asyncio.new_event_loop]
    try:
        import uvloop
    except ImportError:
        return factories
    return [*factories, uvloop.new_event_loop]


@pytest.mark.parametrize("factory", _loops())
def test_a_signal_to_an_idle_loop_wakes_it(factory: object) -> None:
    """Python runs the handler between two bytecodes: a loop asleep in its poll (uvloop's, in C, too) is woken."""
    firsts: list[str] = []

    async def body() -> None:
        woken = asyncio.Event()
        with graceful_signals(lambda name: (firsts.append(name), woken.set()), lambda: None):
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
            await asyncio.wait_for(woken.wait(), 30)  # fails (TimeoutError) only if the signal is never answered

    with asyncio.Runner(loop_factory=factory) as runner:  # type: ignore[arg-type]
        runner.run(body())
    assert firsts == ["SIGTERM"]


def test_a_command_started_with_ctrl_c_ignored_takes_it_again() -> None:
    """A script's background job starts with SIGINT ignored: replay takes it again for the whole command, not only
    inside each run (a probe interrupted between two passes went on to its end, exit 0)."""
    code = (
        "import signal, sys; from replay.cli import interruptible; interruptible(); "
        "sys.exit(0 if signal.getsignal(signal.SIGINT) is signal.default_int_handler else 1)"
    )
    ignore = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)  # noqa: E731
    ignored = subprocess.run([sys.executable, "-c", code], preexec_fn=ignore, timeout=60)
    assert ignored.returncode == 0
