"""Server-sent events: the raw bytes of a finished stream framed into timed events, in linear time.

The read path only keeps (timestamp, bytes) per read. This module runs once per finished call and rebuilds the
events exactly as an incremental parser would have seen them: an event split across reads is stamped with the read
that completed it, several events in one read share that read's time, comment lines (keep-alives) are dropped, and
CRLF or lone CR line endings are read as LF. Every byte is copied at most a fixed number of times, so a 50 MB line
or a stream of a million events costs time in proportion to its bytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class Event:
    """One SSE event: its name (``event:`` line, if any), data, and arrival time."""

    name: bytes | None
    data: bytes
    t: float


def _lf(reads: Sequence[bytes]) -> Iterator[bytes]:
    """The reads with CRLF and lone CR turned into LF; a CR ending one read and an LF starting the next are one."""
    after_cr = False
    for data in reads:
        if b"\r" not in data:
            if after_cr and data[:1] == b"\n":
                data = data[1:]
            after_cr = False
            yield data
            continue
        if after_cr and data[:1] == b"\n":
            data = data[1:]
        after_cr = data.endswith(b"\r")
        yield data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


class Framer:
    """Cuts a stream into regions of complete events (text up to a blank line). A region may hold several events
    separated by blank lines; ``tail`` is what never ended with one."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []  # the incomplete event so far (joined only once it completes)

    def feed(self, data: bytes) -> list[bytes]:
        """The regions of events this read completed (usually one; none while an event is still coming)."""
        head: list[bytes] = []
        if self._parts and data[:1] == b"\n" and self._parts[-1].endswith(b"\n"):  # a blank line across two reads
            head.append(b"".join(self._parts)[:-1])
            self._parts = []
            data = data[1:]
        if b"\n" not in data:  # inside a long event: a fast byte search, no separator search
            if data:
                self._parts.append(data)
            return head
        cut = data.rfind(b"\n\n")
        if cut < 0:
            self._parts.append(data)
            return head
        if self._parts:  # the event that was coming ends in this read: a region of its own (it may be huge)
            first = data.find(b"\n\n")
            head.append(b"".join((*self._parts, data[:first])))
            rest = data[first + 2 : cut]
        else:
            rest = data[:cut]
        self._parts = [data[cut + 2 :]] if cut + 2 < len(data) else []
        return [*head, rest] if rest else head

    def tail(self) -> bytes:
        """Bytes after the last blank line."""
        return b"".join(self._parts)


def regions(reads: Sequence[bytes], times: Sequence[float]) -> Iterator[tuple[bytes, float, bool]]:
    """(region, time of the read that completed it, complete) in arrival order: the bytes after the last blank
    line come last, marked incomplete, with the last read's time."""
    framer = Framer()
    for data, t in zip(_lf(reads), times, strict=True):
        for region in framer.feed(data):
            if region:
                yield region, t, True
    tail = framer.tail()
    if tail and times:
        yield tail, times[-1], False


def without_bom(reads: Sequence[bytes]) -> Sequence[bytes]:
    """The reads without a UTF-8 byte order mark at the stream's start (the SSE standard strips one), even one
    split across reads; the reads as they are when there is none (the common case costs one comparison)."""
    if not reads or reads[0][:1] != BOM[:1]:
        return reads
    head = b"".join(reads[:3])[:3]
    if head != BOM:
        return reads
    out, cut, i = list(reads), 3, 0
    while cut:  # (a read left empty stays, so every read keeps its time)
        take = min(cut, len(out[i]))
        out[i], cut, i = out[i][take:], cut - take, i + 1
    return out


BOM = b"\xef\xbb\xbf"


def split_region(region: bytes) -> list[bytes]:
    """The events of a region (one huge line needs no separator search: a byte search says there is none)."""
    return region.split(b"\n\n") if b"\n" in region else [region]


def parse_block(block: bytes) -> tuple[bytes | None, bytes] | None:
    """(event name, data) of one event's lines; None for a block of only comments or blank lines."""
    if block[:6] == b"data: " and b"\n" not in block:  # nearly every event: one data line and nothing else
        return None, block[6:]
    name: bytes | None = None
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line[:1] == b":":
            continue  # blank or comment (keep-alive)
        key, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if key == b"data":
            data.append(value)
        elif key == b"event":
            name = value
    if not data and name is None:
        return None
    return name, b"\n".join(data)


def split_events(reads: Sequence[bytes], times: Sequence[float]) -> tuple[list[Event], bytes]:
    """Events in arrival order, plus any trailing bytes that never formed a complete line."""
    events: list[Event] = []
    leftover = b""
    for region, t, complete in regions(reads, times):
        if not complete and not region.endswith(b"\n"):  # complete lines still count: some servers close right
            leftover = region  # after `data: [DONE]\n`
            break
        for block in split_region(region):
            parsed = parse_block(block)
            if parsed is not None:
                events.append(Event(parsed[0], parsed[1], t))
    return events, leftover
