"""When each WebSocket message arrived: the time of the socket read that completed it, not of the receiving task's
wake-up.

aiohttp parses a WebSocket's bytes in the connection's ``data_received`` (its parser is compiled, and it queues the
parsed messages for ``ws.receive()``); the task that awaits ``receive()`` runs later, after every other callback
the loop had ready. With 32 sessions on one loop that wait was 3.8-8.3 ms at p50 against the simulated host's own
send times, where HTTP's reader, stamped at its read, agreed to 1.3-4.5 ms on the same machine. So the
connection's parser is wrapped: each read takes one timestamp, and each message it queued is paired with it. The
receiving task takes its message's stamp by identity (the control frames aiohttp answers itself, a ping, are
skipped), so a message the wrapper never saw (a parse resumed from aiohttp's own back-pressure path) takes the
wake-up time and costs none of the later messages their stamps.

Per read: a timestamp and two length reads; per message: an append and an identity check. Where aiohttp's
internals are not as expected (another version), nothing is wrapped and the wake-up time is used, as before.
"""

from __future__ import annotations

from collections import deque
from time import perf_counter
from typing import Any


class Arrivals:
    """The parser of one WebSocket connection, wrapped: ``feed_data`` as the parser's, stamping what it queued."""

    __slots__ = ("_buffer", "_parser", "pending")

    def __init__(self, parser: Any, buffer: deque[Any]) -> None:
        self._parser = parser
        self._buffer = buffer  # the queue's messages, each (message, size), in order
        self.pending: deque[tuple[Any, float]] = deque()  # (message, when its read came), oldest first

    def feed_data(self, data: Any) -> Any:
        t = perf_counter()
        before = len(self._buffer)
        out = self._parser.feed_data(data)
        after = len(self._buffer)
        if after > before:  # only what this read added (the task may have taken earlier ones meanwhile: not here)
            buffer, pending = self._buffer, self.pending
            for i in range(before, after):
                pending.append((buffer[i][0], t))
        return out

    def feed_eof(self) -> Any:
        return self._parser.feed_eof()

    def __getattr__(self, name: str) -> Any:  # anything else aiohttp asks of its parser
        return getattr(self._parser, name)

    def stamp(self, message: Any) -> float | None:
        """When ``message`` arrived, or None where it was not seen here; the entries before it go (messages are
        received in order: those were control frames aiohttp answered itself)."""
        pending = self.pending
        for k, (m, t) in enumerate(pending):
            if m is message:
                for _ in range(k + 1):
                    pending.popleft()
                return t
        return None


def install(ws: Any) -> Arrivals | None:
    """Wrap the parser of ``ws``'s connection; None (nothing changed) where aiohttp's internals differ."""
    try:
        protocol = ws._conn.protocol
        parser, buffer = protocol._payload_parser, ws._reader._buffer
    except AttributeError:
        return None
    if parser is None or not isinstance(buffer, deque) or not callable(getattr(parser, "feed_data", None)):
        return None
    arrivals = Arrivals(parser, buffer)
    protocol._payload_parser = arrivals
    return arrivals
