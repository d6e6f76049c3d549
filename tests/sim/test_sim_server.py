"""The sim over real HTTP: OpenAI streaming order, usage, cached tokens, reasoning, errors, truth log."""

import asyncio
import dataclasses
import itertools

import aiohttp
import orjson
import pytest
from multidict import CIMultiDict

from replay.sim.core.prefix_cache import PrefixCache
from replay.sim.core.profiles import get_profile
from replay.sim.core.prompt import PromptTokenizer
from replay.sim.server.app import start_sim
from replay.sim.wire.openai import piece_text
from replay.workload.tokens import get_tokenizer

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
    assert all(t["queue_wait"] >= 0 and t["prefill_time"] > 0 and t["preemptions"] == 0 for t in truth)
    # continuous batching: answers decode side by side instead of queueing behind each other
    edges = sorted([(t["prefill_start"], 1) for t in truth] + [(t["last_token"], -1) for t in truth])
    assert max(itertools.accumulate(d for _, d in edges)) > 1
    assert sim.engine.core.steps < 16 * 30  # fewer steps than tokens: steps were shared
    assert sim.engine.decoding == 0 and sim.engine.core.pool.used_blocks == 0


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


async def test_completions_api_streams_text_chunks(sim, http):
    body = {"model": "m", "prompt": "def parse(text):", "max_tokens": 7, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    async with http.post(f"{sim.base_url}/completions", data=orjson.dumps(body)) as r:
        assert r.status == 200
        events = sse(await r.read())
    tokens, finish, usage, done = events[:7], events[7], events[8], events[9:]
    assert all(e["object"] == "text_completion" for e in events[:-1])
    assert "".join(e["choices"][0]["text"] for e in tokens) == piece_text(0, 7)
    assert finish["choices"][0]["finish_reason"] == "length" and done == [b"[DONE]"]
    n_prompt = len(get_tokenizer().encode("def parse(text):"))
    assert usage["usage"]["prompt_tokens"] == n_prompt and usage["usage"]["completion_tokens"] == 7
    body = {"prompt": [1, 2, 3], "max_tokens": 3}
    async with http.post(f"{sim.base_url}/completions", data=orjson.dumps(body)) as r:
        answer = await r.json()
    assert answer["choices"][0]["text"] == piece_text(0, 3) and answer["usage"]["prompt_tokens"] == 3
    truth = await sim.wait_truth(2)
    assert [t["api"] for t in truth] == ["completions", "completions"]


def anthropic_events(raw: bytes) -> list[tuple[str, dict]]:
    out = []
    for block in raw.split(b"\n\n")[:-1]:
        name_line, data_line = block.split(b"\n")
        assert name_line.startswith(b"event: ") and data_line.startswith(b"data: ")
        data = orjson.loads(data_line[6:])
        assert data["type"] == name_line[7:].decode()
        out.append((data["type"], data))
    return out


async def test_anthropic_messages_stream_with_cache_usage(http):
    async with await start_sim("reasoning") as sim:
        system = "You are a careful coding agent. " * 20
        turn1 = [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Fix parser.py", "cache_control": {"type": "ephemeral"}}],
            }
        ]
        call = {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}}
        result = {"type": "tool_result", "tool_use_id": "t1", "content": "parser.py"}
        turn2 = [*turn1, {"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
        starts = []
        for messages in (turn1, turn2):
            body = {"model": "claude-x", "system": system, "messages": messages, "max_tokens": 10, "stream": True}
            async with http.post(f"http://{sim.host}:{sim.port}/v1/messages", data=orjson.dumps(body)) as r:
                assert r.status == 200
                events = anthropic_events(await r.read())
            kinds = [k for k, _ in events]
            delta, start, stop = "content_block_delta", "content_block_start", "content_block_stop"
            assert kinds == ["message_start", start, *[delta] * 4, stop, start, *[delta] * 7, stop,
                             "message_delta", "message_stop"]  # fmt: skip
            deltas = [d["delta"] for k, d in events if k == "content_block_delta"]
            assert [d["type"] for d in deltas] == ["thinking_delta"] * 3 + ["signature_delta"] + ["text_delta"] * 7
            assert events[-2][1]["usage"] == {"output_tokens": 10}
            assert events[-2][1]["delta"]["stop_reason"] == "max_tokens"
            starts.append(events[0][1]["message"]["usage"])
        truth = await sim.wait_truth(2)
        for u, t in zip(starts, truth, strict=True):
            assert u["cache_read_input_tokens"] == t["cached_tokens"]
            assert (
                u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
                == t["prompt_tokens"]
            )
        assert starts[0]["cache_read_input_tokens"] == 0 and starts[1]["cache_read_input_tokens"] > 0
        assert starts[0]["cache_creation_input_tokens"] > 0  # the request marked a cache breakpoint
        assert [t["api"] for t in truth] == ["messages", "messages"]
        body = {"messages": turn1, "max_tokens": 4}
        async with http.post(f"http://{sim.host}:{sim.port}/v1/messages", data=orjson.dumps(body)) as r:
            message = await r.json()
        assert [b["type"] for b in message["content"]] == ["thinking", "text"]
        assert message["usage"]["output_tokens"] == 4 and message["stop_reason"] == "max_tokens"
        async with http.post(f"http://{sim.host}:{sim.port}/v1/messages", data=b'{"messages": []}') as r:
            assert r.status == 400 and (await r.json())["type"] == "error"


async def test_metrics_endpoint_speaks_vllm(sim, http):
    for i in range(3):
        await post(http, sim, chat(CONTEXT, max_tokens=4), **{"X-Request-Id": f"m{i}"})
    truth = await sim.wait_truth(3)
    async with http.get(f"http://{sim.host}:{sim.port}/metrics") as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
        text = await r.text()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    label = '{model_name="replay-sim"}'
    assert values[f"vllm:num_requests_running{label}"] == 0
    assert values[f"vllm:num_requests_waiting{label}"] == 0
    assert values[f"vllm:prefix_cache_hits_total{label}"] == sum(t["cached_tokens"] for t in truth) > 0
    assert values[f"vllm:prefix_cache_queries_total{label}"] == sum(t["prompt_tokens"] for t in truth)
    assert values[f"vllm:generation_tokens_total{label}"] == 12
    assert values['vllm:request_success_total{model_name="replay-sim",finished_reason="length"}'] == 3
    assert 'vllm:kv_cache_usage_perc{model_name="replay-sim"}' in values
    assert "# TYPE vllm:num_preemptions_total counter" in text


async def test_prompt_longer_than_the_model_is_rejected_like_vllm(http):
    profile = dataclasses.replace(get_profile("fast"), max_model_len=300)
    async with await start_sim(profile) as sim:
        status, _, raw = await post(http, sim, chat(CONTEXT, max_tokens=200))
        assert status == 400 and "maximum context length is 300" in orjson.loads(raw)["error"]["message"]
        (truth,) = await sim.wait_truth(1)
        assert truth["status"] == "rejected" and truth["http_status"] == 400


async def test_running_cap_makes_requests_queue(http):
    profile = dataclasses.replace(get_profile("fast"), max_num_seqs=2, step_overhead_s=0.004)
    async with await start_sim(profile) as sim:
        await asyncio.gather(*(post(http, sim, chat([*CONTEXT, {"role": "user", "content": str(i)}], max_tokens=10))
                               for i in range(6)))  # fmt: skip
        truth = await sim.wait_truth(6)
    waits = sorted(t["queue_wait"] for t in truth)
    assert waits[-1] > 0.03  # the last ones waited for two answers of ~10 steps to finish
    assert all(t["status"] == "ok" and t["output_tokens"] == 10 for t in truth)
