"""A finished stream read into figures: the part every API flavour shares.

The per-read path kept a timestamp and the bytes of each read. Here, after the stream closed, the bytes are framed
into events (``sse.regions``) and each flavour classifies them: a region whose events are all plain token deltas is
counted with a few byte counts (``templated``, when the events share their framing as one host writes them, else
``StreamReader.plain_tokens``); other events get a byte scan (``scan``), and only
those that carry a figure or look unusual are decoded (``decode``). Whatever the bytes, this never raises: an event a
flavour cannot understand marks the stream ``malformed``, and a flavour's own bug is caught here and reported the
same way, so a call always ends as one classified record.

Interpretation is a generator that yields every ``YIELD_BYTES`` of input, so the transport can let the event loop
run other streams while a huge answer is read.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replay.clients import delta_template
from replay.clients.sse import parse_block, regions, split_region, without_bom
from replay.clients.usage import Usage, excerpt

NONE, REASONING, ANSWER = 0, 1, 2  # what an event carries
YIELD_BYTES = 1 << 20
# Byte scans make several passes over an event; past this size one JSON decode (a single pass) is cheaper.
BIG_EVENT = 1 << 20
# A region this short is classified event by event; a longer one that fails the byte count is cut (``_region``).
SPLIT_BYTES = 2048
PEEL_LAST = 3  # a stream's last events: the finish reason, the usage, ``[DONE]``
MIN_RUN = 8  # reads of token deltas at least, for ``_one_per_read``
BATCH_REGIONS = 64  # regions (reads) classified together by ``_batch``


@dataclass(slots=True)
class StreamState:
    """What a stream said, as its events were classified."""

    first_token: float | None = None
    first_answer: float | None = None
    last_token: float | None = None
    events: int = 0  # token-bearing events
    chunks: list[float] = field(default_factory=list)  # flat [dt, n, ...]: token-bearing reads after t_sent
    usage_parts: list[Any] = field(default_factory=list)  # the usage objects as the host sent them, in order
    usage: Usage | None = None  # checked counts, made by the flavour at the end
    finish_reason: str | None = None
    ended: bool = False  # the flavour's end-of-stream marker was seen
    error: str | None = None  # the host said the call failed (an error event)
    malformed: str | None = None  # the first event that could not be understood
    served: dict[str, Any] = field(default_factory=dict)  # what the host says about itself (model, tier, ...)
    timings: Any = None  # server-side timings the host sent
    speculation: dict[str, int] | None = None  # accepted and drafted tokens, drafts, as the host reported them
    response_id: str | None = None
    text: list[str] | None = None  # answer text, when collected (live history, --check-answers)
    reasoning_text: list[str] | None = None
    # Tool calls as streamed, by the host's index: id, name and argument pieces. Always kept: their events are
    # decoded whatever the mode (no fast path counts them), so keeping them costs nothing more. Live history sends
    # them back; the answer checks judge them.
    calls: dict[Any, dict[str, Any]] | None = None
    notes: list[str] = field(default_factory=list)  # host values left out (implausible numbers), and why

    def add(self, t: float, t_sent: float, n: int, answer: bool) -> None:
        """Account ``n`` token-bearing events that arrived in the read at ``t``."""
        if self.ended:
            self.bad("tokens after the end of the stream")
        self.events += n
        if self.first_token is None:
            self.first_token = t
        if answer and self.first_answer is None:
            self.first_answer = t
        self.last_token = t
        dt = round((t - t_sent) * 1e6) / 1e6  # to the µs, exactly as ``add_reads`` rounds in bulk
        if self.chunks and self.chunks[-2] == dt:
            self.chunks[-1] += n
        else:
            self.chunks += (dt, n)

    def add_reads(self, times: Sequence[float], t_sent: float) -> None:
        """``add(t, t_sent, 1, True)`` for each of ``times`` (non-decreasing), in one go."""
        if not times:
            return
        if self.ended:
            self.bad("tokens after the end of the stream")
        self.events += len(times)
        if self.first_token is None:
            self.first_token = times[0]
        if self.first_answer is None:
            self.first_answer = times[0]
        self.last_token = times[-1]
        dts = np.rint((np.asarray(times) - t_sent) * 1e6) / 1e6  # (``round(x, 6)`` is 8x slower)
        starts = np.flatnonzero(np.diff(dts, prepend=np.nan) != 0)  # reads within one µs share a chunk
        counts = np.diff(starts, append=dts.size).tolist()
        values = dts[starts].tolist()
        ch = self.chunks
        if ch and ch[-2] == values[0]:
            ch[-1] += counts[0]
            values, counts = values[1:], counts[1:]
        flat: list[float] = [0.0] * (2 * len(values))
        flat[0::2] = values
        flat[1::2] = counts
        ch += flat

    def bad(self, problem: str, data: bytes | str = b"") -> None:
        """Note the first thing that could not be understood (the call then fails as ``malformed_stream``)."""
        if self.malformed is None:
            self.malformed = f"{problem}: {excerpt(data, 120)}" if data else problem

    def collect(self, answer: bool, text: Any) -> None:
        if isinstance(text, str):  # both lists are made together when the text is collected (live history)
            collected = self.text if answer else self.reasoning_text
            if collected is not None:
                collected.append(text)

    def call_part(self, index: Any, call_id: Any = None, name: Any = None, arguments: Any = None) -> None:
        """A piece of a streamed tool call: its id and name when they come, its arguments in pieces."""
        if self.calls is None:
            self.calls = {}
        key = index if isinstance(index, int | str) else repr(index)[:40]  # whatever the host sent as its index
        call = self.calls.setdefault(key, {"id": None, "name": "", "pieces": []})
        if isinstance(call_id, str) and call_id:
            call["id"] = call_id[:200]
        if isinstance(name, str) and name and not call["name"]:
            call["name"] = name[:200]
        if isinstance(arguments, str) and arguments:
            call["pieces"].append(arguments)

    def call_streamed(self, index: Any) -> bool:
        """Whether argument pieces of this call came before (a host that also sends them whole at the end)."""
        key = index if isinstance(index, int | str) else repr(index)[:40]
        return bool(self.calls and key in self.calls and self.calls[key]["pieces"])

    def tool_calls(self) -> list[dict[str, Any]]:
        """The collected tool calls, OpenAI-shaped, in the stream's order."""
        return [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": "".join(c["pieces"])}}
            for c in (self.calls or {}).values()
        ]


class StreamReader:
    """How one API flavour reads its stream. Subclasses override what their format needs."""

    def plain_tokens(self, region: bytes) -> int | None:
        """Answer tokens in a region of complete events if every event is a plain answer delta, else None."""
        return None

    EMPTY_DELTA: bytes | None = None  # the bytes of an empty plain delta, as ``plain_tokens`` discounts them

    def scan(self, name: bytes | None, data: bytes) -> int | None:
        """What an ordinary event carries, from its bytes alone (NONE / REASONING / ANSWER); None: decode it."""
        return None

    def decode(self, st: StreamState, name: bytes | None, data: bytes) -> int:
        """Decode one event, keep the figures it carries, and say what it carried."""
        raise NotImplementedError

    def finish(self, st: StreamState, tail: bytes) -> None:
        """After the last event: build ``st.usage`` from ``st.usage_parts`` and judge whether the stream ended."""
        raise NotImplementedError


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


def plain_count(reader: StreamReader, region: bytes) -> int | None:
    """Answer tokens in a region of complete events if every event is a plain answer delta, else None."""
    counted = plain_events(reader, region)
    return None if counted is None else counted[1]


def plain_events(reader: StreamReader, region: bytes) -> tuple[int, int] | None:
    """(events, answer tokens) of a region of complete events if every event is a plain answer delta, else None."""
    if reader.EMPTY_DELTA is not None:
        found = templated(region, reader)
        if found is not None:
            return None if found is FIRST_NOT_PLAIN else found  # (the flavour's count would fail too)
    last = region.rfind(b"\n\n")
    if last >= 0 and reader.plain_tokens(region[last + 2 :]) is None:
        return None  # the last event is no plain delta (a stream's end): no need to count the whole region
    if b"event: error\n" in region or b"event:error\n" in region:
        return None  # an error event, whatever its data: decoded
    n = reader.plain_tokens(region)
    events = region.count(b"\n\n") + 1
    # The byte counts judge events that are JSON; whether they are is one parse of them all (in C), not a decode each
    return None if n is None or not delta_template.json_objects(region, events) else (events, n)


FIRST_NOT_PLAIN = (-1, -1)  # ``templated``: the region's first event is no plain delta, so neither is the region


def templated(region: bytes, reader: StreamReader) -> tuple[int, int] | None:
    """(events, tokens) in ``region`` when its events are copies of its first event, a plain delta (as both the
    flavour's ``plain_tokens`` and its full decode judge it), that differ only in their text, else None
    (``delta_template``: a few vectorised passes where the flavour's own count needs a dozen). ``FIRST_NOT_PLAIN``
    when the first event is no plain delta (nor then the region)."""
    if reader.EMPTY_DELTA is None:  # a flavour without an empty delta has no template (``plain_events`` asks first)
        return None
    key = reader.EMPTY_DELTA[:-1]
    first_end = region.find(b"\n\n")
    if first_end < 0:
        return None  # one event: the flavour's own count is as cheap
    first = region[:first_end]
    split = delta_template.split(first, key)
    if split is None or not _plain_framing(reader, first, *split):
        return FIRST_NOT_PLAIN
    return delta_template.copies(region, key, split[0], split[1])


def _plain_framing(reader: StreamReader, first: bytes, head: bytes, tail: bytes, has_text: bool) -> bool:
    """``_plain_event`` of an event with this framing. What a decode finds in a delta depends on its framing and on
    whether its text is empty, not on the text (a valid JSON string: ``templated`` checks every one), so each
    framing is judged once: a stream's slices share it, and so do a host's streams."""
    key = (type(reader), head, tail, has_text)
    known = _FRAMINGS.get(key)
    if known is None:
        if len(_FRAMINGS) >= 512:
            _FRAMINGS.clear()
        known = _FRAMINGS[key] = _plain_event(reader, first, has_text)
    return known


_FRAMINGS: dict[tuple[type, bytes, bytes, bool], bool] = {}


def _plain_event(reader: StreamReader, event: bytes, has_text: bool) -> bool:
    """Whether one event is a plain delta both by the flavour's byte counts and by its full decode."""
    if reader.plain_tokens(event) != int(has_text):
        return False
    parsed = parse_block(event)
    if parsed is None or parsed[0] == b"error":
        return False
    st = StreamState()
    kind = reader.decode(st, *parsed)
    figures = (st.malformed, st.error, st.finish_reason, st.timings, st.ended, st.usage_parts, st.speculation)
    return kind == (ANSWER if has_text else NONE) and figures == (None, None, None, None, False, [], None)


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
