"""A finished stream read into figures: the part every API flavour shares.

The per-read path kept a timestamp and the bytes of each read. Here, after the stream closed, the bytes are framed
into events (``sse.regions``) and each flavour classifies them: a region whose events are all plain token deltas is
counted with a few byte counts (``templated``, when the events share their framing as one host writes them, else
``StreamReader.plain_tokens``); other events get a byte scan (``scan``), and only
those that carry a figure or look unusual are decoded (``decode``). Whatever the bytes, this never raises: an event a
flavour cannot understand marks the stream ``malformed``, and a flavour's own bug is caught here and reported the
same way, so a call always ends as one classified record.

Interpretation is a generator that yields every ``YIELD_BYTES`` of input, so the transport can let the event loop
run other streams while a huge answer is read. What a stream said and the flavour's reader are in ``stream_state``,
the byte counts of plain deltas in ``plain_deltas``; their names are imported from here too.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence

import numpy as np

from replay.clients import delta_template
from replay.clients.plain_deltas import FIRST_NOT_PLAIN, plain_count, plain_events, templated
from replay.clients.sse import parse_block, regions, split_region, without_bom
from replay.clients.stream_state import ANSWER, NONE, REASONING, StreamReader, StreamState
from replay.clients.usage import Usage, against_stream, excerpt

__all__ = [  # the stream's kinds, state and reader, and the plain deltas' counts are imported from here too
    "ANSWER",
    "FIRST_NOT_PLAIN",
    "NONE",
    "REASONING",
    "StreamReader",
    "StreamState",
    "interpret",
    "interpret_steps",
    "plain_count",
    "plain_events",
    "templated",
]

YIELD_BYTES = 1 << 20
# Byte scans make several passes over an event; past this size one JSON decode (a single pass) is cheaper.
BIG_EVENT = 1 << 20
# A region this short is classified event by event; a longer one that fails the byte count is cut (``_region``).
SPLIT_BYTES = 2048
PEEL_LAST = 3  # a stream's last events: the finish reason, the usage, ``[DONE]``
MIN_RUN = 8  # reads of token deltas at least, for ``_one_per_read``
BATCH_REGIONS = 64  # regions (reads) classified together by ``_batch``


def interpret_steps(
    reader: StreamReader,
    reads: Sequence[bytes],
    times: Sequence[float],
    t_sent: float,
    collect: bool = False,
    step_bytes: int = YIELD_BYTES,
) -> Iterator[StreamState]:
    """Classify every event; yields the (unfinished) state every ``step_bytes`` of input, then the final state.

    With ``collect`` the fast paths are off and the answer text is kept (for live history).
    """
    st = StreamState()
    if collect:
        st.text, st.reasoning_text = [], []
    try:
        reads = without_bom(reads)
        lo, hi = 1, len(reads) - PEEL_LAST  # a stream's first and last events are not plain deltas
        if collect or hi - lo < MIN_RUN or not _ends_events(reads[0]):
            lo = hi = len(reads)
        tail = yield from _framed(reader, st, reads[:lo], times[:lo], t_sent, collect, step_bytes)
        lo = yield from _one_per_read(reader, st, reads, times, lo, hi, t_sent, step_bytes)
        if lo < len(reads):
            tail = yield from _framed(reader, st, reads[lo:], times[lo:], t_sent, collect, step_bytes)
        reader.finish(st, tail)
        if st.usage is not None and st.ended:  # (a stream cut short may hold a count of its start: Anthropic's)
            st.usage = against_stream(st.usage, st.events, st.usage_parts)
    except Exception as exc:  # a flavour's own bug must not kill the session: the call fails, classified
        st.bad(f"the stream could not be read ({type(exc).__name__}: {exc})")
        if st.usage is None:
            st.usage = Usage()
    yield st


def _ends_events(read: bytes) -> bool:
    return read[-2:] == b"\n\n" and b"\r" not in read


def _framed(
    reader: StreamReader,
    st: StreamState,
    reads: Sequence[bytes],
    times: Sequence[float],
    t_sent: float,
    collect: bool,
    step_bytes: int,
) -> Generator[StreamState, None, bytes]:
    """Reads framed into regions (``sse.regions``) and classified; returns the bytes after the last blank line."""
    since_yield = 0
    batch: list[tuple[bytes, float]] = []  # consecutive regions (one per read, as hosts stream), classified together
    for region, t, complete in regions(reads, times):
        if not complete and not region.endswith(b"\n"):
            _batch(reader, st, batch, t_sent)
            return region
        since_yield += len(region)
        if collect:
            _region(reader, st, region, t, t_sent, collect, peel=True)
        else:
            batch.append((region, t))
        if len(batch) >= BATCH_REGIONS or since_yield >= step_bytes:
            _batch(reader, st, batch, t_sent)
            batch = []
        if since_yield >= step_bytes:
            since_yield = 0
            yield st
    _batch(reader, st, batch, t_sent)
    return b""


def _one_per_read(
    reader: StreamReader,
    st: StreamState,
    reads: Sequence[bytes],
    times: Sequence[float],
    lo: int,
    hi: int,
    t_sent: float,
    step_bytes: int,
) -> Generator[StreamState, None, int]:
    """Reads ``lo``..``hi`` of a host that writes one event per read (as most do), counted a slice at a time
    without framing: a slice whose reads each end with a blank line and whose events, joined, are plain deltas
    as many as its reads, holds one per read. Returns where it stopped: the framing state is clean there (the
    read before ended an event), so ``_framed`` takes over from that read."""
    empty = reader.EMPTY_DELTA
    ends = np.cumsum(np.fromiter(map(len, reads[lo:hi]), np.int64, hi - lo))  # each read's end, from ``lo``'s start
    first = lo
    while lo < hi:
        base = int(ends[lo - first - 1]) if lo > first else 0
        end = min(hi, first + int(np.searchsorted(ends, base + step_bytes)) + 1)  # about ``step_bytes`` of reads
        part = reads[lo:end]
        joined = b"".join(part)
        if b"\r" in joined or not delta_template.each_ends_an_event(joined, ends[lo - first : end - first] - base):
            return lo
        counted = plain_events(reader, joined[:-2])
        if counted is None or counted[0] != end - lo:
            return lo
        if counted[1] == counted[0]:
            st.add_reads(times[lo:end], t_sent)
        else:  # some reads were empty deltas, which only a flavour with an EMPTY_DELTA counts apart
            assert empty is not None
            st.add_reads([t for r, t in zip(part, times[lo:end], strict=True) if empty not in r], t_sent)
        lo = end
        yield st
    return lo


def _batch(reader: StreamReader, st: StreamState, batch: list[tuple[bytes, float]], t_sent: float) -> None:
    """Regions of consecutive reads, in order. A host that writes one event per read gives one region per token:
    joined, they are counted by bytes at once (each read still gets its own time and count); where the join fails
    (the role, finish and usage events), each half is tried, down to single regions (``_region``)."""
    empty = reader.EMPTY_DELTA
    if len(batch) > 1 and empty is not None:
        joined = b"\n\n".join(region for region, _ in batch)
        if len(joined) <= BIG_EVENT and plain_count(reader, joined) is not None:
            for region, t in batch:
                n = (region.count(b"\n\n") + 1 if b"\n\n" in region else 1) - (
                    region.count(empty) if empty in region else 0
                )
                if n:
                    st.add(t, t_sent, n, True)
            return
        half = len(batch) // 2
        _batch(reader, st, batch[:half], t_sent)
        _batch(reader, st, batch[half:], t_sent)
        return
    for region, t in batch:
        _region(reader, st, region, t, t_sent, False, peel=True)


def _region(
    reader: StreamReader, st: StreamState, region: bytes, t: float, t_sent: float, collect: bool, peel: bool
) -> None:
    """A region's events, counted by bytes where they are plain deltas and classified one by one elsewhere.

    A whole answer in one read is one region whose first event (the role) and last ones (finish reason, usage,
    ``[DONE]``) are not plain deltas, so the region as a whole fails the byte count: those events are peeled off
    and classified one by one, and the rest is counted again; where that fails too, each half is tried in turn
    (every event keeps its order, and all share the read's time, so the figures are those of one event at a
    time)."""
    n = None if collect or len(region) > BIG_EVENT else plain_count(reader, region)
    if n is not None:
        if n:
            st.add(t, t_sent, n, True)
        return
    parts = None if collect or len(region) < SPLIT_BYTES else _pieces(region, peel)
    if parts is None:
        _events(reader, st, region, t, t_sent, collect)
        return
    for i, part in enumerate(parts):
        if part:
            if peel and i != 1:  # the peeled first and last events: one by one
                _events(reader, st, part, t, t_sent, collect)
            else:
                _region(reader, st, part, t, t_sent, collect, peel=False)


def _pieces(region: bytes, peel: bool) -> tuple[bytes, ...] | None:
    """(the first event, the middle, the last ``PEEL_LAST``) when ``peel``, else two halves at an event boundary;
    None when the region cannot be cut so."""
    if peel:
        first, last = region.find(b"\n\n"), len(region)
        for _ in range(PEEL_LAST):
            last = region.rfind(b"\n\n", 0, last)
        if 0 <= first < last:
            return region[:first], region[first + 2 : last], region[last + 2 :]
        return None
    cut = region.find(b"\n\n", len(region) // 2)
    if cut < 0:
        cut = region.rfind(b"\n\n", 0, len(region) // 2)
    return None if cut < 0 else (region[:cut], region[cut + 2 :])


def _events(reader: StreamReader, st: StreamState, region: bytes, t: float, t_sent: float, collect: bool) -> None:
    for block in split_region(region):
        parsed = parse_block(block)
        if parsed is None:
            continue
        name, data = parsed
        kind = None if collect or name == b"error" or len(data) > BIG_EVENT else reader.scan(name, data)
        if kind is not None and not delta_template.one_json_object(data):
            kind = None  # the scan reads JSON's bytes: anything else is decoded (and found malformed)
        if kind is None:
            kind = reader.decode(st, name, data)
            if name == b"error":  # the host says the call failed, whatever the event's data holds
                st.error = st.error or excerpt(data) or "an error event"
                kind = NONE
        if kind:
            st.add(t, t_sent, 1, kind == ANSWER)


def interpret(
    reader: StreamReader, reads: Sequence[bytes], times: Sequence[float], t_sent: float, collect: bool = False
) -> StreamState:
    """``interpret_steps`` run to its end (tests, small answers)."""
    *_, st = interpret_steps(reader, reads, times, t_sent, collect)
    return st
