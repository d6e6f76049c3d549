"""Every fault kind on every API, read as bytes: what a user's client meets when a host misbehaves."""

import itertools
import json

import aiohttp
import pytest

from replay.sim.server.app import start_sim
from replay.sim.wire.openai import piece_text
from tests.support.sim_api import APIS, body_for, ended, post, reported_usage, sse, token_texts

N = 20  # answer tokens of every request here: the fast profile answers exactly max_tokens


async def one(api: str, fault: str, stream: bool = True, dialect: str | None = None, profile: str = "fast"):
    """Answer one request that draws ``fault`` (``KIND``: at rate 1); its status, headers, raw bytes and truth."""
    spec = fault if ":" in fault else f"{fault}:1"
    async with await start_sim(profile, faults=spec, dialect=dialect) as sim, aiohttp.ClientSession() as http:
        status, headers, raw = await post(http, sim.base_url, api, body_for(api, N, stream), **{"X-Request-Id": "f1"})
        (truth,) = await sim.wait_truth(1)
    return status, headers, raw, truth


def _is_count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63


@pytest.mark.parametrize("api", APIS)
async def test_drop_stall_and_midstream_strike_after_half_the_tokens(api):
    _, _, raw, truth = await one(api, "drop")
    events = sse(raw[: raw.rfind(b"\n\n") + 2])
    assert len(token_texts(api, events)) == N // 2 and not ended(api, events)
    assert truth["status"] == "fault" and truth["output_tokens"] == N // 2

    _, _, raw, truth = await one(api, "stall:1@0.05")
    events = sse(raw)
    assert len(token_texts(api, events)) == N and ended(api, events)
    times, counts = truth["writes"][::2], truth["writes"][1::2]
    half = list(itertools.accumulate(counts)).index(N // 2)  # a write ends exactly at half the tokens
    assert times[half + 1] - times[half] >= 0.05  # and the stall follows it

    status, _, raw, truth = await one(api, "midstream")
    events = sse(raw)
    assert status == 200 and len(token_texts(api, events)) == N // 2 and not ended(api, events)
    errors = [e for e in events if isinstance(e["data"], dict) and ("error" in e["data"] or e["event"])]
    last = events[-1]["data"] if api in ("messages", "responses") else errors[-1]["data"]
    if api == "responses":
        assert last["type"] == "response.failed" and last["response"]["error"]["code"] == "server_error"
    elif api == "messages":
        assert events[-1]["event"] == "error" and last["error"]["type"] == "overloaded_error"
    else:
        assert last["error"]["message"]
    assert truth["status"] == "fault" and truth["output_tokens"] == N // 2


@pytest.mark.parametrize("api", APIS)
async def test_malformed_and_odd_chunks_come_after_the_first_token_then_the_stream_goes_on(api):
    _, _, raw, _ = await one(api, "malformed")
    events = sse(raw)
    bad = [i for i, e in enumerate(events) if isinstance(e["data"], bytes)]
    assert len(bad) == 1 and len(token_texts(api, events[: bad[0]])) == 1
    assert len(token_texts(api, events)) == N and ended(api, events)

    _, _, raw, _ = await one(api, "odd_chunk")
    events = sse(raw)
    if api == "responses":
        deltas = [e for e in events if e["data"].get("type") == "response.output_text.delta"]
        odd = [e for e in deltas if not isinstance(e["data"]["delta"], str)]
    elif api == "messages":
        odd = [e for e in events if isinstance(e["data"].get("delta"), list)]
    else:
        odd = [e for e in events if isinstance(e["data"], dict) and e["data"].get("choices") == "abc"]
    assert len(odd) == 1
    assert len(token_texts(api, events[: events.index(odd[0])])) == 1
    assert len(token_texts(api, events)) == N and ended(api, events)


@pytest.mark.parametrize("api", APIS)
async def test_usage_faults(api):
    _, _, raw, truth = await one(api, "no_usage")
    events = sse(raw)
    assert ended(api, events) and reported_usage(api, events) is None and truth["fault"] == "no_usage"

    _, _, raw, truth = await one(api, "usage_off")
    assert reported_usage(api, sse(raw)) == (truth["prompt_tokens"] + 1, N + 1)

    seen = set()
    for seed in range(12):
        async with await start_sim("fast", faults="bad_usage:1", fault_seed=seed) as sim, aiohttp.ClientSession() as h:
            _, _, raw = await post(h, sim.base_url, api, body_for(api, N))
            (truth,) = await sim.wait_truth(1)
        prompt, output = reported_usage(api, sse(raw))
        variant = truth["fault_detail"]
        seen.add(variant)
        assert not _is_count(prompt) and not _is_count(output)
        expected = {"string": str(N), "negative": -N - 1, "float": N + 0.5, "huge": 2**64}[variant]
        assert output == expected and type(output) is type(expected)
    assert len(seen) >= 3  # the variant is drawn per request


@pytest.mark.parametrize("api", APIS)
async def test_huge_pads_one_answer_delta_to_the_asked_size(api):
    _, _, raw, truth = await one(api, "huge:1@0.3", profile="reasoning")
    events = sse(raw)
    texts = token_texts(api, events)
    assert len(texts) == N and ended(api, events)
    big = [t for t in texts if len(t) > 1000]
    share = 5 if api == "responses" else 1  # the Responses stream repeats the text in four done events
    assert len(big) == 1 and 300_000 // share <= len(big[0]) < 300_000 // share + 100
    assert 300_000 < len(raw) < 330_000  # the body is about the size asked for
    first_answer = truth["reasoning_tokens"]
    assert texts.index(big[0]) == first_answer and big[0].startswith(piece_text(first_answer, 1))


@pytest.mark.parametrize("api", APIS)
async def test_non_streamed_answers_meet_the_same_faults(api):
    status, _, raw, _ = await one(api, "huge:1@0.2", stream=False)
    assert status == 200 and 200_000 < len(raw) < 300_000
    status, _, raw, truth = await one(api, "midstream", stream=False)
    assert status == 500 and truth["status"] == "fault" and truth["http_status"] == 500
    status, _, raw, _ = await one(api, "odd_chunk", stream=False)
    key = {"chat": "choices", "completions": "choices", "messages": "content", "responses": "output"}[api]
    assert status == 200 and json.loads(raw)[key] == "abc"
    status, _, raw, _ = await one(api, "no_usage", stream=False)
    assert status == 200 and json.loads(raw).get("usage") is None
    status, _, raw, truth = await one(api, "drop", stream=False)
    assert raw == b"" and truth["status"] == "fault"


@pytest.mark.parametrize("status", [400, 404, 408, 409, 429, 500, 502, 503, 504, 529])
@pytest.mark.parametrize("api", APIS)
async def test_http_faults_answer_in_each_apis_error_shape(api, status):
    got, headers, raw, truth = await one(api, str(status))
    body = json.loads(raw)
    assert got == status and truth["status"] == "fault" and truth["http_status"] == status
    if api == "messages":
        assert body["type"] == "error" and body["error"]["type"] and body["error"]["message"]
        assert body["error"]["type"] == {429: "rate_limit_error", 529: "overloaded_error", 500: "api_error"}.get(
            status, body["error"]["type"])  # fmt: skip
    else:
        assert body["error"]["message"] and body["error"]["type"]
    assert ("Retry-After" in headers) == (status in (429, 503, 529))
    assert truth["retry_after"] == (1.0 if status in (429, 503, 529) else None)


async def test_retry_options_reach_headers_and_truth():
    async with await start_sim("fast", faults="429:1:retry-after-ms=250:should-retry=false") as sim:
        async with aiohttp.ClientSession() as http:
            status, headers, _ = await post(http, sim.base_url, "chat", body_for("chat"))
        (truth,) = await sim.wait_truth(1)
    assert status == 429 and headers["retry-after-ms"] == "250" and headers["x-should-retry"] == "false"
    assert "Retry-After" not in headers and truth["retry_after"] == 0.25


OVERFLOW = [
    ("chat", None, "maximum context length is", None),
    ("chat", "openai", "However, your messages resulted in", "context_length_exceeded"),
    ("responses", "openai", "Your input exceeds the context window of this model", "context_length_exceeded"),
    ("chat", "vllm", "Please reduce the length of the messages or completion", 400),
    ("chat", "llamacpp", "exceeds the available context size", 400),
    ("chat", "openrouter", "This endpoint's maximum context length is", None),
    ("messages", None, "prompt is too long:", None),
    ("messages", "anthropic", "prompt is too long:", None),
]


@pytest.mark.parametrize(("api", "dialect", "wording", "code"), OVERFLOW)
async def test_overflow_speaks_each_providers_wording(api, dialect, wording, code):
    status, _, raw, truth = await one(api, "overflow", dialect=dialect)
    body = json.loads(raw)
    error = body["error"]
    assert status == 400 and wording in error["message"] and truth["fault"] == "overflow"
    if api == "messages":
        assert body["type"] == "error" and error["type"] == "invalid_request_error"
        assert (f"{truth['prompt_tokens']} tokens >") in error["message"]
        assert ("request_id" in body) == (dialect == "anthropic")
    elif code is not None:
        assert error["code"] == code
    if dialect == "llamacpp":
        assert error["type"] == "exceed_context_size_error" and error["n_prompt_tokens"] == truth["prompt_tokens"]
    if dialect == "vllm":
        assert error["type"] == "BadRequestError"
