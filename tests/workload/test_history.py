"""History policy: recorded or live answers, reasoning kept or stripped, tool calls native or as text."""

from __future__ import annotations

from pathlib import Path

from replay.clients.flavours.base import RequestOptions
from replay.clients.flavours.chat import ChatFlavour
from replay.loops.closed_loop import LoadConfig
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.history import HistoryPolicy
from replay.workload.trajectory import load_workload
from tests.support.trajectories import write_trajectory

CALL = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def _tool_trajectory(tmp_path: Path) -> Path:
    turns = [
        {"append": [{"role": "system", "content": "agent"}, {"role": "user", "content": "list files"}],
         "output": {"content": None, "reasoning": "I should look around.", "tool_calls": [CALL]},
         "output_tokens": 12, "tool_time_s": 0},
        {"append": [{"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"}],
         "output": {"content": "Two files."}, "output_tokens": 4, "tool_time_s": 0},
    ]  # fmt: skip
    return write_trajectory(tmp_path / "tools.jsonl", "tools", turns, tools=TOOLS)


def _second_request(path: Path, policy: HistoryPolicy) -> dict:
    import orjson

    traj = load_workload([path], policy=policy).trajectories[0]
    t0, t1 = traj.turns
    context = [*t0.append, t0.output_message, *t1.append]
    tools = traj.tools if policy.tool_calls == "native" else None  # as sessions send them
    return orjson.loads(bytes(ChatFlavour(RequestOptions(model="m")).body(context, t1.output_tokens, tools, None)))


def test_native_tool_calls_and_stripped_reasoning_by_default(tmp_path: Path) -> None:
    body = _second_request(_tool_trajectory(tmp_path), HistoryPolicy())
    assert body["tools"] == TOOLS
    assistant, tool = body["messages"][2], body["messages"][3]
    assert assistant == {"role": "assistant", "content": None, "tool_calls": [CALL]}
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_1"


def test_text_tool_calls_and_kept_reasoning(tmp_path: Path) -> None:
    path = _tool_trajectory(tmp_path)
    body = _second_request(path, HistoryPolicy(reasoning="keep", tool_calls="text"))
    assert "tools" not in body
    assistant, tool = body["messages"][2], body["messages"][3]
    assert "tool_calls" not in assistant and '<tool_call>{"name":"bash","arguments"' in assistant["content"]
    assert assistant["reasoning_content"] == "I should look around."
    assert tool == {"role": "user", "content": "<tool_result>\na.py\nb.py\n</tool_result>"}
    assert all(m["role"] != "tool" for m in body["messages"])
    # the estimates count what is actually sent
    plain = load_workload([path]).trajectories[0].turns[1].prompt_tokens_est
    flat = load_workload([path], policy=HistoryPolicy(reasoning="keep", tool_calls="text")).trajectories[0]
    assert flat.turns[1].prompt_tokens_est > plain


async def test_live_history_appends_the_hosts_answer(tmp_path: Path, crafted_server) -> None:
    import asyncio

    import orjson

    path = write_trajectory(
        tmp_path / "t.jsonl",
        "t",
        [
            {"append": [{"role": "user", "content": "hi"}], "output": {"content": "RECORDED"}, "output_tokens": 3,
             "tool_time_s": 0},
            {"append": [{"role": "user", "content": "next"}], "output": {"content": "x"}, "output_tokens": 3,
             "tool_time_s": 0},
        ],
    )  # fmt: skip
    frames = [
        b'data: {"choices":[{"delta":{"reasoning_content":"hmm"}}]}\n\n',
        b'data: {"choices":[{"delta":{"content":"LIVE "}}]}\n\n',
        b'data: {"choices":[{"delta":{"content":"answer"}}]}\n\n',
        b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}\n\ndata: [DONE]\n\n',
    ]
    seen: list = []
    url, runner = await crafted_server(frames, seen=seen)
    try:
        for mode, expected in (("recorded", "RECORDED"), ("live", "LIVE answer")):
            seen.clear()
            spec = RunSpec(
                trajectories=[str(path)], host=url, model="m", out=str(tmp_path / f"{mode}.jsonl"), progress=False,
                load=LoadConfig(concurrency=1, tool_time=ToolTimePolicy.parse("none")),
                history=HistoryPolicy(output=mode, reasoning="keep"),
            )  # fmt: skip
            result = await asyncio.to_thread(execute, spec)
            assert result.summary["errors"] == 0
            second = seen[1][1]["messages"]
            assert second[1]["content"] == expected
            if mode == "live":
                assert second[1]["reasoning_content"] == "hmm"
                assert (
                    orjson.loads((tmp_path / "live.jsonl").read_bytes().splitlines()[0])["request"]["history"]["output"]
                    == "live"
                )
    finally:
        await runner.cleanup()
