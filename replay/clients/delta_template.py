"""Token deltas that are copies of one framing: a host writes every delta of a stream with the same bytes around
its text, so a run of them is checked in a few vectorised passes instead of a dozen ``bytes.count`` passes.

``split`` cuts an event into the framing before its text (``head``, ending with the text's key) and after it
(``tail``, from its closing quote). ``copies`` then says whether a whole region is such copies: every event boundary
must be ``tail``, a blank line and ``head``, and every quote and newline must be the framing's, so a text holds only
escaped quotes and no raw newline (no event can hide another field or event in its text), and each text must be a
JSON string as it stands (valid escapes, no raw control character, UTF-8). Whether the framing itself is a plain
delta is the caller's judgement (``stream.templated``): this module only reads bytes. Deltas that differ in more
than their text are counted by the flavour's byte counts, which hold only for events that are JSON:
``json_objects`` says whether they all are, in one parse.
"""

from __future__ import annotations

import numpy as np
import orjson

NUMPY_BYTES = 4096  # shorter regions are counted with bytes.count (numpy's fixed cost is a few µs)


def split(event: bytes, key: bytes) -> tuple[bytes, bytes, bool] | None:
    """(head, tail, whether the text is not empty) of one event around the text under ``key``; None without one."""
    at = event.find(key)
    if at < 0:
        return None
    head_end = at + len(key)
    close = event.find(b'"', head_end)
    while close > 0 and _escaped(event, close):  # an escaped quote inside the text
        close = event.find(b'"', close + 1)
    if close < 0:
        return None
    return event[:head_end], event[close:], close > head_end


def copies(region: bytes, key: bytes, head: bytes, tail: bytes) -> tuple[int, int] | None:
    """(events, events with a text) when every event of ``region`` is ``head``, a JSON string's text, ``tail``;
    else None."""
    if key in tail or not region.endswith(tail):
        return None
    counts, head_counts, tail_counts = (
        _quotes_and_newlines(region),
        _quotes_and_newlines(head),
        _quotes_and_newlines(tail),
    )
    if counts is None or head_counts is None or tail_counts is None or _escapes_a_tail(region, tail):
        return None
    events = region.count(tail + b"\n\n" + head) + 1
    (quotes, newlines, escaped), (head_q, head_n, head_e), (tail_q, tail_n, tail_e) = counts, head_counts, tail_counts
    if newlines != 2 * (events - 1) + events * (head_n + tail_n):
        return None
    if quotes - events * (head_q + tail_q) != escaped - events * (head_e + tail_e):  # the texts' quotes: all escaped
        return None
    return events, events - region.count(head + b'"')


def json_objects(region: bytes, events: int) -> bool:
    """Whether each of the ``events`` events of ``region`` is one JSON object, as a full decode reads them: trailing
    bytes, invalid UTF-8, a raw control character, an object cut short are not, and neither is an event of two lines
    that a decode would read as two. Each event is a ``data:`` line, or one after the same ``event:`` line as the
    first's (a run of one delta type): their data, joined by commas, is one parse (anything else: False)."""
    if region[:6] == b"data: ":
        body = region[6:].replace(b"\n\ndata: ", b",")
    else:
        prefix = region[: region.find(b"\n") + 1] + b"data: "
        if prefix[:6] != b"event:" or not region.startswith(prefix):
            return False
        body = region[len(prefix) :].replace(b"\n\n" + prefix, b",")
    if b"\n" in body:
        return False
    try:
        items = orjson.loads(b"[" + body + b"]")
    except orjson.JSONDecodeError:
        return False
    return len(items) == events and all(type(item) is dict for item in items)


def one_json_object(data: bytes) -> bool:
    """Whether an event's data is one JSON object (a byte scan's verdict stands only then)."""
    try:
        return type(orjson.loads(data)) is dict
    except orjson.JSONDecodeError:
        return False


def each_ends_an_event(joined: bytes, ends: np.ndarray) -> bool:
    """Whether every read (``ends``: where each ends in ``joined``) ends with a blank line, in one vectorised look."""
    if ends.size == 0 or ends[0] < 2 or (np.diff(ends) < 2).any():
        return False
    a = np.frombuffer(joined, np.uint8)
    return bool((a[ends - 1] == 10).all() and (a[ends - 2] == 10).all())


def _escapes_a_tail(region: bytes, tail: bytes) -> bool:
    """Whether a text ends in an escaping backslash, so the quote that opens the framing after it is escaped (the
    count of quotes would not see it). Texts ending in a backslash are rare: they are looked at one by one."""
    at = region.find(b"\\" + tail)
    while at >= 0:
        if _escaped(region, at + 1):
            return True
        at = region.find(b"\\" + tail, at + 1)
    return False


def _escaped(data: bytes, at: int) -> bool:
    """Whether the byte at ``at`` is escaped: an odd run of backslashes before it."""
    run = 0
    while at - run - 1 >= 0 and data[at - run - 1] == 92:
        run += 1
    return run % 2 == 1


def _quotes_and_newlines(region: bytes) -> tuple[int, int, int] | None:
    """(quotes, newlines, escaped quotes) in ``region``, or None when a text could not be a JSON string as it stands:
    an escape JSON does not have, a raw control character, bytes that are not UTF-8. A short region without a
    backslash is counted with ``bytes.count``; others with vectorised compares (a third of the cost of
    ``bytes.count`` on a whole answer), where a run of backslashes escapes in pairs (``\\\\`` is one escape)."""
    if len(region) < NUMPY_BYTES and b"\\" not in region:
        if region.translate(None, _CONTROLS) != region or (not region.isascii() and not _utf8(region)):
            return None
        return region.count(b'"'), region.count(b"\n"), 0
    a = np.frombuffer(region, np.uint8)
    newlines = int(np.count_nonzero(a == 10))
    if int(np.count_nonzero(a < 32)) != newlines or (not region.isascii() and not _utf8(region)):
        return None
    escaped = 0
    slashes = np.flatnonzero(a == 92)
    if slashes.size:
        order = np.arange(slashes.size)
        run_start = np.maximum.accumulate(np.where(np.diff(slashes, prepend=-2) != 1, order, 0))
        escapes = slashes[(order - run_start) % 2 == 0]  # the backslashes that escape the byte after them
        if escapes[-1] == a.size - 1:
            return None
        after = a[escapes + 1]
        hex_at = escapes[after == 117][:, None] + np.arange(2, 6)  # \uXXXX
        if not _ESCAPES[after].all() or (hex_at.size and (hex_at[-1, -1] >= a.size or not _HEX[a[hex_at]].all())):
            return None
        escaped = int(np.count_nonzero(after == 34))
    return int(np.count_nonzero(a == 34)), newlines, escaped


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


_CONTROLS = bytes(c for c in range(32) if c != 10)
_ESCAPES = np.zeros(256, bool)
_ESCAPES[list(b'"\\/bfnrtu')] = True
_HEX = np.zeros(256, bool)
_HEX[list(b"0123456789abcdefABCDEF")] = True
