"""Timestamps taken at the wire: when a request's bytes are handed to the socket, and when each piece of the
response enters aiohttp.

Sending: aiohttp writes a request body from a task of its own, so between the client deciding to call and
the bytes leaving there can be a turn of the event loop (milliseconds when 64 sessions call at once), plus
opening a connection. ``trace_config()`` stamps the moment the first body chunk is handed to the transport,
through aiohttp's public tracing hooks; a call's clock (``t_sent``) starts there, and the wait before it is
kept apart as the client's own (``t_call`` .. ``t_sent``).

Receiving: when many streams receive a token at once, the event loop first hands every socket's bytes to its stream
reader, then resumes the reading tasks one after another; a stamp taken in the task is late by the time the loop
spent on the tasks before it. ``StreamReader.feed_data`` runs in the first phase, so the hook installed by
``install()`` keeps each piece of the body with its arrival time there: one ``perf_counter()`` and two appends per
network read (once the call waits for the body's end, the piece goes nowhere else). The reading task then needs to
wake only once, at the end of the stream, instead of once per read. The capture is trusted only if it accounts for
every byte the reader received; otherwise the client reads the stream itself (older or newer aiohttp, or anything
unexpected).
"""

from __future__ import annotations

from time import perf_counter
from types import SimpleNamespace
from typing import Any

import aiohttp
from aiohttp import streams

from replay.errors import ReplayError


class ResponseTooLarge(ReplayError):
    """A response body grew past its limit; what came before the limit is kept."""


class Capture:
    """The body of one response as it arrived: pieces, their arrival times, and the bytes they hold."""

    __slots__ = ("limit", "over", "reads", "sole", "times", "total")

    def __init__(self) -> None:
        self.reads: list[bytes] = []
        self.times: list[float] = []
        self.total = 0
        self.limit = _PRE_WATCH_LIMIT
        self.over = False  # the body passed ``limit``: later bytes are dropped unread
        self.sole = False  # the capture is the body's only reader (``watch``): aiohttp's buffer is skipped


# Before a call names its limit (``watch``) only what came with the headers is captured: never the limit's business.
_PRE_WATCH_LIMIT = 1 << 62


_CAPTURES: dict[int, Capture] = {}  # id(reader) -> what it received so far


def install() -> None:
    """Wrap ``StreamReader.feed_data`` to keep every piece it receives with its arrival time (idempotent)."""
    cls = streams.StreamReader
    if getattr(cls.feed_data, "_replay_capture", False):
        return
    original = cls.feed_data

    def feed_data(self: Any, data: bytes, *args: Any, **kwargs: Any) -> Any:
        if data:
            t = perf_counter()
            key = id(self)
            cap = _CAPTURES.get(key)
            if cap is None or (cap.total != self.total_bytes and not cap.over):  # a new reader, or a stale id reused
                cap = _CAPTURES[key] = Capture()
            if cap.over:
                return None  # past the limit: the bytes go nowhere, and the reader has already failed
            n = len(data)
            if cap.total + n > cap.limit:
                _cut(self, cap)
                return None
            cap.reads.append(data)
            cap.times.append(t)
            cap.total += n
            if cap.sole:  # the caller only waits for the end: the bytes need not enter aiohttp's buffer too
                self.total_bytes += n
                return False
        return original(self, data, *args, **kwargs)

    # Patching aiohttp's class on purpose (the module's docstring says why): the typing of a method assignment
    # and a mark on a function cannot be expressed, hence the ignores here and below.
    feed_data._replay_capture = True  # type: ignore[attr-defined]
    cls.feed_data = feed_data  # type: ignore[method-assign]
    end_chunk = cls.end_http_chunk_receiving

    def end_http_chunk_receiving(self: Any) -> None:
        cap = _CAPTURES.get(id(self))
        if cap is None or not cap.sole:  # (the chunk boundaries are for readers of aiohttp's buffer)
            end_chunk(self)

    cls.end_http_chunk_receiving = end_http_chunk_receiving  # type: ignore[method-assign]


def _cut(reader: Any, cap: Capture) -> None:
    cap.over = True
    reader.set_exception(ResponseTooLarge(f"the response passed {cap.limit:,} bytes"))


def watch(reader: Any, limit: int) -> None:
    """Cut the body of ``reader`` once it passes ``limit`` bytes: its reader then raises ResponseTooLarge. The caller
    will only wait for the body's end (``wait_eof``) and ``take`` it, so from here on its bytes go to the capture
    alone: aiohttp's own buffer, which nobody reads, no longer holds them too (nor costs a call per read)."""
    cap = _CAPTURES.get(id(reader))
    if cap is None or cap.total != getattr(reader, "total_bytes", -1):
        if getattr(reader, "total_bytes", 0):
            return  # the hook missed bytes: the capture will not be trusted, and the client reads (and cuts) itself
        cap = _CAPTURES[id(reader)] = Capture()
    cap.limit = limit
    cap.sole = True
    if cap.total > limit:
        _cut(reader, cap)


def take(reader: Any) -> Capture | None:
    """What one reader received, removed from the table (call once done with the response); None if the
    capture is missing or does not account for exactly the bytes the reader received."""
    cap = _CAPTURES.pop(id(reader), None)
    if cap is None or (cap.total != getattr(reader, "total_bytes", -1) and not cap.over):
        return None
    return cap


def last_read(reader: Any) -> float | None:
    """When the last piece of ``reader``'s body came (None: none yet), for the stall watchdog."""
    cap = _CAPTURES.get(id(reader))
    return cap.times[-1] if cap is not None and cap.times else None


def forget(reader: Any) -> None:
    """Drop a reader's capture (responses whose body timing nobody needs)."""
    _CAPTURES.pop(id(reader), None)


class CallStamps:
    """What aiohttp's trace hooks saw of one call: when its body went out, and the connection it opened."""

    __slots__ = ("connect_end", "connect_start", "sent")

    def __init__(self) -> None:
        self.sent: float | None = None  # the first body chunk handed to the transport
        self.connect_start: float | None = None  # a new connection was begun (DNS, TCP and TLS follow)
        self.connect_end: float | None = None

    @property
    def connect_s(self) -> float | None:
        """Time spent opening a new connection for this call (None: it reused a kept-alive one)."""
        if self.connect_start is None or self.connect_end is None:
            return None
        return max(0.0, self.connect_end - self.connect_start)


async def _on_chunk_sent(_session: Any, ctx: SimpleNamespace, _params: Any) -> None:
    stamp = ctx.trace_request_ctx
    if isinstance(stamp, CallStamps) and stamp.sent is None:
        stamp.sent = perf_counter()


async def _on_connect_start(_session: Any, ctx: SimpleNamespace, _params: Any) -> None:
    if isinstance(ctx.trace_request_ctx, CallStamps):
        ctx.trace_request_ctx.connect_start = perf_counter()


async def _on_connect_end(_session: Any, ctx: SimpleNamespace, _params: Any) -> None:
    if isinstance(ctx.trace_request_ctx, CallStamps):
        ctx.trace_request_ctx.connect_end = perf_counter()


def trace_config() -> aiohttp.TraceConfig:
    """A TraceConfig for the client session: a request made with ``trace_request_ctx=CallStamps()`` gets the time
    its first body chunk was handed to the transport, and when a new connection was opened for it."""
    config = aiohttp.TraceConfig()
    config.on_request_chunk_sent.append(_on_chunk_sent)
    config.on_connection_create_start.append(_on_connect_start)
    config.on_connection_create_end.append(_on_connect_end)
    return config
