"""Arrival stamps taken where response bytes enter aiohttp, not where the reading task next runs.

When many streams receive a token at the same moment, the event loop first hands every socket's bytes to
its stream reader, then resumes the reading tasks one after another; a stamp taken in the task is late by
the time the loop spent on the tasks before it (milliseconds at 64 streams). ``StreamReader.feed_data`` runs
in the first phase, so a stamp there is as close to the socket read as asyncio allows.

The hook is one ``perf_counter()`` and one append per network read. It is installed once per process, and
a reader's stamps are used only if they account for exactly the bytes the client read; otherwise the client
keeps its own per-read stamps (older or newer aiohttp, or anything unexpected).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

from aiohttp import streams

_STAMPS: dict[int, list[float]] = {}  # id(reader) -> flat [bytes so far, t, bytes so far, t, ...]


def install() -> bool:
    """Wrap ``StreamReader.feed_data`` to stamp every chunk it receives (idempotent)."""
    cls = streams.StreamReader
    if getattr(cls.feed_data, "_replay_stamps", False):
        return True
    original = cls.feed_data

    def feed_data(self: Any, data: bytes, *args: Any, **kwargs: Any) -> Any:
        if data:
            key = id(self)
            before = self.total_bytes
            stamps = _STAMPS.get(key)
            if stamps is None or (stamps[-2] if stamps else 0) != before:  # new reader, or a stale id
                stamps = _STAMPS[key] = []
            stamps += (before + len(data), perf_counter())
        return original(self, data, *args, **kwargs)

    feed_data._replay_stamps = True  # type: ignore[attr-defined]
    cls.feed_data = feed_data  # type: ignore[method-assign]
    return True


def take(reader: Any) -> list[float]:
    """The stamps of one reader, removed from the table (call once the response is done with)."""
    return _STAMPS.pop(id(reader), [])


def reads_from_stamps(reads: list[bytes], stamps: list[float]) -> tuple[list[bytes], list[float]] | None:
    """The body cut where it entered aiohttp, each piece with its arrival time; None if the stamps do not
    account for exactly the bytes read."""
    total = sum(len(r) for r in reads)
    if not stamps or stamps[-2] != total:
        return None
    body = b"".join(reads)
    out_reads: list[bytes] = []
    out_times: list[float] = []
    start = 0
    for i in range(0, len(stamps), 2):
        end = int(stamps[i])
        if end > start:
            out_reads.append(body[start:end])
            out_times.append(stamps[i + 1])
            start = end
    return out_reads, out_times
