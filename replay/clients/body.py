"""A request body as the fragments it is made of, sent to the socket without being joined.

A turn's body is its whole context: at 1M tokens, 6.5 MB per call. Joined, every session in flight held a copy of
its context, and aiohttp (on CPython before 3.12.9) joined the headers with the body into one more before writing
(docs/benchmarks.md, "Client memory at long contexts"). A ``Body`` is the list of its pieces instead: each long
message's bytes (or its fragment in the flavour's format) as kept for the run, and the short bytes between them
joined. ``BodyPayload`` writes them in order: runs of short pieces gathered into writes of about ``BATCH`` bytes (a
copy of at most that much at a time), long ones as views of at most ``WRITE_MAX`` bytes (uvloop keeps a reference to
what the socket did not take; asyncio's transport copies it, and aiohttp waits for it to drain after each). The
size is known, so the request has a ``Content-Length``, as a bytes body had, and the body can be sent again (the
stale-connection resend, retries).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aiohttp import payload
from aiohttp.abc import AbstractStreamWriter

Piece = bytes | memoryview
BATCH = 64 << 10  # aiohttp's own drain threshold (StreamWriter.write's LIMIT)
SHARED = 512  # a piece at least this long is sent from where it is kept; shorter ones are joined (copied)
WRITE_MAX = 256 << 10  # the longest single write


class Body:
    """The pieces of one request body, in order, and its size in bytes."""

    __slots__ = ("pieces", "size")

    def __init__(self, pieces: list[Piece]) -> None:
        self.pieces = pieces
        self.size = sum(map(len, pieces))

    def __bytes__(self) -> bytes:
        return b"".join(self.pieces)

    def with_fields(self, fields: bytes) -> Body:
        """This body (a JSON object) with ``"a":1,...`` added before its closing brace; the pieces stay shared."""
        last = bytes(self.pieces[-1])
        if not last.endswith(b"}"):
            raise ValueError("a body ends with the closing brace of its JSON object")
        return Body([*self.pieces[:-1], last[:-1] + b"," + fields + b"}"])


def joined(pieces: list[Piece], parts: Iterable[Piece | tuple[Piece, ...]], sep: bytes = b",") -> None:
    """Append ``parts`` to ``pieces`` with ``sep`` between them; a tuple part is a fragment made of several pieces.

    Pieces of at least ``SHARED`` bytes are kept as they are; the short ones between them (separators, short
    messages, the bytes around a shared text) are joined into one piece, so a body has a few pieces per long message
    however many short ones its context has: a copy of the short bytes only, and no Python work per byte sent."""
    run: list[Piece] = []
    first = True
    for part in parts:
        if first:
            first = False
        elif sep:
            run.append(sep)
        if isinstance(part, tuple):
            for piece in part:
                if len(piece) >= SHARED:
                    _flush(pieces, run)
                    pieces.append(piece)
                else:
                    run.append(piece)
        elif len(part) >= SHARED:
            _flush(pieces, run)
            pieces.append(part)
        else:
            run.append(part)
    _flush(pieces, run)


def _flush(pieces: list[Piece], run: list[Piece]) -> None:
    if run:
        pieces.append(run[0] if len(run) == 1 else b"".join(run))
        run.clear()


class BodyPayload(payload.Payload):
    """aiohttp's view of a ``Body``: its size for the Content-Length, its pieces written in order."""

    _value: Body
    _autoclose = True  # nothing to close: the pieces are bytes in memory (and can be sent again)

    def __init__(self, value: Body, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("content_type", "application/json")
        super().__init__(value, *args, **kwargs)
        self._size = value.size

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return bytes(self._value).decode(encoding, errors)

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(self, writer: AbstractStreamWriter, content_length: int | None) -> None:
        size = self._value.size
        left = size if content_length is None else min(content_length, size)
        batch: list[Piece] = []
        held = 0
        for piece in self._value.pieces:
            if left <= 0:
                break
            if len(piece) > left:
                piece = piece[:left]
            left -= len(piece)
            if len(piece) < BATCH:
                batch.append(piece)
                held += len(piece)
                if held < BATCH:
                    continue
                piece = b"".join(batch)
                batch, held = [], 0
            elif batch:
                await writer.write(b"".join(batch))
                batch, held = [], 0
            await _write_sliced(writer, piece)
        if batch:
            await writer.write(b"".join(batch))


async def _write_sliced(writer: AbstractStreamWriter, piece: Piece) -> None:
    """A long piece in views of at most ``WRITE_MAX`` bytes: aiohttp drains between them, so a transport that copies
    what the socket did not take (asyncio's, before Python 3.12) never holds more than about that much of it."""
    if len(piece) <= WRITE_MAX:
        await writer.write(piece)
        return
    view = memoryview(piece)
    for at in range(0, len(view), WRITE_MAX):
        await writer.write(view[at : at + WRITE_MAX])
