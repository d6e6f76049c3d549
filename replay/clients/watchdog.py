"""Two guards on one call's exchange that hold whatever the HTTP library does: the stall watchdog and redirects.

Stall: aiohttp's own read timeout does not fire in every state a host can leave it in. A malformed chunked frame after
the headers, or an informational status (199) that no final response follows, held a call for the whole
``--request-timeout`` (600 s by default; aiohttp's behaviour, reproduced without replay). ``watched`` runs the
exchange as a task of its own and one timer beside it: when no new byte has come for the stall timeout (none since
the request left, the headers came, or the body's last read), the exchange is cancelled and the call ends as a
``timeout``. The timer looks at the stamps the per-read path takes anyway and wakes at most once per stall period, so
the per-read path is unchanged.

Redirects: an API call is never redirected by the HTTP library (``allow_redirects=False``, and every session is
``replay.clients.http_session``'s, which stops the library following one: it strips only ``Authorization`` when it
follows one to another origin, so ``x-api-key`` or any custom auth header would go along). A redirect is an error of
class ``redirect`` naming its target; ``--follow-redirects`` follows it only within the origin (scheme, host and
port) the credentials were given for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from time import perf_counter
from typing import Any
from urllib.parse import urljoin, urlsplit

from replay.errors import ReplayError

REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_HOPS = 5  # redirects followed within one call (--follow-redirects) before it fails as a redirect


class Stalled(ReplayError):
    """No new bytes for the stall timeout."""


class _Watch:
    """The stall timer of one exchange. Its handle and the callback it holds point back here, so ``stop`` drops
    them: the exchange leaves no reference cycle for the collector (a closure that rescheduled itself did)."""

    __slots__ = ("handle", "last_byte", "loop", "stall_s", "stalled", "task")

    def __init__(self, task: asyncio.Future[None], last_byte: Callable[[], float], stall_s: float) -> None:
        self.task: asyncio.Future[None] | None = task
        self.last_byte: Callable[[], float] | None = last_byte
        self.stall_s = stall_s
        self.stalled = False
        self.loop = asyncio.get_running_loop()
        self.handle: asyncio.TimerHandle | None = self.loop.call_later(stall_s, self.check)

    def check(self) -> None:
        if self.task is None or self.last_byte is None:
            return
        quiet = perf_counter() - self.last_byte()
        if quiet >= self.stall_s:
            self.stalled = True
            self.handle = None
            self.task.cancel()
        else:
            self.handle = self.loop.call_later(self.stall_s - quiet, self.check)

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.handle = self.task = self.last_byte = None


async def watched(exchange: Coroutine[Any, Any, None], last_byte: Callable[[], float], stall_s: float) -> None:
    """Await ``exchange``; Stalled when ``last_byte()`` (a ``perf_counter`` stamp) stays older than ``stall_s``."""
    task = asyncio.ensure_future(exchange)
    watch = _Watch(task, last_byte, stall_s)
    try:
        await task
    except asyncio.CancelledError:
        if watch.stalled and not _run_cancelling():  # the watchdog's, not the run's
            raise Stalled(f"no new bytes for {stall_s:g} s (--stall-timeout)") from None
        raise
    finally:
        watch.stop()
        del task, watch  # the task's exception, raised here, holds this frame in its traceback: not the task too


def _run_cancelling() -> bool:
    """Whether the run is cancelling the calling task (apart from the watchdog). A function of its own, so the
    task is never a local of the frame that a cancelled call's traceback holds (the task keeps that traceback: a
    reference cycle)."""
    current = asyncio.current_task()
    return current is not None and current.cancelling() > 0


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1  # a port that is no number: an origin of its own, never the call's
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def redirect_target(url: str, location: str | None) -> str | None:
    """Where a redirect of ``url`` points (``Location`` resolved against it), or None without one."""
    if not location:
        return None
    return urljoin(url, location.strip())


def same_origin(a: str, b: str) -> bool:
    return origin(a) == origin(b)
