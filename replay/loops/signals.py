"""Signals as a user means them: the first SIGINT, SIGTERM or SIGHUP stops the run gracefully (no new calls, a grace
for the calls in flight, the footer written with the reason); a second one cuts the calls still in flight.

A signal is noted the moment Python runs its handler (in the main thread, between two bytecodes) and handed to the
loop from there. asyncio's own ``add_signal_handler`` is not used: it hands the signal over through a byte on its
self-pipe, and a signal whose byte was still unread when the block ended (a run that finished at that instant) was
dropped: the run's footer said nothing of it, and the command went on as if it had never come.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


@contextlib.contextmanager
def graceful_signals(first: Callable[[str], None], second: Callable[[], None]) -> Iterator[None]:
    """While inside, the first signal calls ``first(name)``, any later one ``second()`` (main thread only). A signal
    that arrives inside is always answered, at the latest when the block ends; one after it goes to the handler the
    process had before. One the handler before had noted and not yet handed on (``take()``: the run's
    ``replay.runner.preflight.SignalNote``) is answered as the block starts."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    pending: list[str] = []
    seen = 0

    def answer() -> None:  # in the loop, never inside the signal handler: first() and second() touch the loop's state
        nonlocal seen
        while pending:
            name = pending.pop(0)
            seen += 1
            if seen == 1:
                first(name)
            else:
                second()

    def note(signum: int, _frame: Any) -> None:
        pending.append(signal.Signals(signum).name)
        with contextlib.suppress(RuntimeError):  # the loop is closing: the block's end answers it
            loop.call_soon_threadsafe(answer)

    installed = []
    for sig in SIGNALS:
        with contextlib.suppress(TypeError, ValueError, OSError):
            installed.append((sig, signal.signal(sig, note)))
    for _, before in installed:  # noted before the block (the run's SignalNote: while the host started): answered now
        if callable(take := getattr(before, "take", None)):
            pending.extend(take())
    if pending:
        loop.call_soon(answer)
    try:
        yield
    finally:
        for sig, before in installed:
            with contextlib.suppress(TypeError, ValueError, OSError):  # the handler the run had before, not the default
                signal.signal(sig, before if before is not None else signal.SIG_DFL)
        answer()  # one noted but not yet answered (its call_soon still queued) is answered now, before the footer
