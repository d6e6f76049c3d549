"""Server-sent events: split the raw bytes of a stream into timed events, after the stream closes.

The read path only keeps (timestamp, bytes) per read. This module runs once per finished request and
rebuilds the events exactly as an incremental parser would have seen them: an event split across reads
is stamped with the read that completed it, several events in one read share that read's time, and
comment lines (keep-alives) are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class Event:
    """One SSE event: its name (``event:`` line, if any), data, and arrival time."""

    name: bytes | None
    data: bytes
    t: float


def _parse_block(block: bytes, t: float) -> Event | None:
    name: bytes | None = None
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue  # blank or comment (keep-alive)
        key, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if key == b"data":
            data.append(value)
        elif key == b"event":
            name = value
    if not data and name is None:
        return None
    return Event(name=name, data=b"\n".join(data), t=t)


def split_events(reads: Sequence[bytes], times: Sequence[float]) -> tuple[list[Event], bytes]:
    """Events in arrival order, plus any trailing bytes that never formed a complete line."""
    events: list[Event] = []
    append = events.append
    pending = b""
    for data, t in zip(reads, times, strict=True):
        pending += data
        if b"\r" in pending:
            # CRLF or lone CR line endings: normalise before looking for the blank line. A CR that ends this
            # read may be the first half of a CRLF, so keep it pending until the next read decides.
            tail = b"\r" if pending.endswith(b"\r") else b""
            body = pending[: len(pending) - len(tail)]
            pending = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail
        if b"\n\n" not in pending:
            continue
        *blocks, pending = pending.split(b"\n\n")
        for block in blocks:
            # Fast path, nearly every event: one `data: ` line and nothing else.
            if block[:6] == b"data: " and b"\n" not in block:
                append(Event(None, block[6:], t))
            else:
                event = _parse_block(block, t)
                if event is not None:
                    append(event)
    if pending.endswith(b"\n") and times:
        # Complete lines without the final blank line: some servers close right after `data: [DONE]\n`.
        event = _parse_block(pending, times[-1])
        if event is not None:
            events.append(event)
        pending = b""
    return events, pending
