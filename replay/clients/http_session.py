"""The one way replay opens HTTP to a host: every request it makes (the run's calls and their warm-ups, the WebSocket
upgrades, model discovery, ``--scrape-metrics``, the probe's reads of what a host states) goes through a session made
here, whatever carries a credential and whatever does not.

A session made here never lets the HTTP library follow a redirect. aiohttp strips only ``Authorization`` (and
cookies) when it follows one to another origin, so ``x-api-key`` or any custom auth header would go along; and a
WebSocket upgrade has no ``allow_redirects`` at all. Each session carries a trace that stops the library the moment it
is about to follow one (``RedirectNotFollowed``, an ``aiohttp.ClientError`` naming the status and the target), so no
call site can forget: a request's headers never reach a second origin. Where a redirect is worth following (the run's
calls, ``--follow-redirects``), the caller follows it itself, within the origin (``replay.clients.watchdog``).
"""

from __future__ import annotations

from ssl import SSLContext
from types import SimpleNamespace
from typing import Any

import aiohttp

from replay.clients.watchdog import redirect_target
from replay.errors import ReplayError

TIMEOUT_S = 5.0  # a read of what a host states about itself (its /metrics, /models, /props)


class RedirectNotFollowed(ReplayError, aiohttp.ClientError):
    """The host answered with a redirect that the HTTP library was about to follow; it was not."""

    def __init__(self, status: int, target: str | None) -> None:
        super().__init__(f"redirected ({status} to {target or 'no Location'}): not followed")
        self.status, self.target = status, target


async def _refuse(session: aiohttp.ClientSession, ctx: SimpleNamespace, params: aiohttp.TraceRequestRedirectParams
                  ) -> None:  # fmt: skip
    resp = params.response
    raise RedirectNotFollowed(resp.status, redirect_target(str(params.url), resp.headers.get("Location")))


def no_redirects(trace: aiohttp.TraceConfig | None = None) -> aiohttp.TraceConfig:
    """``trace`` (or a new one), made to stop every redirect the library would follow (``RedirectNotFollowed``)."""
    trace = trace or aiohttp.TraceConfig()
    trace.on_request_redirect.append(_refuse)
    return trace


def session(
    connector: aiohttp.BaseConnector | None = None,
    ssl: SSLContext | bool = True,
    trace: aiohttp.TraceConfig | None = None,
    **kwargs: Any,
) -> aiohttp.ClientSession:
    """An aiohttp session that never follows a redirect (``connector``: the caller's; otherwise one with ``ssl``, the
    run's TLS setting, ``replay.clients.tls``). ``trace``: the caller's own trace, which the guard joins (one trace a
    session: aiohttp calls each one for every piece of a body sent). ``kwargs`` go to ``aiohttp.ClientSession``."""
    return aiohttp.ClientSession(
        connector=connector or aiohttp.TCPConnector(ssl=ssl), trace_configs=[no_redirects(trace)], **kwargs
    )


async def read(url: str, headers: dict[str, str], ssl: SSLContext | bool = True, limit: int = 4 << 20) -> bytes | None:
    """The body of a GET of ``url`` (up to ``limit`` bytes) when it answers 200; None for anything else (an error, a
    redirect, a host that is not there): a best-effort read of what a host states about itself."""
    try:
        async with (
            session(ssl=ssl, timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as http,
            http.get(url, headers=headers, allow_redirects=False) as resp,
        ):
            if resp.status != 200:
                return None
            parts: list[bytes] = []
            size = 0
            while size < limit and (data := await resp.content.read(limit - size)):
                parts.append(data)
                size += len(data)
            return b"".join(parts)
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
        return None
