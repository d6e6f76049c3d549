"""Each API flavour reads its own stream into the same record fields, and checks the host's counts."""

from __future__ import annotations

import pytest

from replay.clients.flavours.anthropic import AnthropicFlavour
from replay.clients.flavours.base import RequestOptions
from replay.clients.flavours.chat import ChatFlavour
from replay.clients.flavours.completions import CompletionsFlavour
from replay.clients.flavours.responses import ResponsesFlavour
from replay.clients.stream import StreamState, interpret

OPTS = RequestOptions(model="m")


def sse(obj: dict, name: str | None = None) -> bytes:
    import json  # the standard encoder writes integers of any size, as a host's own code may

    head = f"event: {name}\n".encode() if name else b""
    return head + b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def read(flavour, parts: list[bytes]) -> tuple[StreamState, tuple[str, str] | None]:
    times = [float(i + 1) for i in range(len(parts))]
    st = interpret(flavour, parts, times, 0.0)
    return st, flavour.outcome(st, b"")


def anthropic_stream(usage_start: dict, usage_end: dict) -> list[bytes]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "usage": usage_start,
    }
    return [
        sse({"type": "message_start", "message": message}, "message_start"),
        sse({"type": "ping"}, "ping"),
        sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
            "content_block_start",
        ),
        sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}},
            "content_block_delta",
        ),
        sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s"}},
            "content_block_delta",
        ),
        sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        b"".join(
            sse(
                {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": t}},
                "content_block_delta",
            )
            for t in ("Hel", "lo", "!")
        ),
        sse(
            {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
            "content_block_delta",
        ),
        sse({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": usage_end}, "message_delta"),
        sse({"type": "message_stop"}, "message_stop"),
    ]


def test_anthropic_prompt_is_input_plus_cache_read_plus_cache_write() -> None:
    start = {"input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20, "output_tokens": 1}
    st, failed = read(AnthropicFlavour(OPTS), anthropic_stream(start, {"output_tokens": 7}))
    assert failed is None
    u = st.usage
    assert (u.prompt, u.cached, u.cache_write, u.output) == (130, 100, 20, 7)
    assert st.events == 5  # 1 thinking + 3 text + 1 tool input; the signature carries no token
    assert st.first_token == 4.0 and st.first_answer == 7.0  # thinking came first, answer in the 7th read
    assert st.finish_reason == "length" and st.served["model"] == "claude-x" and st.response_id == "msg_1"


def test_anthropic_stream_without_message_stop_is_incomplete() -> None:
    parts = anthropic_stream({"input_tokens": 1, "output_tokens": 1}, {"output_tokens": 3})[:-1]
    assert read(AnthropicFlavour(OPTS), parts)[1][0] == "incomplete"


def test_anthropic_error_event_is_a_stream_error() -> None:
    parts = anthropic_stream({"input_tokens": 1}, {"output_tokens": 3})[:3]
    parts.append(sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error"))
    cls, detail = read(AnthropicFlavour(OPTS), parts)[1]
    assert cls == "stream_error" and "overloaded_error" in detail


def responses_stream(usage: dict, terminal: str = "response.completed") -> list[bytes]:
    resp = {"id": "resp_1", "model": "gpt-x", "status": "in_progress", "service_tier": "default"}
    done = {**resp, "status": "completed", "usage": usage}
    if terminal == "response.incomplete":
        done["incomplete_details"] = {"reason": "max_output_tokens"}
    seq = iter(range(100))

    def ev(kind: str, **fields) -> bytes:
        return sse({"type": kind, "sequence_number": next(seq), **fields}, kind)

    return [
        ev("response.created", response=resp),
        ev("response.in_progress", response=resp),
        ev("response.output_item.added", output_index=0, item={"type": "reasoning", "id": "rs_1"}),
        ev("response.reasoning_text.delta", item_id="rs_1", output_index=0, content_index=0, delta="think"),
        ev("response.output_item.added", output_index=1, item={"type": "message", "id": "msg_1"}),
        b"".join(
            ev("response.output_text.delta", item_id="msg_1", output_index=1, content_index=0, delta=t)
            for t in ("a", "b", "c")
        ),
        ev("response.output_text.done", item_id="msg_1", output_index=1, content_index=0, text="abc"),
        ev(terminal, response=done),
    ]


def test_responses_usage_and_events() -> None:
    usage = {
        "input_tokens": 50,
        "input_tokens_details": {"cached_tokens": 32},
        "output_tokens": 4,
        "output_tokens_details": {"reasoning_tokens": 1},
        "total_tokens": 54,
    }
    st, failed = read(ResponsesFlavour(OPTS), responses_stream(usage))
    assert failed is None
    assert (st.usage.prompt, st.usage.cached, st.usage.output, st.usage.reasoning) == (50, 32, 4, 1)
    assert st.events == 4 and st.first_token == 4.0 and st.first_answer == 6.0
    assert st.finish_reason == "stop" and st.response_id == "resp_1" and st.served["service_tier"] == "default"


def test_responses_incomplete_at_max_output_tokens_is_a_normal_end() -> None:
    st, failed = read(
        ResponsesFlavour(OPTS), responses_stream({"input_tokens": 5, "output_tokens": 4}, "response.incomplete")
    )
    assert failed is None and st.finish_reason == "length"


def test_responses_failed_is_a_stream_error() -> None:
    parts = responses_stream({"input_tokens": 5, "output_tokens": 4})[:-1]
    parts.append(sse({"type": "response.failed", "response": {"id": "r", "error": {"code": "server_error"}}}))
    assert read(ResponsesFlavour(OPTS), parts)[1][0] == "stream_error"


def completion_chunk(text: str | None, finish: str | None = None, **extra) -> bytes:
    choices = [] if text is None else [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}]
    return sse({"id": "cmpl-1", "object": "text_completion", "choices": choices, **extra})


def test_completions_stream() -> None:
    parts = [completion_chunk(t) for t in ("x", "y", "")] + [
        completion_chunk("", "length"),
        completion_chunk(None, usage={"prompt_tokens": 9, "completion_tokens": 2}),
        b"data: [DONE]\n\n",
    ]
    st, failed = read(CompletionsFlavour(OPTS), parts)
    assert failed is None and st.events == 2 and (st.usage.prompt, st.usage.output) == (9, 2)
    assert st.finish_reason == "length"


@pytest.mark.parametrize(
    ("usage", "problem"),
    [
        ({"prompt_tokens": "12", "completion_tokens": 3}, "string"),
        ({"prompt_tokens": 12, "completion_tokens": 2**64}, "not an integer"),  # orjson reads it as a float
        ({"prompt_tokens": 2**63, "completion_tokens": 3}, "outside"),
        ({"prompt_tokens": -1, "completion_tokens": 3}, "outside"),
        ({"prompt_tokens": 12.0, "completion_tokens": 3}, "float"),
        ({"prompt_tokens": 12, "completion_tokens": True}, "bool"),
        ({"prompt_tokens": 12, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 13}}, "exceeds"),
        ({"prompt_tokens": 12, "completion_tokens": 3, "prompt_tokens_details": "x"}, "not an object"),
        ("abc", "not an object"),
    ],
)
def test_implausible_usage_is_bad_usage_with_the_raw_kept(usage, problem) -> None:
    parts = [sse({"choices": [{"index": 0, "delta": {"content": "a"}}]}), sse({"choices": [], "usage": usage})]
    st, failed = read(ChatFlavour(OPTS), [*parts, b"data: [DONE]\n\n"])
    assert failed is not None and failed[0] == "bad_usage" and problem in failed[1]
    assert st.usage.prompt is None and st.usage.output is None and st.usage.raw
