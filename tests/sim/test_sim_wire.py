"""Wire bytes: one event per token, reasoning first, text that re-tokenises to the reported count."""

import orjson
import pytest

from replay.sim.server.exchange import Timings
from replay.sim.wire.anthropic import MessagesStream
from replay.sim.wire.openai import (
    DONE,
    ChatStream,
    CompletionStream,
    Counts,
    completion_body,
    piece_text,
    usage,
)
from replay.workload.tokens import count_tokens


def events(raw: bytes) -> list[dict]:
    assert raw.endswith(b"\n\n")
    out = []
    for block in raw[:-2].split(b"\n\n"):
        assert block.startswith(b"data: ")
        out.append(orjson.loads(block[6:]))
    return out


@pytest.mark.parametrize("n", [1, 15, 16, 17, 100, 1000])
def test_piece_text_is_n_tokens(n):
    assert count_tokens(piece_text(0, n)) == n
    assert count_tokens(piece_text(7, n)) == n


@pytest.mark.parametrize(("start", "count", "reasoning"), [(0, 1, 0), (0, 40, 10), (5, 3, 6), (9, 33, 0), (3, 20, 100)])
def test_token_events_split_reasoning_then_content(start, count, reasoning):
    stream = ChatStream('chatcmpl-"x"', "m@@piece@@", 123)
    parsed = events(stream.tokens(start, count, reasoning))
    assert len(parsed) == count
    deltas = [e["choices"][0]["delta"] for e in parsed]
    n_reasoning = min(max(reasoning - start, 0), count)
    assert all(list(d) == ["reasoning_content"] for d in deltas[:n_reasoning])
    assert all(list(d) == ["content"] for d in deltas[n_reasoning:])
    assert "".join(next(iter(d.values())) for d in deltas) == piece_text(start, count)
    assert {(e["id"], e["model"], e["object"], e["created"]) for e in parsed} == {
        ('chatcmpl-"x"', "m@@piece@@", "chat.completion.chunk", 123)
    }
    assert all(e["choices"][0]["finish_reason"] is None for e in parsed)


def test_role_and_closing_events():
    stream = ChatStream("id", "m", 1, include_usage=True)
    (role,) = events(stream.opening(Counts(10, 4, 0, 0)))
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    closing = stream.closing(Counts(10, 4, 3, 1), "length", Timings())
    assert closing.endswith(DONE)
    finish, usage_chunk = events(closing[: -len(DONE)])
    assert finish["choices"] == [{"index": 0, "delta": {}, "finish_reason": "length"}]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["total_tokens"] == 13
    assert usage_chunk["usage"]["prompt_tokens_details"] == {"cached_tokens": 4}
    unasked = ChatStream("id", "m", 1).closing(Counts(10, 4, 3, 1), "length", Timings())
    assert len(events(unasked[: -len(DONE)])) == 1
    assert len(events(stream.closing(Counts(10, 4, 3, 1), "stop", Timings(), with_usage=False)[: -len(DONE)])) == 1


def test_completion_body():
    body = orjson.loads(completion_body("id", "m", 1, 10, 3, usage(5, 0, 10, 3)))
    message = body["choices"][0]["message"]
    assert message["reasoning_content"] == piece_text(0, 3)
    assert message["content"] == piece_text(3, 7)
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 3}


def named_events(raw: bytes) -> list[tuple[str, dict]]:
    out = []
    for block in raw.split(b"\n\n")[:-1]:
        name, data = block.split(b"\n")
        out.append((name[7:].decode(), orjson.loads(data[6:])))
    return out


def test_anthropic_stream_without_reasoning_has_one_text_block():
    stream = MessagesStream("msg_1", "m", reasoning=0)
    raw = stream.opening(Counts(100, 64, 0, 0, 16)) + stream.tokens(0, 3, 0) + stream.tokens(3, 2, 0)
    raw += stream.closing(Counts(100, 64, 5, 0, 16), "stop", Timings())
    events = named_events(raw)
    assert [k for k, _ in events] == ["message_start", "content_block_start", *["content_block_delta"] * 5,
                                      "content_block_stop", "message_delta", "message_stop"]  # fmt: skip
    assert events[0][1]["message"]["usage"] == {
        "input_tokens": 20, "cache_creation_input_tokens": 16, "cache_read_input_tokens": 64, "output_tokens": 1,
    }  # fmt: skip
    assert "".join(d["delta"]["text"] for k, d in events if k == "content_block_delta") == piece_text(0, 5)
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn" and events[-2][1]["usage"] == {"output_tokens": 5}


def test_completion_stream_and_malformed_events():
    stream = CompletionStream("cmpl-1", "m", 1, include_usage=True)
    parsed = events(stream.tokens(0, 4, 0))
    assert "".join(e["choices"][0]["text"] for e in parsed) == piece_text(0, 4)
    closing = stream.closing(Counts(9, 0, 4, 0), "length", Timings())
    finish, usage_chunk = events(closing[: -len(DONE)])
    assert finish["choices"][0]["finish_reason"] == "length" and usage_chunk["usage"]["completion_tokens"] == 4
    for wire in (stream, ChatStream("c", "m", 1), MessagesStream("m", "m", 0)):
        bad = wire.malformed()
        assert bad.endswith(b"\n\n") and b"data: {" in bad
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(bad.split(b"data: ", 1)[1])
