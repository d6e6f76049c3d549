"""Arrival stamps: when each request's first bytes entered the server, before any handler ran."""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web, web_protocol

ARRIVALS: dict[int, float] = {}  # id(connection protocol) -> when the next request's first bytes came in


def stamp_arrivals() -> None:
    """Stamp each request where its first bytes enter the server (``RequestHandler.data_received``).

    The handler runs only after the loop has parsed this and other connections' bytes; at 64 simultaneous
    requests that is milliseconds late. A connection carries one request at a time (clients do not pipeline),
    so its first ``data_received`` after the previous request's body was read belongs to the next request.
    """
    cls = web_protocol.RequestHandler
    if getattr(cls.data_received, "_replay_arrivals", False):
        return
    original = cls.data_received

    def data_received(self: web_protocol.RequestHandler, data: bytes) -> None:
        ARRIVALS.setdefault(id(self), time.perf_counter())
        original(self, data)

    def connection_lost(self: web_protocol.RequestHandler, exc: BaseException | None) -> None:
        ARRIVALS.pop(id(self), None)
        lost(self, exc)

    lost = cls.connection_lost
    # Patching aiohttp's class on purpose (the module's docstring says why): the typing of a method assignment
    # and a mark on a function cannot be expressed, hence the three ignores.
    data_received._replay_arrivals = True  # type: ignore[attr-defined]
    cls.data_received = data_received  # type: ignore[method-assign]
    cls.connection_lost = connection_lost  # type: ignore[method-assign]


@web.middleware
async def forget_arrival(request: web.Request, handler: Any) -> web.StreamResponse:
    """Whatever a handler did, its request's arrival stamp must not be taken for the next request's."""
    try:
        return await handler(request)
    finally:
        ARRIVALS.pop(id(request.protocol), None)
