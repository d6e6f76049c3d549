"""The one HTTP transport every flavour shares: a pooled aiohttp session, wire stamps, limits and timeouts.

A call's bytes are stamped where they leave and where the answer's bytes enter aiohttp (``wire_stamps``); the
reading task waits once for the stream's end, so the per-read work stays a timestamp and two appends. A body past
``max_response_bytes`` is cut where it enters (the bytes after the limit are dropped unread and the connection is
closed), so a runaway answer can neither take the client's memory nor keep the event loop busy.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from time import perf_counter
from types import TracebackType
from typing import Any

import aiohttp

from replay.clients import http_session, tls, wire_stamps
from replay.clients.body import Body, BodyPayload
from replay.clients.errors import drop_frames
from replay.clients.host import HostConfig
from replay.clients.usage import excerpt
from replay.clients.watchdog import MAX_HOPS, REDIRECTS, Stalled, redirect_target, same_origin, watched
from replay.clients.ws_transport import Sockets
from replay.records.run_file import RequestRecord

# A body read only at its end stays in aiohttp's buffer meanwhile; reading must not pause before it ends (the
# buffer holds what the client keeps anyway). aiohttp pauses at twice this many bytes or 1/16 as many chunks.
_UNREAD_BODY_LIMIT = 1 << 30
ERROR_BODY_LIMIT = 64 << 10  # of a refusal's body, enough for any error message
MAX_KEPT = 64  # response headers kept per call
# Response headers worth keeping: retry advice, rate-limit state, request ids, server-side timings, routes.
_KEPT = ("retry-after", "x-should-retry", "x-ratelimit-", "anthropic-ratelimit-", "ratelimit-", "x-request-id",
         "request-id", "openai-processing-ms", "fireworks-", "x-replay-route", "x-generation-id", "server-timing",
         "x-groq-", "cf-ray")  # fmt: skip


@dataclass(slots=True)
class Received:
    """What came back for one call: the body as it arrived (pieces and times) and the headers worth keeping."""

    reads: list[bytes] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    refusal: bytes = b""  # the body of a non-200 answer (up to ERROR_BODY_LIMIT)
    location: str | None = None  # where a redirect pointed
    redirects: list[str] = field(default_factory=list)  # redirects followed within the origin (--follow-redirects)
    encoding: str | None = None  # the body's Content-Encoding, when the host compressed it anyway


class _Seen:
    """When the last byte of a call came, for the stall watchdog: the request's, the headers', the body's."""

    __slots__ = ("got", "reader", "rec", "sent")

    def __init__(self, rec: RequestRecord, sent: wire_stamps.CallStamps, got: Received) -> None:
        self.rec, self.sent, self.got = rec, sent, got
        self.reader: Any = None

    def last(self) -> float:
        t = max(self.rec.t_sent, self.sent.sent or 0.0, self.rec.t_headers or 0.0)
        if self.got.times:
            t = max(t, self.got.times[-1])
        if self.reader is not None:
            t = max(t, wire_stamps.last_read(self.reader) or 0.0)
        return t


def _kept(headers: Any) -> dict[str, str]:
    """The headers worth keeping, each cut to 300 characters, at most MAX_KEPT of them (a host may send thousands)."""
    kept: dict[str, str] = {}
    for k, v in headers.items():
        if k.lower().startswith(_KEPT) and len(kept) < MAX_KEPT:
            kept[k.lower()[:100]] = v[:300]
    return kept


def _stale_connection(exc: aiohttp.ClientError) -> bool:
    """Errors of writing to, or reading headers from, a pooled connection the server closed (not a refusal)."""
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ClientSSLError):
        return False
    return isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError)


class Transport:
    """One aiohttp session for a run (use as ``async with``); ``post`` sends one call and stamps it."""

    def __init__(self, host: HostConfig) -> None:
        self.host = host
        self._timeout = aiohttp.ClientTimeout(total=host.request_timeout_s, sock_read=host.stall_timeout_s)
        self.http: aiohttp.ClientSession | None = None  # the first pool (the only one without source addresses)
        self.pools: list[aiohttp.ClientSession] = []  # one per source address (--source-address)
        self._lanes: dict[int, int] = {}
        self.sockets: Sockets | None = None  # --transport websocket (replay.clients.ws_transport)
        # While aiohttp's feed_data hook captures every body byte with its arrival time, a stream is read by waiting
        # for its end (one wake-up per call); after a capture misses bytes, piece by piece.
        wire_stamps.install()
        self._captured = True

    async def __aenter__(self) -> Transport:
        per_request = self.host.connection == "per-request"  # a new connection for every call, closed after it
        sources: tuple[str | None, ...] = self.host.source_addresses or (None,)
        self.pools = [
            http_session.session(
                connector=aiohttp.TCPConnector(
                    limit=0,
                    force_close=per_request,
                    enable_cleanup_closed=True,
                    local_addr=(source, 0) if source else None,  # --source-address
                    ssl=tls.context(self.host.ca_bundle, self.host.insecure),  # --ca-bundle, --insecure
                ),
                headers={"Accept-Encoding": "identity"},  # a body compressed anyway is decoded after (encodings.py)
                auto_decompress=False,
                trace=wire_stamps.trace_config(),  # when each request's bytes leave (t_sent)
            )
            for source in sources
        ]
        self.http = self.pools[0]
        if self.host.transport == "websocket":  # Responses' WebSocket mode: a socket per session, over these pools
            self.sockets = Sockets(self.host, self._pool)
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self.sockets is not None:
            await self.sockets.close()
            self.sockets = None
        for pool in [self.http, *self.pools[1:]]:  # (``http`` may have been swapped for another session)
            if pool is not None:
                await pool.close()
        self.pools = []
        self.http = None

    def _pool(self, lane: int) -> aiohttp.ClientSession:
        """The connection pool of ``lane``'s calls: with several source addresses, lanes are dealt over them in the
        order this process first sees them (a worker's lanes are every N-th of the run's: dealt by number, they
        could all land on one address)."""
        if len(self.pools) <= 1:
            assert self.http is not None
            return self.http
        index = self._lanes.setdefault(lane, len(self._lanes) % len(self.pools))
        return self.pools[index]

    async def warm(self, url: str, headers: dict[str, str], connections: int) -> None:
        """Open ``connections`` pooled connections before the run (one per session), so no call's TTFT pays for a
        TCP handshake. A host that refuses or lacks ``url`` only loses the warm-up. With ``--connection
        per-request`` nothing is kept, so nothing is warmed."""
        assert self.http is not None
        if self.host.connection == "per-request":
            return

        async def one(pool: aiohttp.ClientSession) -> None:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with pool.get(
                    url, headers=headers, timeout=aiohttp.ClientTimeout(total=10), allow_redirects=False
                ) as r:  # (its auth stays with its origin)
                    await r.content.read(ERROR_BODY_LIMIT)
                    wire_stamps.forget(r.content)

        pools = self.pools
        await asyncio.gather(*(one(pools[i % len(pools)]) for i in range(connections)))

    async def post(
        self, url: str, body: Body | bytes, headers: dict[str, str], rec: RequestRecord, got: Received
    ) -> None:
        """Send one call; fill ``got`` and the record's stamps, status and transport-level error (if any). A ``Body``
        goes out as its pieces (``replay.clients.body``), never joined.

        ``t_call`` is when the call began; ``t_sent`` when its bytes were handed to the socket (see wire_stamps), and
        every latency of the call counts from there. On cancellation ``got`` still holds what was seen. The exchange
        is watched (``replay.clients.watchdog``): no new bytes for the stall timeout end it as a timeout, whatever
        state the HTTP library is in; a redirect is followed only with ``--follow-redirects``, within the origin.
        """
        assert self.http is not None
        if rec.t_call is None:  # a caller that waited for a slot (a rate limit) set it already
            rec.t_call = perf_counter()
        deadline = asyncio.get_running_loop().time() + self.host.request_timeout_s
        resend, hops = self.host.resend_stale, 0
        while True:
            sent = wire_stamps.CallStamps()  # filled by wire_stamps' trace: body out, connection opened
            rec.t_sent = perf_counter()
            seen = _Seen(rec, sent, got)
            try:
                exchange = self._exchange(url, body, headers, rec, got, sent, deadline, seen)
                await watched(exchange, seen.last, self.host.stall_timeout_s)
                rec.t_done = perf_counter()
            except asyncio.CancelledError:
                rec.t_done = perf_counter()
                rec.error, rec.error_detail = "cancelled", "stopped before the host finished"
                raise
            except Stalled as exc:
                rec.t_done = perf_counter()
                drop_frames(exc)
                rec.error, rec.error_detail = "timeout", str(exc)
            except wire_stamps.ResponseTooLarge as exc:
                rec.t_done = perf_counter()
                drop_frames(exc)
                rec.error, rec.error_detail = "response_too_large", f"{exc}; the rest was not read"
            except TimeoutError as exc:  # aiohttp's own timers (sock_read is the stall timeout) or the call's deadline
                rec.t_done = perf_counter()
                drop_frames(exc)
                rec.error, rec.error_detail = "timeout", _timeout_detail(self.host, deadline)
            except aiohttp.ClientError as exc:
                rec.t_done = perf_counter()
                drop_frames(exc)
                if resend and _stale_connection(exc) and rec.t_headers is None:
                    # A kept-alive connection the server had already closed (llama-server closes after every stream
                    # while announcing keep-alive): sent again, once, on a fresh one. Only when retries are allowed:
                    # with --retries 0 no call is sent twice (the host may have received it whole: double billing).
                    resend = False
                    rec.retries += 1
                    continue
                if tls.is_tls_error(exc):
                    rec.error, rec.error_detail = "tls", excerpt(tls.tls_detail(exc), 400)
                elif isinstance(exc, aiohttp.ClientResponseError) and rec.t_headers is None:
                    # aiohttp's parser refused the answer's head (not HTTP, a bad status line, too many or too large
                    # headers; redirects are not followed by aiohttp, nor statuses raised): the host was reached
                    rec.error = "protocol"
                    rec.error_detail = excerpt(f"the host's answer is not HTTP that can be read: {exc.message}")
                else:
                    rec.error = "connect" if rec.t_headers is None else "disconnect"
                    rec.error_detail = excerpt(f"{type(exc).__name__}: {exc}")
            target = redirect_target(url, got.location) if rec.status in REDIRECTS else None
            if (
                rec.error is None
                and target
                and self.host.follow_redirects
                and same_origin(url, target)
                and hops < MAX_HOPS
            ):
                hops += 1
                got.redirects.append(f"{rec.status} to {target}")
                url, rec.status, rec.t_headers, got.location, got.refusal = target, None, None, None, b""
                continue
            break

    async def _exchange(
        self,
        url: str,
        body: Body | bytes,
        headers: dict[str, str],
        rec: RequestRecord,
        got: Received,
        sent: wire_stamps.CallStamps,
        deadline: float,
        seen: _Seen,
    ) -> None:
        """One request and its answer, as the watchdog runs it."""
        async with self._pool(rec.session).post(
            url,
            data=BodyPayload(body) if isinstance(body, Body) else body,
            headers=headers,
            timeout=self._timeout,
            trace_request_ctx=sent,
            read_bufsize=_UNREAD_BODY_LIMIT,
            allow_redirects=False,  # credentials never leave their origin (replay.clients.watchdog)
        ) as resp:
            rec.t_headers = perf_counter()
            if sent.sent is not None:
                rec.t_sent = sent.sent
            rec.connect_s = sent.connect_s
            rec.status = resp.status
            got.headers = _kept(resp.headers)
            if resp.status != 200:
                got.location = resp.headers.get("Location") if resp.status in REDIRECTS else None
                got.refusal = await self._refusal(resp.content)
                return
            encoding = resp.headers.get("Content-Encoding", "").strip().lower()
            got.encoding = encoding if encoding not in ("", "identity") else None
            seen.reader = resp.content
            try:
                await self._receive(resp.content, got, deadline)
            finally:
                if got.times:
                    rec.t_headers = min(rec.t_headers, got.times[0])  # headers came no later than the body

    async def _refusal(self, content: aiohttp.StreamReader) -> bytes:
        """The body of a refusal, up to ERROR_BODY_LIMIT (a host may answer an error with anything)."""
        wire_stamps.forget(content)
        parts: list[bytes] = []
        size = 0
        with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
            while size < ERROR_BODY_LIMIT and (data := await content.read(ERROR_BODY_LIMIT - size)):
                parts.append(data)
                size += len(data)
        wire_stamps.forget(content)
        return b"".join(parts)

    async def _receive(self, content: aiohttp.StreamReader, got: Received, deadline: float) -> None:
        """Fill ``got`` with the body as it arrived, also when the stream fails, is cut or is cancelled half way
        (what came before stays)."""
        limit = self.host.max_response_bytes
        if not self._captured:
            size = 0
            try:
                async for data in content.iter_any():  # the hot path: a timestamp and the bytes
                    got.times.append(perf_counter())
                    size += len(data)
                    if size > limit:
                        raise wire_stamps.ResponseTooLarge(f"the response passed {limit:,} bytes")
                    got.reads.append(data)
            finally:
                wire_stamps.forget(content)
            return
        try:
            wire_stamps.watch(content, limit)
            if (cut := content.exception()) is not None:  # cut before anyone waited
                raise cut
            async with asyncio.timeout_at(deadline):  # aiohttp's total timeout does not cover wait_eof
                await content.wait_eof()
        finally:
            cap = wire_stamps.take(content)
            if cap is not None:
                got.reads += cap.reads
                got.times += cap.times
            elif content.total_bytes:  # the hook missed bytes: keep them with one coarse time, and
                self._captured = False  # read piece by piece from now on
                with contextlib.suppress(Exception):
                    if data := content.read_nowait():
                        got.reads.append(data)
                        got.times.append(perf_counter())


def _timeout_detail(host: HostConfig, deadline: float) -> str:
    """Which timeout ended the call: its deadline, or no new bytes (aiohttp's read timer and the stall watchdog are
    both set to the stall timeout, and either may fire first: the same timeout, named the same way)."""
    if asyncio.get_running_loop().time() >= deadline:
        return f"the call passed its deadline of {host.request_timeout_s:g} s (--request-timeout)"
    return f"no new bytes for {host.stall_timeout_s:g} s (--stall-timeout)"
