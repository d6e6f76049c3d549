"""The link between a sharded run's parent and a worker once the run is under way: frames on an asyncio transport.

The greeting and the job travel before either side runs its event loop, as blocking ``multiprocessing.connection``
messages (the job is megabytes; a remote worker's key challenge and clock pings). From there both ends are event
loops, and a blocking ``Connection`` is the wrong tool: an event loop watching a socket (uvloop's ``add_reader``,
libuv's poll) makes it non-blocking, and then ``Connection.send`` raises ``BlockingIOError`` when the buffer is full
and ``recv`` raises it on half a message. Both read as "the other end is gone": that is how ``--workers 2`` ran a
worker with no task at ``-c 600`` and both with none at ``-c 1024``. Here the socket is an asyncio
transport: writes are buffered by the loop and never block or fail half way; reads are parsed into whole frames.

A frame is what ``Connection`` writes (a 4-byte big-endian length, or -1 and an 8-byte one past 2 GiB, then a
pickle), so the blocking start and this share one byte stream. Each frame holds a list of messages: a worker
batches its records (``Outbox``), so the parent does one read, one unpickle and one write of the run file per batch
rather than per record.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import socket
import struct
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

_SIZE = struct.Struct("!i")
_BIG = struct.Struct("!Q")
BATCH_S = 0.05  # a worker's records wait at most this long for the others of their batch
BATCH_MAX = 512  # messages: a batch this long goes at once


def frame(messages: list[Any]) -> bytes:
    """One frame of ``messages``, as ``Connection.send(messages)`` would write it."""
    data = pickle.dumps(messages, protocol=pickle.HIGHEST_PROTOCOL)
    head = _SIZE.pack(len(data)) if len(data) <= 0x7FFFFFFF else _SIZE.pack(-1) + _BIG.pack(len(data))
    return head + data


class Channel(asyncio.Protocol):
    """One end of the link: ``send`` a list of messages; ``on_frame`` gets each list that arrives, in order;
    ``on_lost`` is called once when the other end is gone (closed, killed, or a frame that is not one)."""

    def __init__(self, on_frame: Callable[[list[Any]], None], on_lost: Callable[[], None]) -> None:
        self.on_frame, self.on_lost = on_frame, on_lost
        self.transport: asyncio.Transport | None = None
        self._closing: asyncio.Transport | None = None  # close() asked: its half shut, the other end's awaited
        self.closed = asyncio.get_running_loop().create_future()
        self._buf = bytearray()
        self.frames_in = self.bytes_in = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        self.bytes_in += len(data)
        start = 0
        try:
            while len(buf) - start >= 4:
                size = _SIZE.unpack_from(buf, start)[0]
                head = 4
                if size == -1:
                    if len(buf) - start < 12:
                        break
                    size, head = _BIG.unpack_from(buf, start + 4)[0], 12
                elif size < 0:
                    raise ValueError(f"a frame of {size} bytes")
                if len(buf) - start < head + size:
                    break
                body = bytes(memoryview(buf)[start + head : start + head + size])
                start += head + size
                self.frames_in += 1
                self.on_frame(pickle.loads(body))
        except (ValueError, pickle.UnpicklingError, EOFError, TypeError, AttributeError):
            del buf[:]
            self._lost()
            return
        finally:
            if start:
                del buf[:start]

    def eof_received(self) -> bool:
        """The other end shut its half (its close: all it sent is here): this end closes (returns False)."""
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost()
        if not self.closed.done():
            self.closed.set_result(None)

    def _lost(self) -> None:
        """The other end went (not this one: ``close`` and ``abort`` clear ``transport`` first)."""
        if self.transport is not None:
            transport, self.transport = self.transport, None
            transport.abort()
            self.on_lost()

    def send(self, messages: list[Any]) -> bool:
        """Queue ``messages`` as one frame (the loop writes it); False when the other end is gone."""
        if self.transport is None or self.transport.is_closing():
            return False
        self.transport.write(frame(messages))
        return True

    def buffered(self) -> int:
        """Bytes written but not yet taken by the socket."""
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    async def close(self) -> None:
        """Close after what was sent has been read by the other end (or it went): this end's half is shut first
        (EOF once the buffer is written), what the other end still sends is read and dropped, and the socket closes
        when the other end closes its half. A socket closed outright while the other end's bytes sat unread in it
        is reset, and the other end could lose the last frames sent before the close: a worker's footer was lost
        that way (one close in five to eight before this, measured: tests/scale/test_channel.py), and the run failed
        ("worker 0 exited (code 0) before the end of its run")."""
        transport, self.transport = self.transport, None
        if transport is None:
            return
        self._closing, self.on_frame = transport, _drop
        if transport.can_write_eof():
            transport.write_eof()  # the other end's Channel closes on EOF (eof_received), and so this one's
        else:
            transport.close()  # the loop writes what is buffered first
        await self.closed

    def abort(self) -> None:
        """Close at once, dropping what was not sent (the other end is stopped or killed, or it did not close)."""
        transport, self.transport, self._closing = self.transport or self._closing, None, None
        if transport is not None:
            transport.abort()


def _drop(_messages: list[Any]) -> None:
    """What a closing end does with frames that still come: nothing (it asked to close)."""


def as_socket(conn: Connection) -> socket.socket:
    """The socket under a ``multiprocessing.connection.Connection``, which is closed (its greeting is over)."""
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    conn.close()
    return sock


async def open_channel(
    sock: socket.socket, on_frame: Callable[[list[Any]], None], on_lost: Callable[[], None]
) -> Channel:
    """``sock`` (a connected stream socket, blocking or not) as a Channel on the running loop."""
    loop = asyncio.get_running_loop()
    channel = Channel(on_frame, on_lost)
    sock.setblocking(False)
    if sock.family == socket.AF_UNIX:
        await loop.create_unix_connection(lambda: channel, sock=sock)
    else:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a task's answer is a few bytes: no Nagle
        await loop.create_connection(lambda: channel, sock=sock)
    return channel


class Outbox:
    """A worker's messages to the parent in batches: what waits for an answer (a task, the start) or ends the run
    goes at once with everything before it; records wait up to ``BATCH_S`` for the others of their batch."""

    def __init__(self, channel: Channel, batch_s: float = BATCH_S, batch_max: int = BATCH_MAX,
                 tail: Callable[[], Any] | None = None) -> None:  # fmt: skip
        self.channel, self.batch_s, self.batch_max = channel, batch_s, batch_max
        self.tail = tail  # a message each batch ends with (a worker's calls in flight)
        self.pending: list[Any] = []
        self._timer: asyncio.TimerHandle | None = None
        self._soon = False
        self.frames = 0

    def put(self, message: Any, urgent: bool = False) -> bool:
        """Queue ``message``; False when the parent is gone."""
        if self.channel.transport is None:
            return False
        self.pending.append(message)
        loop = asyncio.get_running_loop()
        if urgent or len(self.pending) >= self.batch_max:
            if not self._soon:  # this turn's other messages join it
                self._soon = True
                loop.call_soon(self.flush)
        elif self._timer is None:
            self._timer = loop.call_later(self.batch_s, self.flush)
        return True

    def flush(self) -> None:
        self._soon = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.pending:
            batch, self.pending = self.pending, []
            if self.tail is not None:
                batch.append(self.tail())
            self.frames += 1
            self.channel.send(batch)
