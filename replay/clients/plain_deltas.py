"""Plain token deltas counted by bytes: whether a region of complete events holds only plain answer deltas,
and how many, without decoding them (``plain_events``; ``templated`` when its events are copies of one framing, as one
host writes them). A framing is judged once, by the flavour's byte counts and its full decode together.
"""

from __future__ import annotations

from replay.clients import delta_template
from replay.clients.sse import parse_block
from replay.clients.stream_state import ANSWER, NONE, StreamReader, StreamState


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
