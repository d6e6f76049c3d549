"""Responses' WebSocket mode on the simulated host: ``GET /v1/responses`` upgraded, one ``response.create`` JSON
message per turn, the answer's events as JSON text messages (docs/simulated-host.md, "The Responses API").

Each turn goes the way an HTTP request does (``pipeline.serve_request``: parse, route, fault, engine, truth log),
with the message as its body and the events sent as messages instead of SSE. Turns on one socket are sequential
(one response in flight per connection, as the guide first described it). The connection keeps its last response
(connection-local state, so ``previous_response_id`` works with ``store: false``; a stored response is found too).
A refusal is an ``error`` event (``{"type": "error", "status": S, "error": {...}}``: the status beside the HTTP
error body's object; the exact shape of OpenAI's is unverified). A turn that arrives after ``ws_limit_s`` is refused
with ``websocket_connection_limit_reached`` and the socket is closed. The truth log's request id is the turn's
``metadata.replay_request_id`` when it carries one.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import WSMsgType, web

from replay.sim.server.arrivals import ARRIVALS
from replay.sim.server.response_store import ResponseStore

WS_LIMIT_S = 3600.0  # OpenAI: one connection lasts at most 60 minutes
_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
_CREATE = b'"type":"response.create"'
_REQUEST_ID = re.compile(rb'"replay_request_id":"([A-Za-z0-9_.:-]{1,200})"')


class WsOut:
    """Where a turn's answer goes: what ``answer.stream`` writes to an HTTP response, sent as messages (each SSE
    event's ``data`` as one text message; its ``event:`` line dropped, as the type is in the data)."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws
        self.headers: dict[str, str] = {}
        self.prepared = True

    async def prepare(self, request: web.Request) -> None:
        return None

    async def write(self, data: bytes) -> None:
        for event in data.split(b"\n\n"):
            at = event.find(b"data: ")
            if at >= 0:
                await self.ws.send_frame(event[at + 6 :], WSMsgType.TEXT)

    async def write_eof(self) -> None:
        return None


@dataclass(slots=True)
class WsTurn:
    """One ``response.create`` of a socket."""

    message: bytes
    request_id: str | None
    out: WsOut
    local: ResponseStore = field(default_factory=ResponseStore)


def error_event(status: int, body: bytes) -> bytes:
    """An ``error`` event from an HTTP error answer's status and body."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = {"message": body.decode("utf-8", "replace")}
    inner = obj.get("error") if isinstance(obj, dict) and isinstance(obj.get("error"), dict) else obj
    return orjson.dumps({"type": "error", "status": status, "error": inner})


def _limit_event() -> bytes:
    error = {"type": "invalid_request_error", "code": "websocket_connection_limit_reached",
             "message": "This WebSocket connection reached its time limit; open a new one."}  # fmt: skip
    return orjson.dumps({"type": "error", "status": 400, "error": error})


Serve = Callable[[web.Request, str, WsTurn], Awaitable[web.StreamResponse]]


def websocket_handler(serve: Serve, limit_s: float) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The ``GET /v1/responses`` handler: upgrade, then one turn per ``response.create`` message."""

    async def handle(request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(max_msg_size=_MAX_MESSAGE_BYTES, compress=False)
        if not ws.can_prepare(request).ok:
            return web.json_response({"error": {"message": "GET /v1/responses is the WebSocket mode's upgrade"}},
                                     status=400)  # fmt: skip
        await ws.prepare(request)
        ARRIVALS.pop(id(request.protocol), None)  # the upgrade's: a turn arrives with its message's first bytes
        opened = time.perf_counter()
        local = ResponseStore()
        out = WsOut(ws)
        async for msg in ws:
            if msg.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                break
            data = msg.data if isinstance(msg.data, bytes) else msg.data.encode()
            if time.perf_counter() - opened >= limit_s:
                await ws.send_frame(_limit_event(), WSMsgType.TEXT)
                break
            if _CREATE not in data[:200]:
                refusal = orjson.dumps({"message": "expected a response.create message", "type": "invalid_request"})
                await ws.send_frame(error_event(400, b'{"error":' + refusal + b"}"), WSMsgType.TEXT)
                continue
            found = _REQUEST_ID.search(data, 0, 4096)
            turn = WsTurn(data, found.group(1).decode() if found else None, out, local)
            answer: Any = await serve(request, "responses", turn)
            if isinstance(answer, web.Response) and answer.status != 200:  # refused: an error event instead
                body = answer.body if isinstance(answer.body, bytes | bytearray) else b""
                await ws.send_frame(error_event(answer.status, bytes(body)), WSMsgType.TEXT)
            if ws.closed or request.transport is None or request.transport.is_closing():
                break  # (a ``drop`` fault closed the connection)
        await ws.close()
        return ws

    return handle
