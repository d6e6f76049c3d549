"""The OpenAI Responses API of the sim: its stream as bytes, the same counts as chat for the same
conversation, stateful continuation by previous_response_id, and the bounded store behind it."""

import dataclasses

import aiohttp
import orjson
import pytest

from replay.sim.core.profiles import get_profile
from replay.sim.core.prompt import PromptTokenizer
from replay.sim.server.app import start_sim
from replay.sim.server.response_store import ResponseStore
from replay.sim.wire.openai import piece_text
from tests.support.sim_api import post, sse

SYSTEM = "You are a careful coding agent. " * 20
ARGS = '{"cmd":"ls -la"}'
CHAT = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "Fix the failing test in parser.py"},
    {"role": "assistant", "content": "Let me look.",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": ARGS}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "parser.py\nlexer.py\n"},
]  # fmt: skip
ITEMS = [
    {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Fix the failing test in parser.py"}],
    },
    {"type": "reasoning", "id": "rs_0", "summary": []},  # earlier thinking: not counted
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
    {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": ARGS},
    {"type": "function_call_output", "call_id": "c1", "output": "parser.py\nlexer.py\n"},
]
MESSAGES = [
    {"role": "user", "content": "Fix the failing test in parser.py"},
    {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                      {"type": "tool_use", "id": "c1", "name": "bash", "input": {"cmd": "ls -la"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "parser.py\nlexer.py\n"}]},
]  # fmt: skip
NEXT = "Now run the tests."


def responses_body(items, max_tokens=12, stream=True, **extra):
    return {"model": "m", "instructions": SYSTEM, "input": items, "max_output_tokens": max_tokens, "stream": stream,
            **extra}  # fmt: skip


def terminal(events):
    return events[-1]["data"]


async def test_stream_events_in_order_with_sequence_numbers_and_usage():
    async with await start_sim("reasoning") as sim, aiohttp.ClientSession() as http:
        status, headers, raw = await post(http, sim.base_url, "responses", responses_body(ITEMS, 10), **{
            "X-Request-Id": "r1"})  # fmt: skip
        (truth,) = await sim.wait_truth(1)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = sse(raw)
    assert b"[DONE]" not in raw
    assert all(e["event"] == e["data"]["type"] for e in events)
    assert [e["data"]["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["event"] for e in events]
    think, text = "response.reasoning_text.delta", "response.output_text.delta"
    assert kinds == [
        "response.created", "response.in_progress", "response.output_item.added", *[think] * 3,
        "response.reasoning_text.done", "response.output_item.done", "response.output_item.added",
        "response.content_part.added", *[text] * 7, "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.incomplete",
    ]  # fmt: skip
    deltas = [e["data"] for e in events if e["event"] in (think, text)]
    assert "".join(d["delta"] for d in deltas) == piece_text(0, 10)
    assert {d["item_id"] for d in deltas if d["type"] == think} == {"rs_r1"}
    assert {(d["item_id"], d["output_index"]) for d in deltas if d["type"] == text} == {("msg_r1", 1)}
    response = terminal(events)["response"]
    assert response["status"] == "incomplete" and response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["id"] == "resp_r1" and response["instructions"] == SYSTEM
    assert [i["type"] for i in response["output"]] == ["reasoning", "message"]
    assert response["output"][1]["content"][0]["text"] == piece_text(3, 7)
    prompt = truth["prompt_tokens"]
    assert response["usage"] == {
        "input_tokens": prompt, "input_tokens_details": {"cached_tokens": truth["cached_tokens"]},
        "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 3}, "total_tokens": prompt + 10,
    }  # fmt: skip
    assert truth["api"] == "responses" and truth["output_tokens"] == 10 and len(truth["writes"]) // 2 >= 1


async def test_an_answer_that_ends_by_itself_completes_and_batched_tokens_keep_their_numbers():
    natural = dataclasses.replace(get_profile("fast"), natural_output_tokens=4)
    async with await start_sim(natural) as sim, aiohttp.ClientSession() as http:
        _, _, raw = await post(http, sim.base_url, "responses", responses_body("hi", 10_000))
    end = terminal(sse(raw))
    assert end["type"] == "response.completed" and end["response"]["status"] == "completed"
    assert end["response"]["incomplete_details"] is None and end["response"]["output"][0]["status"] == "completed"
    async with await start_sim("instant") as sim, aiohttp.ClientSession() as http:  # 256 tokens per write
        _, _, raw = await post(http, sim.base_url, "responses", responses_body("hi", 1000))
    events = sse(raw)
    assert [e["data"]["sequence_number"] for e in events] == list(range(len(events)))
    deltas = [e["data"]["delta"] for e in events if e["event"] == "response.output_text.delta"]
    assert len(deltas) == 1000 and "".join(deltas) == piece_text(0, 1000)


async def test_non_streamed_response():
    async with await start_sim("reasoning") as sim, aiohttp.ClientSession() as http:
        status, headers, raw = await post(http, sim.base_url, "responses", responses_body(ITEMS, 10, stream=False))
    body = orjson.loads(raw)
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert body["object"] == "response" and body["status"] == "incomplete"
    reasoning, message = body["output"]
    assert reasoning["content"][0]["text"] == piece_text(0, 3) and message["content"][0]["text"] == piece_text(3, 7)
    assert body["usage"]["output_tokens"] == 10 and body["usage"]["output_tokens_details"]["reasoning_tokens"] == 3


async def _turns(api: str) -> list[tuple[int, int, int]]:
    """(prompt, cached, output) of two turns of the same conversation in ``api``, on a fresh engine."""
    async with await start_sim("fast") as sim, aiohttp.ClientSession() as http:
        for turn in (0, 1):
            if api == "chat":
                extra = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": NEXT}] if turn else []
                body = {"model": "m", "messages": [*CHAT, *extra], "max_tokens": 8}
            elif api == "messages":
                extra = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": NEXT}] if turn else []
                body = {"model": "m", "system": SYSTEM, "messages": [*MESSAGES, *extra], "max_tokens": 8}
            else:
                extra = [{"role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
                         {"role": "user", "content": NEXT}] if turn else []  # fmt: skip
                body = responses_body([*ITEMS, *extra], 8, stream=False)
            status, _, _ = await post(http, sim.base_url, api, body)
            assert status == 200
        return [(t["prompt_tokens"], t["cached_tokens"], t["output_tokens"]) for t in await sim.wait_truth(2)]


async def test_the_same_conversation_counts_the_same_in_every_api():
    chat = await _turns("chat")
    assert chat[1][1] > 0  # the second turn hit the cache
    assert await _turns("responses") == chat
    assert await _turns("messages") == chat
    expected = len(await PromptTokenizer().prompt_ids(CHAT))
    assert chat[0][0] == expected


async def test_previous_response_id_continues_the_context():
    async with await start_sim("fast") as sim, aiohttp.ClientSession() as http:
        _, _, raw = await post(http, sim.base_url, "responses", responses_body(ITEMS, 6), **{"X-Request-Id": "t1"})
        first = terminal(sse(raw))["response"]
        follow = responses_body(NEXT, 6, stream=False, previous_response_id=first["id"])
        status, _, raw = await post(http, sim.base_url, "responses", follow, **{"X-Request-Id": "t2"})
        assert status == 200 and orjson.loads(raw)["previous_response_id"] == "resp_t1"
        t1, t2 = await sim.wait_truth(2)
    answer = {"role": "assistant", "content": piece_text(0, 6)}
    expected = await PromptTokenizer().prompt_ids([*CHAT, answer, {"role": "user", "content": NEXT}])
    assert t2["prompt_tokens"] == len(expected)
    assert t2["cached_tokens"] >= t1["prompt_tokens"] // 16 * 16 - 16  # the earlier context came from the cache
    assert len(sim.responses) == 2


async def test_unknown_or_unstored_previous_response_is_not_found():
    async with await start_sim("fast") as sim, aiohttp.ClientSession() as http:
        status, _, raw = await post(
            http, sim.base_url, "responses", responses_body("hi", previous_response_id="resp_x")
        )
        error = orjson.loads(raw)["error"]
        assert status == 400 and error["code"] == "previous_response_not_found"
        assert error["param"] == "previous_response_id" and "resp_x" in error["message"]
        await post(http, sim.base_url, "responses", responses_body("hi", 4, store=False), **{"X-Request-Id": "ns"})
        status, _, _ = await post(http, sim.base_url, "responses", responses_body("hi", previous_response_id="resp_ns"))
        assert status == 400
        truth = await sim.wait_truth(3)
    assert [t["status"] for t in truth] == ["bad_request", "ok", "bad_request"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"model": "m"}, "'input'"),
        ({"input": [{"type": "image_generation_call"}]}, "input[0]: item type 'image_generation_call'"),
        ({"input": [{"type": "function_call", "name": "x"}]}, "input[0]: a function_call needs"),
        ({"input": "hi", "instructions": 3}, "'instructions' must be a string"),
        ({"input": "hi", "max_output_tokens": 0}, "'max_output_tokens' must be an integer >= 1"),
    ],
)
async def test_bad_requests_name_what_is_wrong(body, says):
    async with await start_sim("fast") as sim, aiohttp.ClientSession() as http:
        status, _, raw = await post(http, sim.base_url, "responses", body)
    assert status == 400 and says in orjson.loads(raw)["error"]["message"]


def test_the_store_is_an_lru_bounded_by_tokens():
    store = ResponseStore(max_tokens=100)
    for i in range(5):
        store.put(f"r{i}", [{"role": "user", "content": str(i)}], 30)
        if i == 2:
            assert store.get("r0") is not None  # r0 becomes the most recently used
    assert store.tokens <= 100 and store.evicted == 2
    assert store.get("r0") is not None and store.get("r1") is None and store.get("r2") is None
    assert store.get("r4") == [{"role": "user", "content": "4"}]
