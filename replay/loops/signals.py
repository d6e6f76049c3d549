"""Signals as a user means them: the first SIGINT, SIGTERM or SIGHUP stops the run gracefully (no new calls, a grace
for the calls in flight, the footer written with the reason); a second one cuts the calls still in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


@contextlib.contextmanager
def graceful_signals(first: Callable[[str], None], second: Callable[[], None]) -> Iterator[None]:
    """While inside, the first signal calls ``first(name)``, any later one ``second()`` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    seen = 0

    def handle(name: str) -> None:
        nonlocal seen
        seen += 1
        if seen == 1:
            first(name)
        else:
            second()

    installed = []
    for sig in SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            before = signal.getsignal(sig)
            loop.add_signal_handler(sig, handle, sig.name)
            installed.append((sig, before))
    try:
        yield
    finally:
        for sig, before in installed:
            loop.remove_signal_handler(sig)
            with contextlib.suppress(TypeError, ValueError, OSError):  # the handler the run had before, not the default
                signal.signal(sig, before if before is not None else signal.SIG_DFL)
