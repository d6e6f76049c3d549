"""``--history live`` against a host that refuses unknown tool-call ids: the host answers with tool calls of its
own (one, none, two, another tool's), and checks every request: each call in the context is one it issued, each is
answered right after it, each result answers one of them. The run completes with no error; with recorded history
(the recording's ids, which this host never issued) it does not, so the check can fail. The flavours that stream
tool calls give theirs back to the session (chat, Responses, Anthropic)."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from pathlib import Path

import orjson
import pytest
from aiohttp import web

from replay.clients.flavours.anthropic import AnthropicFlavour
from replay.clients.flavours.base import RequestOptions
from replay.clients.flavours.responses import ResponsesFlavour
from replay.clients.stream import interpret
from replay.loops.closed_loop import LoadConfig
from replay.records.reader import read_run
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_ids import STAND_IN
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.history import HistoryPolicy

PLAN = [1, 0, 2, "other", 1, 1]  # what the host's answers call: n bash calls, or one call of another tool


def _problem(messages: list[dict], issued: set[str]) -> str | None:
    """What a strict host refuses in this request, or None."""
    waiting: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            if m.get("tool_call_id") not in waiting:
                return f"tool result for unknown tool_call_id {m.get('tool_call_id')!r}"
            waiting.remove(m["tool_call_id"])
            continue
        if waiting:
            return f"tool calls {waiting} were not answered"
        calls = [c["id"] for c in m.get("tool_calls") or ()]
        if any(c not in issued for c in calls):
            return f"tool_call ids {calls} were not issued by this host"
        waiting = calls
    return None


def _sse(obj: dict) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _strict_host() -> tuple[str, list[dict], callable]:
    loop, started, state, seen = asyncio.new_event_loop(), threading.Event(), {}, []
    issued: set[str] = set()
    plan, ids = itertools.cycle(PLAN), itertools.count()

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        problem = _problem(body["messages"], issued)
        seen.append({"messages": body["messages"], "problem": problem})
        if problem:
            return web.json_response({"error": {"message": problem, "type": "invalid_request_error"}}, status=400)
        step = next(plan)
        names = ["grep"] if step == "other" else ["bash"] * step
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(_sse({"choices": [{"index": 0, "delta": {"content": "Looking."}}]}))
        for i, name in enumerate(names):
            cid = f"live_{next(ids)}"
            issued.add(cid)
            call = {"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
            await resp.write(_sse({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}))
            more = {"index": i, "function": {"arguments": '{"command":"ls"}'}}
            await resp.write(_sse({"choices": [{"index": 0, "delta": {"tool_calls": [more]}}]}))
        finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if names else "stop"}]}
        await resp.write(_sse(finish))
        usage = {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3 + 2 * len(names)}}
        await resp.write(_sse(usage) + b"data: [DONE]\n\n")
        return resp

    async def start() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["runner"], state["port"] = runner, site._server.sockets[0].getsockname()[1]  # type: ignore
        started.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    thread.start()
    started.wait(10)

    def stop() -> None:
        asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)

    return f"http://127.0.0.1:{state['port']}/v1", seen, stop


def _trajectory(path: Path) -> Path:
    """Six calls, each making one recorded bash call whose result the next call carries."""
    turns = []
    for k in range(6):
        append = [{"role": "user", "content": "Fix the bug."}] if k == 0 else []
        if k:
            append.append({"role": "tool", "tool_call_id": f"rec_{k - 1}", "content": f"output of step {k - 1}"})
        call = {"id": f"rec_{k}", "type": "function", "function": {"name": "bash", "arguments": '{"command":"ls"}'}}
        turns.append({"append": append, "output": {"content": "", "tool_calls": [call]}, "output_tokens": 5,
                      "tool_time_s": 0})  # fmt: skip
    head = {"format": "replay.trajectory/1", "id": "fix", "tools": [{"type": "function", "function": {"name": "bash"}}]}
    path.write_text("".join(json.dumps(x) + "\n" for x in [head, *turns]))
    return path


@pytest.fixture
def host():
    url, seen, stop = _strict_host()
    try:
        yield url, seen
    finally:
        stop()


def _run(tmp_path: Path, url: str, output: str):
    spec = RunSpec(
        trajectories=[str(_trajectory(tmp_path / "t.jsonl"))], host=url, model="m", retries=0,
        load=LoadConfig(concurrency=1, tool_time=ToolTimePolicy.parse("none")), out=str(tmp_path / f"{output}.jsonl"),
        history=HistoryPolicy(output=output), progress=False,
    )  # fmt: skip
    return read_run(execute(spec).path)


def test_live_history_meets_a_host_that_checks_tool_call_ids(tmp_path, host):
    url, seen = host
    run = _run(tmp_path, url, "live")
    assert [r.error for r in run.requests] == [None] * 6
    assert [s["problem"] for s in seen] == [None] * 6
    second, third, fourth, fifth = (s["messages"] for s in seen[1:5])
    # after one live call: the recorded result, with the live id
    assert second[-2]["tool_calls"][0]["id"] == "live_0" and second[-1]["tool_call_id"] == "live_0"
    # after an answer in text: the recorded result as the user's text
    assert "tool_calls" not in third[-2] and third[-1] == {
        "role": "user", "content": "<tool_result>\noutput of step 1\n</tool_result>"
    }  # fmt: skip
    # after two live calls: the recorded result answers the first, a stand-in the second
    assert [m.get("tool_call_id") for m in fourth[-2:]] == ["live_1", "live_2"] and fourth[-1]["content"] == STAND_IN
    # after a call of another tool: the recorded result answers it all the same
    assert fifth[-2]["tool_calls"][0]["function"]["name"] == "grep" and fifth[-1]["tool_call_id"] == "live_3"


def test_recorded_history_is_refused_by_the_same_host(tmp_path, host):
    url, seen = host
    run = _run(tmp_path, url, "recorded")
    assert [r.error for r in run.requests][1:] == ["http_4xx"] * 5  # the recording's ids were never issued here
    assert "were not issued by this host" in seen[1]["problem"]


def test_responses_and_anthropic_streams_give_their_calls_back():
    responses = [
        _sse({"type": "response.output_item.added", "output_index": 0,
              "item": {"type": "function_call", "call_id": "call_r", "name": "bash", "arguments": ""}}),
        _sse({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"a":'}),
        _sse({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "1}"}),
        _sse({"type": "response.completed", "response": {"id": "r", "usage": {"input_tokens": 5, "output_tokens": 2}}}),
    ]  # fmt: skip
    st = interpret(ResponsesFlavour(RequestOptions("m")), responses, [0.1] * 4, 0.0, collect=True)
    assert st.tool_calls() == [
        {"id": "call_r", "type": "function", "function": {"name": "bash", "arguments": '{"a":1}'}}
    ]
    anthropic = [
        _sse({"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        _sse({"type": "content_block_start", "index": 1,
              "content_block": {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}}),
        *(_sse({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": part}})
          for part in ('{"a"', ":1}")),
        _sse({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}),
        _sse({"type": "message_stop"}),
    ]  # fmt: skip
    st = interpret(AnthropicFlavour(RequestOptions("m")), anthropic, [0.1] * 6, 0.0, collect=True)
    assert st.tool_calls() == [
        {"id": "toolu_1", "type": "function", "function": {"name": "bash", "arguments": '{"a":1}'}}
    ]
    assert st.text == []  # the arguments are not answer text
