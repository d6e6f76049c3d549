"""What a hostile or broken host streams ends as the verdict a full decode gives, in every flavour and every way the
bytes were cut (issue 25: items 3, 4 and the stream items of 11). Each case is read by the fast paths and by the
full decode (``collect``), in one read, one event per read and two reads cut at every byte."""

from __future__ import annotations

import pytest

from replay.clients.client import FLAVOURS
from replay.clients.flavours.base import RequestOptions
from replay.clients.stream import interpret
from tests.support.hostile import answer, sse

APIS = sorted(FLAVOURS)


def _outcomes(api: str, data: bytes, focus: bytes = b"") -> set[tuple[str | None, int]]:
    """(error class, token events) of ``data`` however it is read: in one read, one event per read, and two reads
    cut at each event boundary and at every byte of ``focus`` (the damaged part); one element when all agree."""
    flavour = FLAVOURS[api](RequestOptions(model="m"))
    points = {k for at in _all(data, b"\n\n") for k in range(at - 1, at + 3)}
    if focus:
        start = data.find(focus)
        points.update(range(start, start + len(focus) + 1))
    splits = [[data], [b + b"\n\n" for b in data.split(b"\n\n")[:-1]]]
    splits += [[data[:k], data[k:]] for k in sorted(points) if 0 < k < len(data)]
    seen = set()
    for reads in splits:
        for collect in (False, True):
            st = interpret(flavour, reads, [float(i + 1) for i in range(len(reads))], 0.0, collect)
            failed = flavour.outcome(st, b"")
            seen.add((failed[0] if failed else None, st.events))
    return seen


def _all(data: bytes, sub: bytes) -> list[int]:
    out, at = [], data.find(sub)
    while at >= 0:
        out.append(at)
        at = data.find(sub, at + 1)
    return out


def _delta_index(api: str) -> int:
    return 1 if api == "anthropic" else 0  # the first text delta of ``answer``


def _damage(api: str, how: str) -> tuple[bytes, bytes]:
    """A long answer with one of its deltas damaged ``how``, and that delta."""
    parts = answer(api, tokens=16)
    i = _delta_index(api) + 9
    event = parts[i]
    if how == "trailing":  # bytes after the object
        parts[i] = event[:-2] + b" x\n\n"
    elif how == "utf8":  # invalid UTF-8 in the text
        parts[i] = event.replace(b'"x"', b'"\xff\xfe"')
    elif how == "control":  # a raw control character in the text
        parts[i] = event.replace(b'"x"', b'"a\x01b"')
    elif how == "cut":  # the object cut short
        parts[i] = event[:-5] + b"\n\n"
    elif how == "newline":  # a raw newline inside the object: two lines, the second no field
        parts[i] = event.replace(b'"x"', b'"a\nb"')
    return b"".join(parts), parts[i]


@pytest.mark.parametrize("how", ["trailing", "utf8", "control", "cut", "newline"])
@pytest.mark.parametrize("api", APIS)
def test_an_event_that_is_not_json_fails_the_call_however_it_is_read(api: str, how: str) -> None:
    data, damaged = _damage(api, how)
    assert _outcomes(api, data, damaged) == {("malformed_stream", 15)}


def test_a_cut_chat_stream_with_usage_on_every_chunk_is_incomplete() -> None:
    """vLLM's continuous_usage_stats (and some gateways): usage on every chunk, so a stream cut mid-answer still
    carries usage; only a finish reason with usage (or [DONE]) ends it."""
    for api, key in (("chat", {"delta": {"content": "x"}}), ("completions", {"text": "x"})):

        def usage(n: int) -> dict:  # the counts so far, as vLLM sends them on each chunk
            return {"prompt_tokens": 9, "completion_tokens": n, "total_tokens": 9 + n}

        chunks = [sse({"choices": [{"index": 0, **key, "finish_reason": None}], "usage": usage(i + 1)})
                  for i in range(12)]  # fmt: skip
        assert _outcomes(api, b"".join(chunks), chunks[-1]) == {("incomplete", 12)}
        done = {"delta": {}, "finish_reason": "stop"} if api == "chat" else {"text": "", "finish_reason": "stop"}
        whole = b"".join(chunks) + sse({"choices": [{"index": 0, **done}], "usage": usage(12)})  # no [DONE]: ended
        assert _outcomes(api, whole) == {(None, 12)}


@pytest.mark.parametrize("api", APIS)
def test_a_byte_order_mark_at_the_start_is_no_part_of_the_first_event(api: str) -> None:
    plain = b"".join(answer(api, tokens=12))
    assert _outcomes(api, b"\xef\xbb\xbf" + plain, plain[:40]) == _outcomes(api, plain) == {(None, 12)}


@pytest.mark.parametrize("api", APIS)
def test_an_error_event_fails_the_call_whatever_its_data(api: str) -> None:
    parts = answer(api, tokens=12)
    for data in (b'{"message":"overloaded"}', b"{}", b"not json", parts[_delta_index(api)].split(b"data: ")[1][:-2]):
        damaged = [*parts[:6], sse(data, "error"), *parts[6:]]
        assert {cls for cls, _ in _outcomes(api, b"".join(damaged))} == {"stream_error"}, data


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_an_empty_error_object_fails_the_call(api: str) -> None:
    parts = answer(api, tokens=12)
    for error in ({}, "", [], 0):
        damaged = [*parts[:4], sse({"error": error}), *parts[4:]]
        assert {cls for cls, _ in _outcomes(api, b"".join(damaged))} == {"stream_error"}, error
    harmless = [*parts[:4], sse({"error": None, "choices": []}), *parts[4:]]
    assert _outcomes(api, b"".join(harmless)) == {(None, 12)}


@pytest.mark.parametrize("api", APIS)
def test_tokens_after_the_end_marker_fail_the_call(api: str) -> None:
    parts = answer(api, tokens=12)
    delta = parts[_delta_index(api)]
    assert {cls for cls, _ in _outcomes(api, b"".join([*parts, delta, delta]), delta)} == {"malformed_stream"}


@pytest.mark.parametrize("api", APIS)
def test_the_fixtures_are_plain_answers(api: str) -> None:
    assert _outcomes(api, b"".join(answer(api, tokens=12))) == {(None, 12)}
