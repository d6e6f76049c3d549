"""OpenAI's Responses API over a WebSocket (``--transport websocket``): one socket per session, one
``response.create`` message per turn, the answer's events as JSON messages (docs/providers.md).

A socket is the session's: a lane takes back the socket its last turn used (its connection-local state holds that
turn's response, so the next turn sends only the new items with ``previous_response_id``); a call running beside
it (a subagent) opens one of its own. A socket the host closed (its 60-minute limit,
``websocket_connection_limit_reached``, or a drop) is replaced by a new one when the lane next needs it: the call
that opens it carries ``reconnect`` (why) and its ``connect_s`` (TCP, TLS and the upgrade), outside TTFT as for
HTTP. The per-message work is a timestamp taken at the socket's read (``ws_arrivals``), an append and a byte scan
for the events that end a turn; the messages are framed as SSE only once the turn ended, for the flavour's reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import aiohttp
import orjson

from replay.clients import tls
from replay.clients.errors import drop_frames
from replay.clients.host import HostConfig
from replay.clients.http_session import RedirectNotFollowed
from replay.clients.usage import excerpt
from replay.clients.watchdog import Stalled, watched
from replay.clients.ws_arrivals import Arrivals, install
from replay.errors import ReplayError
from replay.records.run_file import RequestRecord

LIMIT_CODE = "websocket_connection_limit_reached"
NOT_FOUND_CODE = "previous_response_not_found"
_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed", "response.done", "error"})
# An error event without a status: the HTTP status its code stands for, so it is classified (and retried) like one.
_CODE_STATUS = {"rate_limit_exceeded": 429, "insufficient_quota": 429, "server_error": 500, "server_is_overloaded": 503,
                NOT_FOUND_CODE: 400, "context_length_exceeded": 400, "invalid_request_error": 400}  # fmt: skip
_DECODE_TEXT = "decode_text" in inspect.signature(aiohttp.ClientSession.ws_connect).parameters  # aiohttp >= 3.13


@dataclass(slots=True)
class Socket:
    """One WebSocket of a lane, and the response its connection-local state holds."""

    ws: aiohttp.ClientWebSocketResponse
    last_id: str | None = None  # the response of the last turn that ended well on it
    arrivals: Arrivals | None = None  # when each message's read came (replay.clients.ws_arrivals)


@dataclass(slots=True)
class Turn:
    """How one turn on a socket ended: ``end`` is the type of the event that ended it (None: the socket closed
    first), ``code``/``status`` an error event's, ``closed`` why the socket closed, if it did."""

    messages: list[bytes]
    times: list[float]
    end: str | None = None
    code: str | None = None
    status: int | None = None
    closed: str | None = None
    response_id: str | None = None  # the terminal event's response (what the socket's connection-local state holds)


def ws_url(base_url: str) -> str:
    """``wss://HOST/v1/responses`` from ``https://HOST/v1`` (``ws://`` from ``http://``), as the SDK derives it."""
    root = base_url.rstrip("/") + "/responses"
    return "ws" + root[4:] if root.startswith("http") else root


def frame(body: bytes, request_id: str, with_metadata: bool) -> bytes:
    """The ``response.create`` message of a rendered Responses body (``{"model": ...}``), with the call's id in
    ``metadata`` (the simulated host's truth log keys on it; a run's own ``metadata`` in --extra-body wins)."""
    meta = b'"metadata":{"replay_request_id":' + orjson.dumps(request_id) + b"}," if with_metadata else b""
    return b'{"type":"response.create",' + meta + body[1:]


def _event_type(data: bytes) -> tuple[str | None, Any]:
    """The type of an event that is not a delta, and the event (deltas: (None, None), from a byte scan)."""
    if b'.delta"' in data[:80]:
        return None, None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None, None
    kind = obj.get("type") if isinstance(obj, dict) else None
    return (kind if isinstance(kind, str) else None), obj


def _error_of(obj: Any) -> tuple[str | None, int | None]:
    """An error event's code and status (the status its code stands for when it carries none)."""
    err = obj.get("error") if isinstance(obj.get("error"), dict) else obj
    code = err.get("code") or err.get("type")
    code = code if isinstance(code, str) else None
    status = obj.get("status")
    if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
        status = _CODE_STATUS.get(code or "")
    return code, status


class Sockets:
    """The run's WebSockets, by lane; made by the Transport, which closes them."""

    def __init__(self, host: HostConfig, pools: Any) -> None:
        self.host = host
        self._pool = pools  # lane -> the aiohttp session its connections come from
        self.idle: dict[int, list[Socket]] = {}
        self.spare: list[Socket] = []  # opened before the run (warm), not yet a lane's
        self.lost: dict[int, list[str]] = {}  # why each of a lane's sockets closed, until one replaces it
        self.opened = 0

    async def _connect(self, url: str, headers: dict[str, str], lane: int) -> Socket:
        extra = {"decode_text": False} if _DECODE_TEXT else {}
        ws = await self._pool(lane).ws_connect(
            url, headers=headers, autoping=True, compress=0, max_msg_size=self.host.max_response_bytes,
            timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5.0), **extra,
        )  # fmt: skip
        self.opened += 1
        return Socket(ws, arrivals=install(ws))

    async def warm(self, url: str, headers: dict[str, str], count: int) -> None:
        """Open ``count`` sockets before the run (one per session), so no turn's figures pay for a handshake."""

        async def one() -> None:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError, OSError):
                async with asyncio.timeout(10):
                    self.spare.append(await self._connect(url, headers, 0))

        await asyncio.gather(*(one() for _ in range(count)))

    async def acquire(self, url: str, headers: dict[str, str], rec: RequestRecord, want: str | None) -> Socket:
        """The lane's socket that holds ``want`` (the conversation's last response), another of its own, a spare,
        or a new one (``rec.connect_s``; ``rec.reconnect`` when it replaces one the host closed)."""
        idle = self.idle.setdefault(rec.session, [])
        for s in [s for s in idle if s.ws.closed]:
            idle.remove(s)
            self.lost.setdefault(rec.session, []).append(self._why_closed(s))
            _let_go(s)
        while self.spare and self.spare[-1].ws.closed:
            _let_go(self.spare.pop())
        held = [s for s in idle if want is not None and s.last_id == want]
        if held or idle:
            sock = held[0] if held else idle[-1]
            idle.remove(sock)
            return sock
        if self.spare:
            return self.spare.pop()
        t0 = perf_counter()
        try:
            sock = await self._connect(url, headers, rec.session)
        finally:
            rec.connect_s = (rec.connect_s or 0.0) + (perf_counter() - t0)
        lost = self.lost.get(rec.session)
        if lost:
            rec.reconnect = lost.pop(0)
        return sock

    @staticmethod
    def _why_closed(s: Socket) -> str:
        code = s.ws.close_code
        return f"closed by the host (code {code})" if code is not None else "closed"

    async def release(self, lane: int, sock: Socket, response_id: str | None, broken: str | None) -> None:
        """Give ``sock`` back to its lane, holding ``response_id``; a socket that broke (``broken``: why) is closed
        and the lane's next socket counts as a reconnect."""
        if broken is None and not sock.ws.closed:
            sock.last_id = response_id
            self.idle.setdefault(lane, []).append(sock)
            return
        self.lost.setdefault(lane, []).append(broken or self._why_closed(sock))
        try:
            with contextlib.suppress(Exception):
                await sock.ws.close()
        finally:
            _let_go(sock)

    async def close(self) -> None:
        every = [s for socks in self.idle.values() for s in socks] + self.spare
        self.idle, self.spare = {}, []
        for s in every:
            with contextlib.suppress(Exception):
                await s.ws.close()
            _let_go(s)


def _let_go(sock: Socket) -> None:
    """aiohttp keeps the exception a socket failed with (``exception()``), and its traceback holds the frames of the
    socket's own methods (``receive``, ``close``): a reference cycle per broken socket that only the cyclic
    collector frees, unless its frames are dropped once the socket is done with."""
    exc = sock.ws.exception()
    if exc is not None:
        drop_frames(exc)


async def _receive(sock: Socket, turn: Turn, limit: int, sent: float) -> None:
    """The turn's messages as they come, until the event that ends it or the socket's close. Per message: its
    arrival (the read that completed it, ``ws_arrivals``; the wake-up where that was not seen), an append and a byte
    scan (a non-delta event is decoded: a few per turn). Never before ``sent``: a stale message left by a turn cut
    short is read as this turn's, as it always was, and not stamped before this turn's frame went."""
    size, ws, arrivals = 0, sock.ws, sock.arrivals
    while True:
        msg = await ws.receive()
        t = max((arrivals.stamp(msg) if arrivals is not None else None) or perf_counter(), sent)
        if msg.type is aiohttp.WSMsgType.TEXT or msg.type is aiohttp.WSMsgType.BINARY:
            data = msg.data if isinstance(msg.data, bytes) else msg.data.encode()
            size += len(data)
            if size > limit:
                raise ResponseTooLargeError(f"the response passed {limit:,} bytes")
            turn.times.append(t)
            turn.messages.append(data)
            kind, obj = _event_type(data)
            if kind in _ENDS:
                turn.end = kind
                if kind == "error":
                    turn.code, turn.status = _error_of(obj)
                elif isinstance(response := obj.get("response"), dict) and isinstance(response.get("id"), str):
                    turn.response_id = response["id"][:200]
                return
            continue
        if msg.type is aiohttp.WSMsgType.ERROR:
            turn.closed = f"the socket failed: {type(msg.data).__name__}: {msg.data}"
        else:
            code = ws.close_code
            turn.closed = "the host closed the socket" + (f" (code {code})" if code is not None else "")
        return


class ResponseTooLargeError(ReplayError):
    """The turn's messages passed --max-response-bytes."""


async def exchange(sock: Socket, message: bytes, rec: RequestRecord, host: HostConfig, turn: Turn) -> None:
    """Send one turn's ``response.create`` on ``sock`` and read its events into ``turn`` (kept on cancellation);
    fills the record's stamps and, for a failure of the watch, its error. Watched like an HTTP call
    (``--stall-timeout``, the call's deadline)."""

    def last() -> float:
        return turn.times[-1] if turn.times else rec.t_sent

    async def run() -> None:
        rec.t_sent = perf_counter()  # the frame is handed to the socket now (small: only the new items, mostly)
        await sock.ws.send_frame(message, aiohttp.WSMsgType.TEXT)
        async with asyncio.timeout(host.request_timeout_s):
            await _receive(sock, turn, host.max_response_bytes, rec.t_sent)

    try:
        await watched(run(), last, host.stall_timeout_s)
    except Stalled as exc:
        drop_frames(exc)
        rec.error, rec.error_detail = "timeout", str(exc)
    except TimeoutError as exc:
        drop_frames(exc)
        rec.error, rec.error_detail = "timeout", "the call passed its deadline (--request-timeout)"
    except ResponseTooLargeError as exc:
        drop_frames(exc)
        rec.error, rec.error_detail = "response_too_large", f"{exc}; the rest was not read"
    except (aiohttp.ClientError, ConnectionError, OSError) as exc:
        drop_frames(exc)
        turn.closed = excerpt(f"{type(exc).__name__}: {exc}")
    finally:
        rec.t_done = perf_counter()
        if turn.times:
            rec.t_headers = turn.times[0]


def connect_error(exc: BaseException, rec: RequestRecord) -> None:
    """A socket that could not be opened, classified like an HTTP call's failure to connect (a refused upgrade
    by its status, a redirect as a redirect: never followed, ``replay.clients.http_session``)."""
    drop_frames(exc)
    if isinstance(exc, RedirectNotFollowed):
        rec.status, rec.error = exc.status, "redirect"
        rec.error_detail = excerpt(f"{exc}: a WebSocket upgrade is never redirected (its auth stays with its origin)")
    elif tls.is_tls_error(exc):
        rec.error, rec.error_detail = "tls", excerpt(tls.tls_detail(exc), 400)
    elif isinstance(exc, aiohttp.WSServerHandshakeError) and exc.status:
        rec.status = exc.status
        rec.error_detail = excerpt(f"the host refused the WebSocket upgrade ({exc.status}): {exc.message}")
    elif isinstance(exc, TimeoutError):
        rec.error, rec.error_detail = "timeout", "the WebSocket upgrade did not finish"
    else:
        rec.error, rec.error_detail = "connect", excerpt(f"{type(exc).__name__}: {exc}")


def broken(turn: Turn, rec: RequestRecord) -> str | None:
    """Why the socket of a turn cannot carry the next one (its state unknown: events of this turn may still come),
    or None."""
    if turn.closed is not None:
        return turn.closed
    if rec.error is not None:
        return f"the turn failed ({rec.error}) with the socket in an unknown state"
    if turn.end is None or (turn.end == "error" and len(turn.messages) > 1):
        return "the turn ended mid-answer"
    return None


def as_sse(messages: list[bytes]) -> list[bytes]:
    """The turn's messages as SSE ``data:`` events, one per read, for the flavour's reader (after the turn)."""
    return [b"data: " + m + b"\n\n" for m in messages]
