"""Wire bytes: one event per token, reasoning first, text that re-tokenises to the reported count."""

import orjson
import pytest

from replay.sim.wire import DONE, ChatStream, completion_body, piece_text, usage
from replay.tokens import count_tokens


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
    stream = ChatStream("id", "m", 1)
    (role,) = events(stream.role())
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    closing = stream.finish(usage(10, 4, 3, 1))
    assert closing.endswith(DONE)
    finish, usage_chunk = events(closing[: -len(DONE)])
    assert finish["choices"] == [{"index": 0, "delta": {}, "finish_reason": "length"}]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["total_tokens"] == 13
    assert usage_chunk["usage"]["prompt_tokens_details"] == {"cached_tokens": 4}
    assert len(events(stream.finish(None)[: -len(DONE)])) == 1


def test_completion_body():
    body = orjson.loads(completion_body("id", "m", 1, 10, 3, usage(5, 0, 10, 3)))
    message = body["choices"][0]["message"]
    assert message["reasoning_content"] == piece_text(0, 3)
    assert message["content"] == piece_text(3, 7)
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 3}
