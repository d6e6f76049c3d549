"""SSE framing: events must come out the same whatever the read boundaries were."""

from __future__ import annotations

import itertools

from replay.clients.sse import split_events

STREAM = (
    b": keep-alive\n\n"
    b'data: {"a": 1}\n\n'
    b'data: {"b": 2}\r\n\r\n'
    b'event: message_start\ndata: {"c": 3}\n\n'
    b'data: {"d":\ndata: 4}\n\n'
    b"data: [DONE]\n\n"
)
EXPECTED = [b'{"a": 1}', b'{"b": 2}', b'{"c": 3}', b'{"d":\n4}', b"[DONE]"]


def test_events_in_one_read() -> None:
    events, leftover = split_events([STREAM], [1.0])
    assert [e.data for e in events] == EXPECTED
    assert events[2].name == b"message_start"
    assert leftover == b""


def test_every_single_split_point_gives_the_same_events() -> None:
    for cut in range(1, len(STREAM)):
        events, leftover = split_events([STREAM[:cut], STREAM[cut:]], [1.0, 2.0])
        assert [e.data for e in events] == EXPECTED, cut
        assert leftover == b""


def test_event_split_across_reads_is_stamped_with_the_read_that_completed_it() -> None:
    first = b'data: {"a": 1}\n\ndata: {"b"'
    second = b": 2}\n\n"
    events, _ = split_events([first, second], [1.0, 2.0])
    assert [(e.data, e.t) for e in events] == [(b'{"a": 1}', 1.0), (b'{"b": 2}', 2.0)]


def test_byte_by_byte_reads() -> None:
    reads = [STREAM[i : i + 1] for i in range(len(STREAM))]
    events, _ = split_events(reads, [float(i) for i in range(len(reads))])
    assert [e.data for e in events] == EXPECTED
    # each event is stamped with the read holding its terminating blank line
    ends = list(itertools.accumulate(len(r) for r in reads))
    assert events[-1].t == float(ends.index(len(STREAM)))


def test_cr_split_from_lf_across_reads() -> None:
    events, _ = split_events([b'data: {"x": 1}\r', b"\n\r\n"], [1.0, 2.0])
    assert [e.data for e in events] == [b'{"x": 1}']


def test_incomplete_last_event_is_reported_as_leftover() -> None:
    events, leftover = split_events([b'data: {"a": 1}\n\ndata: {"tru'], [1.0])
    assert [e.data for e in events] == [b'{"a": 1}']
    assert leftover == b'data: {"tru'


def test_final_event_without_blank_line_is_kept() -> None:
    events, leftover = split_events([b'data: {"a": 1}\n\ndata: [DONE]\n'], [1.0])
    assert [e.data for e in events] == [b'{"a": 1}', b"[DONE]"]
    assert leftover == b""
