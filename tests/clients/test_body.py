"""Bodies as pieces: what they join to, what is shared rather than copied, how they are written.

The bytes a host receives are checked against the bodies sent before issue 14 in ``test_request_bodies.py``; here,
the pieces themselves: long messages and long texts are the bytes the workload keeps (the same objects), and the
writes the transport sees add up to the body in bounded pieces.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.clients.body import BATCH, SHARED, WRITE_MAX, Body, BodyPayload, joined
from replay.clients.client import FLAVOURS
from replay.clients.flavours import base as flavour_mod
from replay.clients.flavours.anthropic import AnthropicFlavour
from replay.clients.flavours.base import RequestOptions
from replay.workload.spans import content_view
from replay.workload.trajectory import Message, MessageBuilder

BIG = b"x" * (3 * WRITE_MAX + 17)


def _message(raw: dict[str, Any]) -> Message:
    return MessageBuilder(tokenizer=mock.Mock(encode=lambda text: [0] * len(text))).message(raw)


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


def test_a_long_text_is_shared_with_the_messages_chat_bytes_in_every_flavour() -> None:
    text = 'the "bug" \\ in\nparser.py é 😀 ' * 400
    for raw in ({"role": "user", "content": text}, {"role": "system", "content": text},
                {"role": "tool", "tool_call_id": "c1", "content": text}):  # fmt: skip
        for api in ("completions", "responses", "anthropic"):
            message = _message(raw)
            fl = FLAVOURS[api](RequestOptions(model="m"))
            frag = fl.fragment(message)
            assert isinstance(frag, tuple) and frag[1].obj is message.wire, (api, raw["role"])
            assert b"".join(frag) == fl.render_message(message.raw)
    assert flavour_mod.SHARED_TEXT >= SHARED  # a shared text is a piece of its own in a body, never copied into a run
    short = _message({"role": "user", "content": "short"})
    assert isinstance(FLAVOURS["completions"](RequestOptions(model="m")).fragment(short), bytes)


def test_a_message_whose_bytes_are_escaped_otherwise_is_rendered_not_shared() -> None:
    wire = b'{"role":"user","content":"caf\\u00e9 ' + b"x" * 5000 + b'"}'  # orjson would write the é itself
    message = Message(wire, 10, role="user")
    assert content_view(wire, message.raw["content"]) is None
    frag = FLAVOURS["completions"](RequestOptions(model="m")).fragment(message)
    assert frag == FLAVOURS["completions"](RequestOptions(model="m")).render_message(message.raw)


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)
_RAW = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": _TEXT},
    optional={"tool_call_id": st.text(max_size=5), "name": _TEXT},
)


@settings(max_examples=300, deadline=None)
@given(raw=_RAW)
def test_a_shared_fragment_is_byte_for_byte_the_rendered_one(raw: dict[str, Any]) -> None:
    with mock.patch.object(flavour_mod, "SHARED_TEXT", 1):
        for api in ("completions", "responses", "anthropic"):
            message = _message(raw)
            fl = FLAVOURS[api](RequestOptions(model="m"))
            frag = fl.fragment(message)
            assert isinstance(frag, tuple)
            assert b"".join(frag) == fl.render_message(message.raw), api
        anthropic = AnthropicFlavour(RequestOptions(model="m", cache_control="auto"))
        marked = anthropic.render_fragment(message, marked=True)
        assert b"".join(marked) == anthropic.render_marked(message.raw)
