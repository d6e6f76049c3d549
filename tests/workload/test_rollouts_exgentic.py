"""RL rollout traces and Exgentic recorded sessions, each from a small file made from its public description.

Rollouts: every size the trace states is the replayed prompt's size by the loader's count, the tool times are the
pauses, and the streams of a group share their prompt byte for byte, so the simulated host (its truth log) serves a
group's later stream its prompt from the cache. Exgentic: exact inputs, the answer from the next call, the output
limit, and the tool time from the start (and end) times."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.loops.closed_loop import LoadConfig
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.importers import ImportFailure, detect_format, import_paths, write_canonical
from replay.workload.trajectory import load_workload

ROLLOUTS = [
    {"group": "g1", "stream": 0, "prompt_len": 2000, "out_lens": [50, 80, 20], "obs_lens": [300, 120],
     "tool_times": [1.5, 0.25]},
    {"group": "g1", "stream": 1, "prompt_len": 2000, "out_lens": [70, 10], "obs_lens": [40, 0], "tool_times": [3.0, 0]},
    {"group": "g2", "stream": "a", "prompt_len": 600, "out_lens": [5], "obs_lens": [], "tool_times": []},
]  # fmt: skip


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def canonical(tmp_path: Path, *paths: Path, fmt: str = "auto") -> Path:
    out = tmp_path / "w.jsonl"
    with out.open("wb") as fh:
        write_canonical(import_paths(paths, fmt).trajectories, fh)
    return out


def test_rollout_sizes_pauses_and_shared_prompt(tmp_path):
    path = write_jsonl(tmp_path / "rl.jsonl", ROLLOUTS)
    assert detect_format(path) == "rollout"
    trajs = load_workload([canonical(tmp_path, path)]).by_id()
    assert sorted(trajs) == ["rollout/rl/g1/0", "rollout/rl/g1/1", "rollout/rl/g2/a"]
    for row in ROLLOUTS:
        t = trajs[f"rollout/rl/{row['group']}/{row['stream']}"]
        outs, obs = row["out_lens"], row["obs_lens"]
        # the context as the rollout counts it: the prompt, then every answer and observation so far
        assert [turn.prompt_tokens_est for turn in t.turns] == [
            row["prompt_len"] + sum(outs[:i]) + sum(obs[:i]) for i in range(len(outs))
        ]
        assert [turn.output_tokens for turn in t.turns] == outs
        assert [turn.output_message.tokens - 4 for turn in t.turns] == outs  # each answer is as long as stated
        assert [turn.tool_time_s for turn in t.turns] == [*row["tool_times"][: len(outs) - 1], 0.0]
    a, b = trajs["rollout/rl/g1/0"], trajs["rollout/rl/g1/1"]
    assert a.turns[0].append[0].wire == b.turns[0].append[0].wire  # the group's prompt: the same bytes
    assert a.turns[0].append[0].wire != trajs["rollout/rl/g2/a"].turns[0].append[0].wire
    assert a.turns[0].output_message.wire != b.turns[0].output_message.wire  # the streams answer each their own


def test_a_group_shares_its_prompt_in_the_host_cache(tmp_path):
    path = write_jsonl(tmp_path / "rl.jsonl", ROLLOUTS[:2])
    spec = RunSpec(
        trajectories=[str(canonical(tmp_path, path))], out=str(tmp_path / "run.jsonl"), progress=False,
        load=LoadConfig(concurrency=1, tool_time=ToolTimePolicy.parse("none")),
        sim_profile="instant", sim_truth_log=str(tmp_path / "truth.jsonl"),
    )  # fmt: skip
    execute(spec)
    truth = [orjson.loads(line) for line in (tmp_path / "truth.jsonl").read_bytes().splitlines()]
    requests = [r for r in (orjson.loads(x) for x in (tmp_path / "run.jsonl").read_bytes().splitlines())
                if r.get("type") == "request"]  # fmt: skip
    by_id = {t["request_id"]: t for t in truth}
    firsts = sorted((r for r in requests if r["turn"] == 0), key=lambda r: r["t_sent"])
    assert len(firsts) == 2 and all(r["error"] is None for r in requests)
    second = by_id[firsts[1]["id"]]
    # the later stream's first call finds the group's system prompt in the cache (measured: 2,016 of 2,025 tokens)
    assert second["cached_tokens"] >= 1900, second
    assert by_id[firsts[0]["id"]]["cached_tokens"] < 100


@pytest.mark.parametrize(
    ("row", "where"),
    [
        ({**ROLLOUTS[0], "obs_lens": [1]}, "$.obs_lens: expected 3 or 2 entries"),
        ({**ROLLOUTS[0], "out_lens": [50, 0, 20]}, "$.out_lens[1]: expected a whole number of tokens >= 1"),
        ({**ROLLOUTS[0], "tool_times": [1, -2]}, "$.tool_times[1]: expected seconds from 0 to 86400"),
        ({k: v for k, v in ROLLOUTS[0].items() if k != "prompt_len"}, "$.prompt_len: missing"),
    ],
)
def test_rollout_bad_input_names_file_line_and_field(tmp_path, row, where):
    path = write_jsonl(tmp_path / "rl.jsonl", [ROLLOUTS[1], row])
    with pytest.raises(ImportFailure) as err:
        import_paths([path], "rollout")
    assert str(err.value).startswith(f"{path}:2: {where}"), str(err.value)


def test_rollout_duplicate_stream_and_alias(tmp_path):
    path = write_jsonl(tmp_path / "rl.jsonl", [ROLLOUTS[0], ROLLOUTS[0]])
    got = CliRunner().invoke(main, ["import", "--from", "rollouts", str(path), "-o", str(tmp_path / "o.jsonl")])
    assert got.exit_code == 1 and "rl.jsonl:2: $.stream: group 'g1' stream '0' is already on line 1" in got.output


SYS = {"role": "system", "content": "You are a web agent."}
ASK = {"role": "user", "content": "Book a table."}
CALL = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q":"table"}'}}
ANSWER = {"role": "assistant", "content": None, "tool_calls": [CALL]}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "3 restaurants"}
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
SESSION = {
    "session_id": "task-7",
    "tools": TOOLS,
    "calls": [
        {"messages": [SYS, ASK], "max_tokens": 512, "start_time": "2026-05-01T12:00:00Z",
         "end_time": "2026-05-01T12:00:02Z", "usage": {"prompt_tokens": 40, "completion_tokens": 18}},
        {"messages": [SYS, ASK, ANSWER, RESULT], "max_tokens": 256, "start_time": "2026-05-01T12:00:09.5Z",
         "response": "Booked at the first one."},
    ],
}  # fmt: skip


def test_exgentic_session(tmp_path):
    path = write_jsonl(tmp_path / "ex.jsonl", [SESSION])
    assert detect_format(path) == "exgentic"
    t = load_workload([canonical(tmp_path, path)]).by_id()["exgentic/ex/task-7"]
    assert t.tools == TOOLS
    one, two = t.turns
    assert [m.raw for m in one.append] == [SYS, ASK]
    assert one.output_tool_calls == [CALL]  # the answer: the assistant message after its input in the next call
    assert [m.raw for m in two.append] == [RESULT] and two.truncate_to is None
    assert two.output["content"] == "Booked at the first one."
    assert one.output_tokens == 18  # the recorded usage
    assert one.recorded["max_tokens"] == 512 and one.recorded["latency_s"] == 2.0
    assert one.recorded["timestamp"] == datetime.fromisoformat("2026-05-01T12:00:00+00:00").timestamp()
    assert one.tool_time_s == 7.5  # the next start minus this end
    assert two.recorded["max_tokens"] == 256


def test_exgentic_without_ends_and_as_a_json_array(tmp_path):
    calls = [{k: v for k, v in c.items() if k != "end_time"} for c in SESSION["calls"]]
    calls[1].pop("response")
    path = tmp_path / "ex.json"
    path.write_text(json.dumps([{**SESSION, "calls": calls}]))
    (traj,) = import_paths([path]).trajectories
    assert traj.header["source"]["tool_time"].startswith("gap between call starts")
    assert traj.turns[0]["tool_time_s"] == 9.5
    last = traj.turns[1]
    assert last["recorded"]["output_missing"] is True and last["output_tokens"] == 256  # the limit, with no answer


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda c: c.pop("max_tokens"), "$.calls[1].max_tokens: missing"),
        (lambda c: c.update(start_time="soon"), "$.calls[1].start_time: expected an ISO 8601 time or unix seconds"),
        (lambda c: c["messages"][0].update(role="bot"), "$.calls[1].messages[0].role: expected one of"),
    ],
)
def test_exgentic_bad_input_names_file_line_and_field(tmp_path, change, where):
    session = json.loads(json.dumps(SESSION))
    change(session["calls"][1])
    path = write_jsonl(tmp_path / "ex.jsonl", [SESSION, session])
    got = CliRunner().invoke(main, ["import", "--from", "exgentic", str(path), "-o", str(tmp_path / "o.jsonl")])
    assert got.exit_code == 1 and f"ex.jsonl:2: {where}" in got.output, got.output
    assert "Traceback" not in got.output
