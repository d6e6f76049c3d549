"""A worker's clock brought to the parent's, for workers on other machines (``--ray``).

Records carry ``perf_counter()`` stamps of the clock of the process that made them. On one machine every process
reads the same CLOCK_MONOTONIC, so a local worker's stamps need nothing. Across machines the clocks share no
origin: when a remote worker connects, the parent sends it a few pings stamped with its own clock; the worker
answers each with its clock's reading; the parent keeps the exchange with the shortest round trip. The worker read
its clock somewhere between the parent's send (t0) and receipt (t1), so ``offset = (t0 + t1) / 2 - t_worker``
is within ``(t1 - t0) / 2`` of the truth (the error bound), whatever the network's asymmetry. The parent adds the
offset to every timestamp of that worker's messages as they arrive: the run file is in the parent's clock.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from replay.records.run_file import RequestRecord, TaskRecord

PINGS = 16  # exchanges at connect: the shortest round trip of 16 is a tight bound on a LAN


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """Add ``offset_s`` to a worker's clock to read the parent's; the truth is within ``error_s`` of it."""

    offset_s: float
    error_s: float

    def public(self) -> dict[str, float]:
        return {"clock_offset_s": self.offset_s, "clock_error_s": self.error_s}


def best_offset(samples: list[tuple[float, float, float]]) -> ClockOffset:
    """From (parent sent, worker's reading, parent received) exchanges: the one with the shortest round trip."""
    sent, theirs, back = min(samples, key=lambda s: s[2] - s[0])
    return ClockOffset((sent + back) / 2 - theirs, (back - sent) / 2)


def _times(cls: type) -> tuple[str, ...]:
    """A record's absolute stamps: every ``t_*`` field (records.py: all are perf_counter seconds). ``chunks`` holds
    offsets from ``t_sent``, which move with it."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.name.startswith("t_"))


REQUEST_TIMES = _times(RequestRecord)
TASK_TIMES = _times(TaskRecord)


def shift(rec: Any, names: tuple[str, ...], offset: float) -> Any:
    """``rec`` with each of its ``names`` stamps moved by ``offset`` (in place)."""
    for name in names:
        value = getattr(rec, name)
        if value is not None:
            setattr(rec, name, value + offset)
    return rec


def shift_message(message: tuple[Any, ...], offset: float) -> tuple[Any, ...]:
    """A worker's message with every stamp in the parent's clock (records, client samples, live pauses)."""
    kind = message[0]
    if kind == "request":
        return (kind, shift(message[1], REQUEST_TIMES, offset))
    if kind == "task":
        return (kind, shift(message[1], TASK_TIMES, offset))
    if kind == "client":
        return (kind, {**message[1], "t": message[1]["t"] + offset})
    if kind == "live":
        state = message[1]
        moved = {name: {lane: t + offset for lane, t in state[name].items()} for name in ("pauses", "paused_at")}
        return (kind, {**state, **moved})
    return message
