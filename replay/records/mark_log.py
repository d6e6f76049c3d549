"""A run's window and segment records, in file order, without holding the window records in memory.

A soak writes a window record every minute or so, each tens to hundreds of kilobytes of encoded accumulators (its
histograms, and one entry per task that ended in it). The run's summary needs them only at the end (the figures
over time, ``replay.metrics.windows.series``), so a ``MarkLog`` writes each window record out to a temporary file
of its own (unlinked at once: it goes when the log does, or with the process) and keeps only where it lies; it is
read back, as the JSON the run file holds, whenever the log is iterated (where no temporary file can be written, the
record is kept in memory: the run goes on, its figures the same). Segment records (one per resume) are few
and small and stay in memory. Before this the live run kept every window record, about 9 MB an hour at 575,000
calls an hour (docs/benchmarks.md, "Accelerated soak memory").
"""

from __future__ import annotations

import os
import tempfile
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, overload

import orjson

SPILLED = ("window",)  # the kinds written out; the others are kept as they are


class MarkLog(Sequence[dict[str, Any]]):
    """Window and segment records in the order they came; a window record is read back each time it is asked for
    (a new dict each time: the same JSON as the run file's line, so the same figures as ``replay report``)."""

    def __init__(self) -> None:
        self._entries: list[dict[str, Any] | tuple[int, int]] = []  # a record, or (offset, length) in the spill
        self._fd: int | None = None
        self._size = 0

    def _spill_fd(self) -> int:
        if self._fd is None:
            fd, name = tempfile.mkstemp(prefix="replay-marks-")
            os.unlink(name)  # nothing to clean up: the space is freed when the descriptor closes
            self._fd = fd
            weakref.finalize(self, os.close, fd)
        return self._fd

    def append(self, record: dict[str, Any]) -> None:
        if record.get("type") not in SPILLED:
            self._entries.append(record)
            return
        data = orjson.dumps(record)
        try:
            fd = self._spill_fd()
            written = 0
            while written < len(data):  # (a regular file takes it whole; a short write is finished all the same)
                written += os.pwrite(fd, data[written:], self._size + written)
        except OSError:  # no temporary space (full, read-only, gone): this one is kept in memory, as before
            self._entries.append(orjson.loads(data))
            return
        self._entries.append((self._size, len(data)))
        self._size += len(data)

    def _load(self, entry: dict[str, Any] | tuple[int, int]) -> dict[str, Any]:
        if isinstance(entry, dict):
            return entry
        offset, length = entry
        assert self._fd is not None
        data = os.pread(self._fd, length, offset)
        record: dict[str, Any] = orjson.loads(data)
        return record

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self._load(e) for e in self._entries[index]]
        return self._load(self._entries[index])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for entry in self._entries:
            yield self._load(entry)

    def kept_in_memory(self) -> int:
        """How many records are held as dicts (segments); the window records are on disk."""
        return sum(isinstance(e, dict) for e in self._entries)
