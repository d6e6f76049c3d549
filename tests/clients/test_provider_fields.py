"""Each provider's own fields read from crafted streams: on the events the flavours decode anyway, fast paths on."""

from __future__ import annotations

from replay.clients.flavours.base import RequestOptions
from replay.clients.flavours.chat import ChatFlavour
from replay.clients.provider_fields import header_timings
from tests.clients.test_flavour_streams import read, sse

CHAT = ChatFlavour(RequestOptions(model="m"))
USAGE = {"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}


def _tokens(n: int = 3) -> list[bytes]:
    return [sse({"id": "c1", "choices": [{"index": 0, "delta": {"content": f"t{i}"}}]}) for i in range(n)]


def test_groq_usage_and_timings_without_top_level_usage() -> None:
    times = {"queue_time": 0.01, "prompt_time": 0.002, "completion_time": 0.05, "total_time": 0.052}
    first = sse({"id": "c1", "x_groq": {"id": "req_1"}, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
    last = sse(
        {
            "id": "c1",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "x_groq": {"id": "req_1", "usage": USAGE | times},
        }
    )
    st, failed = read(CHAT, [first, *_tokens(), last, b"data: [DONE]\n\n"])
    assert failed is None and st.usage.prompt == 10 and st.usage.cached == 4
    assert st.timings == times and st.served["request_id"] == "req_1"


def test_time_info_perf_metrics_and_gateway_routing_are_read_even_off_the_finish_chunk() -> None:
    for key, value in (
        ("time_info", {"queue_time": 0.1, "prompt_time": 0.2}),
        ("perf_metrics", {"server-time-to-first-token": 0.3}),
    ):
        odd = sse({"id": "c1", key: value, "choices": [{"index": 0, "delta": {"content": "x"}}]})
        st, _ = read(CHAT, [*_tokens(), odd, sse({"id": "c1", "choices": [], "usage": USAGE}), b"data: [DONE]\n\n"])
        assert st.timings == value and st.events == 4
    meta = {"gateway": {"routing": {"finalProvider": "bedrock", "fallbacksAvailable": ["vertex"]}}}
    odd = sse({"id": "c1", "provider_metadata": meta, "choices": [{"index": 0, "delta": {"content": "x"}}]})
    st, _ = read(CHAT, [*_tokens(), odd, sse({"id": "c1", "choices": [], "usage": USAGE}), b"data: [DONE]\n\n"])
    assert st.served["provider"] == "bedrock"


def test_openrouter_cost_is_kept_only_when_plausible() -> None:
    for cost, kept in ((0.00123, 0.00123), ("0.1", None), (-1, None), (float("inf"), None), (True, None)):
        last = sse({"id": "c1", "provider": "Fireworks", "choices": [], "usage": USAGE | {"cost": 0}})
        last = last.replace(
            b'"cost":0', b'"cost":' + (b"Infinity" if cost == float("inf") else __import__("json").dumps(cost).encode())
        )
        st, failed = read(CHAT, [*_tokens(), last, b"data: [DONE]\n\n"])
        assert st.served.get("cost") == kept
        if failed is None:  # Infinity is no JSON: that stream is malformed, the others are read
            assert st.served["provider"] == "Fireworks"


def test_fireworks_header_timings() -> None:
    expected = {"server-time-to-first-token": 0.125}
    assert header_timings({"fireworks-server-time-to-first-token": "0.125"}, []) == expected
    assert header_timings({"fireworks-server-time-to-first-token": "soon"}, []) is None
    assert header_timings({}, []) is None
