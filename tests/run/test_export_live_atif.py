"""replay export-trajectories RUN --format atif: a --history live run's conversations, the host's answers in them.

A run against the simulated host with live history; the written files validate against the RFC's schema and rules
(tests/workload/test_atif.py), and are checked against the run file's raw records, read here without replay: every
agent step's message is the host's answer as recorded, its metrics the host's counts, its time the call's; a recorded
tool result the live answer made no call for is the user's text; a spawned subagent is its own file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.loops.closed_loop import LoadConfig
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.history import HistoryPolicy
from replay.workload.importers import import_paths
from replay.workload.importers._messages import assistant_message
from tests.sessions.test_live_tool_ids import _strict_host, _trajectory
from tests.workload.test_atif import check_atif

CALL = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
WORKLOAD = [
    {"format": "replay.trajectory/1", "id": "demo/parent", "tools": [{"type": "function", "function": {"name": "x"}}]},
    {"append": [{"role": "system", "content": "sys"}, {"role": "user", "content": "fix it"}],
     "output": {"content": "", "tool_calls": [CALL]}, "output_tokens": 12, "tool_time_s": 0.01},
    {"append": [{"role": "tool", "tool_call_id": "call_1", "content": "a.py b.py"}],
     "output": {"content": "delegating"}, "output_tokens": 5, "tool_time_s": 0.01,
     "spawn": [{"trajectory": "demo/child"}]},
    {"append": [{"role": "user", "content": "and now?"}], "output": {"content": "done"}, "output_tokens": 3,
     "tool_time_s": 0},
    {"format": "replay.trajectory/1", "id": "demo/child", "subagent": True},
    {"append": [{"role": "user", "content": "sub task"}], "output": {"content": "ok"}, "output_tokens": 4,
     "tool_time_s": 0},
]  # fmt: skip


def _run(tmp_path: Path, history: str) -> Path:
    workload = tmp_path / "w.jsonl"
    workload.write_text("".join(json.dumps(r) + "\n" for r in WORKLOAD))
    run = tmp_path / f"{history}.jsonl"
    args = ["run", str(workload), "--history", history, "--tasks", "2", "-c", "1", "--tool-time", "none",
            "--sim-profile", "instant", "--out", str(run), "-q"]  # fmt: skip
    got = CliRunner().invoke(main, args)
    assert got.exit_code == 0, got.output
    return run


def test_live_run_conversation_as_atif(tmp_path):
    run = _run(tmp_path, "live")
    out = tmp_path / "atif"
    got = CliRunner().invoke(main, ["export-trajectories", str(run), "--format", "atif", "-o", str(out)])
    assert got.exit_code == 0, got.output
    docs = {p.name: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert sorted(docs) == ["task0_demo_child.json", "task0_demo_parent.json",
                            "task1_demo_child.json", "task1_demo_parent.json"]  # fmt: skip
    for doc in docs.values():
        check_atif(doc)
    records = [json.loads(line) for line in run.read_text().splitlines()]
    requests = [r for r in records if r["type"] == "request" and r["final"] and r["phase"] == "measured"]
    assert len(requests) == 8 and all(r["error"] is None and r["answer_text"] for r in requests)
    for r in requests:
        doc = docs[f"task{r['task']}_{r['trajectory'].replace('/', '_')}.json"]
        calls = [s for s in doc["steps"] if s["source"] == "agent" and s["extra"]["replay"].get("call") is not False]
        step = calls[r["turn"]]
        assert step["message"] == r["answer_text"]  # the host's answer, not the recording's
        assert step["metrics"]["prompt_tokens"] == r["prompt_tokens"]
        assert step["metrics"]["cached_tokens"] == r["cached_tokens"]
        assert step["metrics"]["completion_tokens"] == r["output_tokens"]
        assert step["extra"]["replay"]["recorded"]["latency_s"] == round(r["t_done"] - r["t_sent"], 6)
    parent = docs["task0_demo_parent.json"]
    # the simulated host answers in text: the recorded result of call_1 has no live call to answer, so it is the
    # user's text, as the run sent it
    texts = [s["message"] for s in parent["steps"] if s["source"] == "user"]
    assert texts[1] == "<tool_result>\na.py b.py\n</tool_result>"
    refs = [ref for s in parent["steps"] for res in s.get("observation", {}).get("results", ())
            for ref in res.get("subagent_trajectory_ref", ())]  # fmt: skip
    assert refs == [{"session_id": "task0/demo/child", "trajectory_path": "task0_demo_child.json"}]
    assert docs["task0_demo_child.json"]["extra"]["replay"]["subagent"] is True
    # imported again, the conversation replays as it went: the host's answers in the context
    back = tmp_path / "back.jsonl"
    got = CliRunner().invoke(main, ["import", "--from", "atif", str(out), "-o", str(back), "-q"])
    assert got.exit_code == 0, got.output
    lines = [json.loads(line) for line in back.read_text().splitlines()]
    outputs = [t["output"]["content"] for t in lines if "output" in t]
    assert sorted(outputs) == sorted(r["answer_text"] for r in requests)


def test_a_recorded_history_run_is_refused_with_the_reason(tmp_path):
    run = _run(tmp_path, "recorded")
    got = CliRunner().invoke(main, ["export-trajectories", str(run), "--format", "atif", "-o", str(tmp_path / "o")])
    assert got.exit_code == 1
    assert "a --history recorded run replays the recorded trajectories: export those" in got.output
    assert "Traceback" not in got.output


@pytest.fixture
def strict_host():
    url, seen, stop = _strict_host()
    try:
        yield url, seen
    finally:
        stop()


def test_the_exported_conversation_is_what_the_host_received(tmp_path, strict_host):
    """Against a host that answers with tool calls of its own (tests/sessions/test_live_tool_ids.py): imported
    again, every call's input is the messages the host received, message for message, live ids included."""
    url, seen = strict_host
    spec = RunSpec(
        trajectories=[str(_trajectory(tmp_path / "t.jsonl"))], host=url, model="m", retries=0,
        load=LoadConfig(concurrency=1, tool_time=ToolTimePolicy.parse("none"), salt_tasks=False),
        out=str(tmp_path / "live.jsonl"), history=HistoryPolicy(output="live"), progress=False,
    )  # fmt: skip
    run = execute(spec).path
    raw = [json.loads(line) for line in Path(run).read_text().splitlines()]
    kept = [r["answer_calls"] for r in raw if r["type"] == "request"]
    assert [len(c or ()) for c in kept] == [1, 0, 2, 1, 1, 1]  # the host's calls, kept on the records
    got = CliRunner().invoke(main, ["export-trajectories", str(run), "--format", "atif", "-o", str(tmp_path / "a")])
    assert got.exit_code == 0, got.output
    for path in (tmp_path / "a").glob("*.json"):
        check_atif(json.loads(path.read_text()))
    (traj,) = import_paths([tmp_path / "a"], "atif").trajectories
    context: list[dict] = []
    for k, turn in enumerate(traj.turns):
        del context[turn.get("truncate_to", len(context)) :]
        context.extend(turn["append"])
        assert context == seen[k]["messages"], k
        context.append(assistant_message(turn["output"]))
