"""The sim over real HTTP: OpenAI streaming order, usage, cached tokens, reasoning, errors, truth log."""

import asyncio
import dataclasses
import itertools

import aiohttp
import orjson
import pytest
from multidict import CIMultiDict

from replay.sim.prefix_cache import PrefixCache
from replay.sim.profiles import get_profile
from replay.sim.prompt import PromptTokenizer
from replay.sim.server import start_sim
from replay.sim.wire import piece_text

CONTEXT = [
    {"role": "system", "content": "You are a careful coding agent. " * 20},
    {"role": "user", "content": "Fix the failing test in parser.py"},
]


@pytest.fixture
async def sim():
    handle = await start_sim("fast")
    yield handle
    await handle.stop()


@pytest.fixture
async def http():
    async with aiohttp.ClientSession() as session:
        yield session


async def post(http, sim, body, **headers) -> tuple[int, CIMultiDict, bytes]:
    async with http.post(f"{sim.base_url}/chat/completions", data=orjson.dumps(body), headers=headers) as r:
        return r.status, r.headers.copy(), await r.read()


def sse(raw: bytes) -> list:
    blocks = raw.split(b"\n\n")
    assert blocks[-1] == b""
    assert all(b.startswith(b"data: ") for b in blocks[:-1])
    return [b[6:] if b == b"data: [DONE]" else orjson.loads(b[6:]) for b in blocks[:-1]]


def chat(messages, max_tokens=20, stream=True, usage=True, **extra) -> dict:
    body = {"model": "any-model", "messages": messages, "max_tokens": max_tokens, "stream": stream, **extra}
    if usage:
        body["stream_options"] = {"include_usage": True}
    return body


async def test_stream_event_order_usage_and_done(sim, http):
    body = chat(CONTEXT, max_tokens=20, ignore_eos=True, min_tokens=20, tools=[])
    status, headers, raw = await post(http, sim, body, **{"X-Request-Id": "req-1"})
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    assert headers["X-Request-Id"] == "req-1"
    events = sse(raw)
    role, tokens, finish, usage, done = events[0], events[1:21], events[21], events[22], events[23:]
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(e["choices"][0]["delta"]["content"] for e in tokens) == piece_text(0, 20)
    assert all(e["model"] == "any-model" and e["object"] == "chat.completion.chunk" for e in events[:-1])
    assert finish["choices"] == [{"index": 0, "delta": {}, "finish_reason": "length"}]
    prompt_tokens = len(await PromptTokenizer().prompt_ids(CONTEXT))
    assert usage["choices"] == []
    assert usage["usage"] == {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 20,
        "total_tokens": prompt_tokens + 20,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    assert done == [b"[DONE]"]

    (truth,) = await sim.wait_truth(1)
    assert truth["request_id"] == "req-1" and truth["status"] == "ok"
    assert (truth["prompt_tokens"], truth["output_tokens"], truth["cached_tokens"]) == (prompt_tokens, 20, 0)
    times, counts = truth["writes"][::2], truth["writes"][1::2]
    assert sum(counts) == 20 and all(c >= 1 for c in counts)
    assert times == sorted(times)
    assert truth["arrival"] <= truth["prefill_start"] <= truth["prefill_end"] <= truth["first_token"]
    assert (truth["first_token"], truth["last_token"]) == (times[0], times[-1])
    assert truth["last_token"] <= truth["done"]


async def test_no_usage_chunk_unless_asked(sim, http):
    _, _, raw = await post(http, sim, chat(CONTEXT, max_tokens=3, usage=False))
    events = sse(raw)
    assert len(events) == 1 + 3 + 1 + 1
    assert all("usage" not in e for e in events[:-1])


async def test_second_turn_reports_the_prefix_cache_hit(sim, http):
    first = CONTEXT
    second = [*CONTEXT, {"role": "assistant", "content": "Let me look."}, {"role": "user", "content": "ok"}]
    usages = []
    for messages in (first, second):
        _, _, raw = await post(http, sim, chat(messages, max_tokens=5))
        usages.append(sse(raw)[-2]["usage"])

    prompts = PromptTokenizer()
    ids = [await prompts.prompt_ids(m) for m in (first, second)]
    reference = PrefixCache(get_profile("fast").kv_budget_tokens, 16)
    assert [reference.lookup_and_insert(i) for i in ids] == [
        u["prompt_tokens_details"]["cached_tokens"] for u in usages
    ]
    assert usages[1]["prompt_tokens_details"]["cached_tokens"] == len(ids[0]) // 16 * 16 > 0
    truth = await sim.wait_truth(2)
    assert [t["cached_tokens"] for t in truth] == [0, len(ids[0]) // 16 * 16]


async def test_reasoning_profile_streams_reasoning_first(http):
    async with await start_sim("reasoning") as sim:
        _, _, raw = await post(http, sim, chat(CONTEXT, max_tokens=10))
        events = sse(raw)
        deltas = [e["choices"][0]["delta"] for e in events[1:11]]
        assert [next(iter(d)) for d in deltas] == ["reasoning_content"] * 3 + ["content"] * 7
        assert events[-2]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 3}
        (truth,) = await sim.wait_truth(1)
        assert (truth["output_tokens"], truth["reasoning_tokens"]) == (10, 3)


async def test_non_streaming_answer(sim, http):
    profile = dataclasses.replace(get_profile("fast"), max_output_tokens=8)
    async with await start_sim(profile) as capped:
        status, headers, raw = await post(http, capped, chat(CONTEXT, stream=False, max_completion_tokens=30))
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    body = orjson.loads(raw)
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": piece_text(0, 8)}
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 8
    (truth,) = capped.truth
    assert truth["writes"][1::2] == [8] and truth["first_token"] == truth["done"]


async def test_default_max_tokens(sim, http):
    body = chat(CONTEXT, stream=False)
    del body["max_tokens"]
    _, _, raw = await post(http, sim, body)
    assert orjson.loads(raw)["usage"]["completion_tokens"] == 256


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"[1, 2]",
        b'{"model": "m"}',
        b'{"messages": []}',
        b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}',
        b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": "5"}',
        b'{"messages": [{"content": "no role"}]}',
    ],
)
async def test_bad_requests_get_400_with_openai_error(sim, http, raw):
    async with http.post(f"{sim.base_url}/chat/completions", data=raw) as r:
        assert r.status == 400
        error = (await r.json())["error"]
        assert error["type"] == "invalid_request_error" and error["message"]
        assert r.headers["X-Request-Id"]
    (truth,) = await sim.wait_truth(1)
    assert truth["status"] == "bad_request" and truth["writes"] == []


async def test_models_and_health(sim, http):
    async with http.get(f"{sim.base_url}/models") as r:
        assert [m["id"] for m in (await r.json())["data"]] == ["replay-sim"]
    async with http.get(f"http://{sim.host}:{sim.port}/health") as r:
        assert r.status == 200


async def test_concurrent_streams_all_complete(sim, http):
    async def one(i: int) -> int:
        messages = [*CONTEXT, {"role": "user", "content": f"task {i}"}]
        _, _, raw = await post(http, sim, chat(messages, max_tokens=30))
        return sse(raw)[-2]["usage"]["completion_tokens"]

    assert await asyncio.gather(*(one(i) for i in range(16))) == [30] * 16
    truth = await sim.wait_truth(16)
    assert all(sum(t["writes"][1::2]) == 30 for t in truth)
    starts = sorted((t["prefill_start"], t["prefill_end"]) for t in truth)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(starts))  # prefills never overlap
    assert sim.engine.decoding == 0


async def test_client_leaving_mid_stream_is_logged(sim, http):
    async with http.post(f"{sim.base_url}/chat/completions", data=orjson.dumps(chat(CONTEXT, max_tokens=5000))) as r:
        await r.content.readuntil(b"\n\n")  # the role chunk has arrived; now hang up
        r.close()
    (truth,) = await asyncio.wait_for(sim.wait_truth(1), 10)
    assert truth["status"] == "disconnected"
    assert 0 < truth["output_tokens"] < 5000
    assert sim.engine.decoding == 0


async def test_truth_log_file_has_one_flushed_line_per_request(tmp_path, http):
    path = tmp_path / "truth.jsonl"
    async with await start_sim("fast", str(path)) as sim:
        for i in range(3):
            await post(http, sim, chat(CONTEXT, max_tokens=4), **{"X-Request-Id": f"r{i}"})
        await sim.wait_truth(3)
        lines = path.read_bytes().splitlines()  # readable before the sim stops: flushed per request
    assert [orjson.loads(line)["request_id"] for line in lines] == ["r0", "r1", "r2"]
    assert [orjson.loads(line) for line in lines] == sim.truth


async def test_stop_cuts_in_flight_streams_and_logs_them(http):
    sim = await start_sim("fast")
    async with http.post(f"{sim.base_url}/chat/completions", data=orjson.dumps(chat(CONTEXT, max_tokens=100_000))) as r:
        await r.content.readuntil(b"\n\n")
        await sim.stop()
    (truth,) = sim.truth
    assert truth["status"] == "cancelled" and truth["output_tokens"] > 0
    assert sim.engine.decoding == 0
