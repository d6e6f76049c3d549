"""Bodies as pieces: what they join to, what is kept rather than copied, how they are written.

The bytes a host receives are checked against the bodies sent before issue 14 in ``test_request_bodies.py``; here,
the pieces themselves: long messages are the bytes the workload keeps (the same objects), and the writes the
transport sees add up to the body in bounded pieces.
"""

from __future__ import annotations

import pytest

from replay.clients.body import BATCH, SHARED, WRITE_MAX, Body, BodyPayload, joined

BIG = b"x" * (3 * WRITE_MAX + 17)


class Writer:
    """What aiohttp's stream writer is handed."""

    def __init__(self) -> None:
        self.writes: list[bytes | memoryview] = []

    async def write(self, chunk: bytes | memoryview) -> None:
        self.writes.append(chunk)


def test_long_pieces_are_kept_and_short_ones_joined_between_them() -> None:
    mid = b"m" * SHARED
    parts = [b"a", b"b", mid, (b"<", memoryview(BIG)[5:], b">"), b"c"]
    pieces: list[bytes | memoryview] = [b"["]
    joined(pieces, parts)
    body = Body([*pieces, b"]"])
    expected = b"[" + b",".join([b"a", b"b", mid, b"<" + BIG[5:] + b">", b"c"]) + b"]"
    assert bytes(body) == expected and body.size == len(expected)
    assert any(p is mid for p in body.pieces)  # the same object, not a copy
    assert any(isinstance(p, memoryview) and p.obj is BIG for p in body.pieces)
    assert b"a,b," in body.pieces and b">,c" in body.pieces  # short neighbours joined into one piece each


def test_an_empty_separator_adds_no_pieces() -> None:
    pieces: list[bytes | memoryview] = []
    joined(pieces, [b"a", b"b"], b"")
    assert pieces == [b"ab"]


def test_fields_go_before_the_closing_brace_and_the_rest_is_shared() -> None:
    body = Body([b'{"model":"m",', BIG, b',"stream":true}'])
    out = body.with_fields(b'"user":"7"')
    assert bytes(out) == b'{"model":"m",' + BIG + b',"stream":true,"user":"7"}'
    assert out.pieces[1] is BIG
    with pytest.raises(ValueError):
        Body([b"[1]"]).with_fields(b'"a":1')


async def test_the_payload_writes_the_body_in_bounded_writes_without_copying_long_pieces() -> None:
    small = [bytes([65 + i % 26]) * 1000 for i in range(300)]  # 300 KB of short pieces
    body = Body([b"{", *small, BIG, b"}", *small[:3]])
    writer = Writer()
    payload = BodyPayload(body)
    assert payload.size == body.size
    await payload.write(writer)  # type: ignore[arg-type]
    assert b"".join(writer.writes) == bytes(body)
    assert all(len(w) <= max(WRITE_MAX, BATCH + 1000) for w in writer.writes)
    assert sum(isinstance(w, memoryview) and w.obj is BIG for w in writer.writes) == 4  # BIG in 4 views
    again = Writer()
    await payload.write(again)  # type: ignore[arg-type]
    assert b"".join(again.writes) == bytes(body)  # a payload can be sent again (resends, retries)
