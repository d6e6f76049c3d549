"""Importers on small synthetic sources: every format, detection, refusals, errors, subagent linking, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.workload.importers import IMPORTERS, ImportFailure, Refused, detect_format, import_paths, write_canonical
from replay.workload.importers._blocks import BlockText, vocabulary
from replay.workload.tokens import get_tokenizer
from replay.workload.trajectory import load_workload

ENC = get_tokenizer()


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def load(tmp_path: Path, *paths, **kw):
    """Import, write canonically, load with the loader (which validates everything, spawns included)."""
    result = import_paths(paths, **kw)
    out = tmp_path / "out.jsonl"
    with out.open("wb") as fh:
        write_canonical(result.trajectories, fh)
    return result, {t.id: t for t in load_workload([out]).trajectories}


def lines_of(tmp_path: Path) -> list[dict]:
    return [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]


def test_importers_table_names_every_format():
    assert set(IMPORTERS) == {
        "swe-agent",
        "mini-swe-agent",
        "openhands",
        "claude-code",
        "openai-log",
        "mooncake",
        "weka",
        "otel",
        "mooncake-agentic",
        "tracelab",
        "hcua",
        "atif",
        "exgentic",
        "rollout",
    }
    assert all(callable(f) for f in IMPORTERS.values())


# ------------------------------------------------------------------------------------------- openai-log

SYS = {"role": "system", "content": "You are a coding agent."}


def _req(messages, answer, **extra):
    return {
        "messages": messages,
        "response": {"choices": [{"message": answer}], "usage": extra.pop("usage", {})},
        **extra,
    }


def test_openai_log_sessions_by_prefix_with_timing_and_usage(tmp_path):
    a1 = [SYS, {"role": "user", "content": "fix bug A"}]
    b1 = [SYS, {"role": "user", "content": "fix bug B"}]
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
    ans_a1 = {"role": "assistant", "content": None, "tool_calls": [call]}
    a2 = [*a1, ans_a1, {"role": "tool", "tool_call_id": "c1", "content": "a.py b.py"}]
    rows = [
        _req(a1, ans_a1, timestamp=100.0, latency_s=2.0, usage={"prompt_tokens": 30, "completion_tokens": 9}),
        _req(b1, {"role": "assistant", "content": "Looking."}, timestamp=101.0, latency_s=1.0),
        _req(a2, {"role": "assistant", "content": "Done."}, timestamp=105.0, latency_s=1.5),
        {"messages": [*b1, {"role": "assistant", "content": "Looking."}, {"role": "user", "content": "go on"}]},
    ]
    path = write_jsonl(tmp_path / "log.jsonl", rows)
    assert detect_format(path) == "openai-log"
    result, trajs = load(tmp_path, path)
    a, b = result.trajectories
    assert [len(a.turns), len(b.turns)] == [2, 2]
    assert a.header["source"]["grouping"] == "prefix" and a.header["source"]["lines"] == [1, 3]
    ta = trajs[a.id]
    assert ta.turns[0].output["tool_calls"][0]["function"]["arguments"] == '{"cmd": "ls"}'
    assert ta.turns[0].output_tokens == 9  # recorded completion tokens
    assert ta.turns[0].tool_time_s == pytest.approx(105.0 - 102.0)  # next start − this end
    assert ta.turns[0].recorded["latency_s"] == 2.0 and ta.turns[0].recorded["prompt_tokens"] == 30
    assert ta.turns[1].output_tokens == len(ENC.encode("Done."))  # counted when not recorded
    assert ta.turns[1].reusable_prefix_tokens == ta.turns[0].prompt_tokens_est - 3 + ta.turns[0].output_message.tokens
    assert a.turns[1]["append"] == [{"role": "tool", "tool_call_id": "c1", "content": "a.py b.py"}]
    tb = trajs[b.id]
    assert tb.turns[1].recorded["output_missing"] is True and "truncate_to" not in b.turns[1]


def test_openai_log_session_ids_keep_rewritten_history_as_truncation(tmp_path):
    u1, u2 = {"role": "user", "content": "step one " * 20}, {"role": "user", "content": "step two"}
    ans = {"role": "assistant", "content": "ok"}
    rows = [
        {
            "session_id": "s",
            "request": {"model": "m", "messages": [SYS, u1]},
            "response": {"body": {"choices": [{"message": ans}]}},
        },
        {"session_id": "s", "request": {"messages": [SYS, u1, ans, u2]}, "response": "fine"},
        {"session_id": "s", "request": {"messages": [SYS, {"role": "user", "content": "summary"}, u2]}, "output": "x"},
        {"messages": [SYS, {"role": "user", "content": "no id: a session by prefix"}], "output": "y"},
    ]
    result, trajs = load(tmp_path, write_jsonl(tmp_path / "s.jsonl", rows))
    t, other = result.trajectories
    assert other.header["source"]["grouping"] == "prefix" and len(other.turns) == 1
    assert t.id.endswith("/s") and "truncate_to" not in t.turns[1] and t.turns[2]["truncate_to"] == 1
    assert t.turns[2]["append"][0]["content"] == "summary"
    loaded = trajs[t.id]
    assert loaded.turns[2].reusable_prefix_tokens == loaded.turns[0].append[0].tokens  # only the system prompt
    assert t.header["source"]["tool_time"] == "none recorded"


# ------------------------------------------------------------------------------------------- mooncake


def test_mooncake_block_text_exact_sizes_shared_ids_and_sessions(tmp_path):
    rows = [
        {"timestamp": 0, "input_length": 40, "output_length": 5, "hash_ids": [1, 2, 3]},  # 2 full + 8 tokens
        {"timestamp": 10, "input_length": 90, "output_length": 7, "hash_ids": [7, 8, 9, 10, 11, 12]},
        {"timestamp": 20, "input_length": 80, "output_length": 3, "hash_ids": [1, 2, 4, 5, 6]},  # extends the first
    ]
    path = write_jsonl(tmp_path / "trace.jsonl", rows)
    assert detect_format(path) == "mooncake"
    result, trajs = load(tmp_path, path, block_size=16)
    first, other = result.trajectories
    assert [len(first.turns), len(other.turns)] == [2, 1]
    t = trajs[first.id]
    for turn, row in zip(t.turns, [rows[0], rows[2]], strict=True):
        # Mooncake ids cover the partial block too: no tail, so the estimate adds the loader's framing.
        assert turn.prompt_tokens_est == row["input_length"] + 4 * turn.context_len + 3
        assert turn.output_tokens == row["output_length"]
    # Block 1 and 2 are shared: the second call reuses exactly the messages holding them.
    assert t.turns[1].reusable_prefix_tokens == 2 * 16 + 4
    assert t.turns[1].truncate_to == 1
    texts = BlockText()
    assert first.turns[0]["append"][0]["content"] == texts.block(1, 16, 16) + texts.block(2, 16, 16)
    assert len(ENC.encode(texts.block(1, 16, 16) + texts.block(3, 8, 16))) == 24
    assert texts.block(3, 8, 16) == texts.block(3, 16, 16)[: len(texts.block(3, 8, 16))]
    assert first.turns[0]["recorded"]["arrival_s"] == 0.0 and first.header["source"]["tool_time"].startswith("none")


def test_block_vocabulary_is_one_token_per_word_in_any_concatenation():
    words = vocabulary()
    assert len(words) > 600
    text = BlockText("salt")
    blob = "".join(text.block(i, 64, 64) for i in range(50)) + text.filler("x", 17)
    assert len(ENC.encode(blob)) == 50 * 64 + 17
    assert text.block(5, 64, 64) != BlockText().block(5, 64, 64)


# ------------------------------------------------------------------------------------------- weka


def _weka(scope="global"):
    def leaf(t, n_in, out, ids, think=0.0, api=1.0):
        return {
            "t": t,
            "type": "n",
            "model": "m",
            "in": n_in,
            "out": out,
            "hash_ids": ids,
            "think_time": think,
            "api_time": api,
        }

    sub = {
        "t": 30.0,
        "type": "subagent",
        "agent_id": "sub1",
        "duration_ms": 20000,
        "tool_tokens": 16,
        "system_tokens": 0,
        "requests": [leaf(0.0, 60, 4, [1, 2, 50, 51]), leaf(3.0, 80, 6, [1, 2, 50, 51, 52, 53], think=1.0)],
    }
    return {
        "id": "sess",
        "block_size": 8,
        "hash_id_scope": scope,
        "tool_tokens": 16,
        "system_tokens": 0,
        "models": ["m"],
        "requests": [
            leaf(0.0, 70, 5, [1, 2, 3, 4, 5]),
            leaf(5.0, 90, 5, [1, 2, 3, 4, 5, 6, 7], think=4.0),
            sub,
            leaf(45.0, 110, 9, [1, 2, 3, 4, 5, 6, 7, 8], think=39.0),
        ],
    }


def test_weka_subagents_spawn_tool_time_and_scope(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_weka()))
    assert detect_format(path) == "weka"
    result, trajs = load(tmp_path, path)
    parent, sub = result.trajectories
    assert sub.header["subagent"] is True and sub.id == "weka/sess/sub1"
    assert parent.turns[1]["spawn"] == [{"trajectory": sub.id, "fork": False}]  # finished at 6 s < start at 10 s
    # Its pause: gap before the next call (39 s) minus the time to the subagent's completion (30 − 6 = 24 s).
    assert (
        parent.turns[1]["tool_time_s"] == pytest.approx(15.0) and parent.turns[1]["recorded"]["recorded_gap_s"] == 39.0
    )
    assert parent.turns[0]["tool_time_s"] == 4.0 and parent.turns[0]["append"][0]["role"] == "system"
    # Global ids: the subagent's first blocks are the parent's (same text); per-conversation scope: not.
    assert sub.turns[0]["append"][0]["content"] == parent.turns[0]["append"][0]["content"]
    (tmp_path / "scoped.json").write_text(json.dumps(_weka("conversation")))
    p2, s2 = import_paths([tmp_path / "scoped.json"]).trajectories
    assert s2.turns[0]["append"][0]["content"] != p2.turns[0]["append"][0]["content"]
    # The unique tail of each call absorbs the loader's framing: estimates equal the trace's sizes.
    assert [t.prompt_tokens_est for t in trajs[sub.id].turns] == [60, 80]
    assert [t.prompt_tokens_est for t in trajs[parent.id].turns] == [70, 90, 110]
    assert trajs[parent.id].turns[2].reusable_prefix_tokens == 7 * 8 + 3 * 4  # 7 shared blocks in 3 messages


def test_same_file_twice_gets_unique_ids_and_spawns_follow(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_weka()))
    result, _ = load(tmp_path, path, path)
    ids = [t.id for t in result.trajectories]
    assert ids == ["weka/sess", "weka/sess/sub1", "weka/sess~2", "weka/sess~2/sub1"]
    assert result.trajectories[2].turns[1]["spawn"][0]["trajectory"] == "weka/sess~2/sub1"


# ------------------------------------------------------------------------------------------- claude code


def _cc(kind, ts, uuid, parent, message=None, **extra):
    row = {"type": kind, "timestamp": ts, "uuid": uuid, "parentUuid": parent, "sessionId": "S1", "isSidechain": False}
    if message is not None:
        row["message"] = message
    row.update(extra)
    return row


def _assistant(mid, blocks, out=10, read=100, model="claude-x"):
    usage = {"input_tokens": 5, "cache_read_input_tokens": read, "cache_creation_input_tokens": 7, "output_tokens": out}
    return {"model": model, "id": mid, "role": "assistant", "content": blocks, "usage": usage}


def _result(tid, text):
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": text}]}


def _session(tmp_path: Path) -> Path:
    agent_use = {
        "type": "tool_use",
        "id": "toolu_A",
        "name": "Agent",
        "input": {"prompt": "explore", "subagent_type": "Explore"},
    }
    rows = [
        _cc("user", "2026-01-01T00:00:00.000Z", "u1", None, {"role": "user", "content": "study the repo"}),
        _cc(
            "assistant",
            "2026-01-01T00:00:02.000Z",
            "a1",
            "u1",
            _assistant("m1", [{"type": "thinking", "thinking": "hmm"}]),
        ),
        _cc(
            "assistant",
            "2026-01-01T00:00:03.000Z",
            "a2",
            "a1",
            _assistant("m1", [{"type": "text", "text": "Delegating."}, agent_use]),
        ),
        _cc(
            "progress",
            "2026-01-01T00:00:04.000Z",
            "p1",
            "a2",
            parentToolUseID="toolu_A",
            data={"type": "agent_progress", "agentId": "abc"},
        ),
        _cc("user", "2026-01-01T00:01:00.000Z", "u2", "p1", _result("toolu_A", "report")),
        _cc(
            "assistant",
            "2026-01-01T00:01:05.000Z",
            "a3",
            "u2",
            _assistant("m2", [{"type": "text", "text": "All done."}]),
        ),
    ]
    session = write_jsonl(tmp_path / "S1.jsonl", rows)
    side = {"isSidechain": True, "agentId": "abc"}
    bash = {"type": "tool_use", "id": "toolu_B", "name": "Bash", "input": {"command": "ls"}}
    sub = [
        _cc("user", "2026-01-01T00:00:04.000Z", "s1", None, {"role": "user", "content": "explore"}, **side),
        _cc("assistant", "2026-01-01T00:00:06.000Z", "s2", "s1", _assistant("m3", [bash]), **side),
        _cc("user", "2026-01-01T00:00:06.500Z", "s3", "s2", _result("toolu_B", "a.py"), **side),
        _cc(
            "assistant",
            "2026-01-01T00:00:54.000Z",
            "s4",
            "s3",
            _assistant("m4", [{"type": "text", "text": "report"}]),
            **side,
        ),
    ]
    write_jsonl(tmp_path / "agent-abc.jsonl", sub)
    return session


def test_claude_code_parent_spawns_its_subagent_transcript(tmp_path):
    session = _session(tmp_path)
    assert detect_format(session) == "claude-code"
    result, trajs = load(tmp_path, tmp_path)  # the directory: the agent file is claimed by its parent
    assert [t.id for t in result.trajectories] == ["claude-code/S1", "claude-code/S1/agent-abc"]
    parent, sub = result.trajectories
    assert sub.header["subagent"] is True and sub.header["source"]["agent_id"] == "abc"
    first = parent.turns[0]
    assert first["output"] == {
        "content": "Delegating.",
        "reasoning": "hmm",
        "tool_calls": [
            {
                "id": "toolu_A",
                "type": "function",
                "function": {"name": "Agent", "arguments": '{"prompt":"explore","subagent_type":"Explore"}'},
            }
        ],
    }
    assert first["spawn"] == [{"trajectory": sub.id, "fork": False}]
    # Gap 57 s (00:03 → 01:00) minus the subagent's span (00:04 → 00:54, 50 s).
    assert first["tool_time_s"] == pytest.approx(7.0) and first["recorded"]["recorded_gap_s"] == pytest.approx(57.0)
    assert first["recorded"] == first["recorded"] | {"prompt_tokens": 112, "cached_tokens": 100, "latency_s": 3.0}
    assert parent.turns[1]["append"] == [{"role": "tool", "tool_call_id": "toolu_A", "content": "report"}]
    assert sub.turns[0]["tool_time_s"] == pytest.approx(0.5) and sub.turns[1]["recorded"]["latency_s"] == 47.5
    assert trajs[parent.id].turns[0].spawn[0].trajectory == sub.id  # the loader resolved it
    # The subagent file alone is an ordinary task, marked as a sidechain.
    (alone,) = import_paths([tmp_path / "agent-abc.jsonl"]).trajectories
    assert alone.id == "claude-code/agent-abc" and alone.header["source"]["sidechain"] is True
    assert "subagent" not in alone.header


def test_claude_code_inline_sidechain_linked_by_prompt_and_compaction(tmp_path):
    use = {"type": "tool_use", "id": "toolu_T", "name": "Task", "input": {"prompt": "look around"}}
    side = {"isSidechain": True, "agentId": "zz"}
    rows = [
        _cc("user", "2026-01-01T00:00:00Z", "u1", None, {"role": "user", "content": "go"}),
        _cc("assistant", "2026-01-01T00:00:01Z", "a1", "u1", _assistant("m1", [use])),
        _cc("user", "2026-01-01T00:00:02Z", "x1", None, {"role": "user", "content": "look around"}, **side),
        _cc(
            "assistant",
            "2026-01-01T00:00:04Z",
            "x2",
            "x1",
            _assistant("m9", [{"type": "text", "text": "seen"}]),
            **side,
        ),
        _cc("user", "2026-01-01T00:00:05Z", "u2", "a1", _result("toolu_T", "seen")),
        _cc("assistant", "2026-01-01T00:00:06Z", "a2", "u2", _assistant("m2", [{"type": "text", "text": "ok"}])),
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "c",
            "sessionId": "S2",
            "timestamp": "2026-01-01T00:00:07Z",
        },
        _cc("user", "2026-01-01T00:00:08Z", "u3", None, {"role": "user", "content": "summary of it all"}),
        _cc("assistant", "2026-01-01T00:00:09Z", "a3", "u3", _assistant("m3", [{"type": "text", "text": "next"}])),
    ]
    result, trajs = load(tmp_path, write_jsonl(tmp_path / "S2.jsonl", rows))
    parent, sub = result.trajectories
    assert sub.id == "claude-code/S2/agent-zz" and parent.turns[0]["spawn"][0]["trajectory"] == sub.id
    assert parent.turns[2]["truncate_to"] == 0 and parent.turns[2]["append"][0]["content"] == "summary of it all"
    assert trajs[parent.id].turns[2].reusable_prefix_tokens == 0


# ------------------------------------------------------------------------------------------- swe-agent


def test_swe_agent_query_layout_keeps_rewritten_history(tmp_path):
    s = {"role": "system", "content": "sys"}
    u = {"role": "user", "content": "issue"}
    a1 = {"role": "assistant", "content": "look", "thought": "t", "agent": "main"}
    o1 = {"role": "user", "content": "long output " * 30}
    a2 = {"role": "assistant", "content": "edit"}
    o2 = {"role": "user", "content": "edited"}
    elided = {"role": "user", "content": "Old environment output: (30 lines omitted)"}
    steps = [
        {"query": [s, u], "response": "look", "execution_time": "1.5", "action": "ls"},
        {"query": [s, u, a1, o1], "response": "edit", "execution_time": 0.25},
        {"query": [s, u, a1, elided, a2, o2], "response": "submit", "execution_time": 0.1},
    ]
    path = tmp_path / "run.traj"
    path.write_text(json.dumps({"trajectory": steps, "history": [], "info": {"exit_status": "submitted"}}))
    assert detect_format(path) == "swe-agent"
    result, _ = load(tmp_path, path)
    (t,) = result.trajectories
    assert [x.get("truncate_to") for x in t.turns] == [None, None, 3]
    assert t.turns[2]["append"] == [elided, {"role": "assistant", "content": "edit"}, o2]
    assert [x["tool_time_s"] for x in t.turns] == [1.5, 0.25, 0.0]
    assert t.turns[0]["append"][0] == {"role": "system", "content": "sys"}  # SWE-agent bookkeeping dropped
    assert t.header["source"]["input"].startswith("trajectory[].query")


# ------------------------------------------------------------------------------------------- detection, errors


def test_detection_refusals(tmp_path):
    (tmp_path / "README.md").write_text("# notes\n")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    (tmp_path / "other.json").write_text('{"foo": 1, "bar": [1]}')
    (tmp_path / "canon.jsonl").write_text('{"format": "replay.trajectory/1", "id": "x"}\n')
    with pytest.raises(Refused, match=r"README.md: not JSON or JSON Lines"):
        detect_format(tmp_path / "README.md")
    with pytest.raises(Refused, match="empty file"):
        detect_format(tmp_path / "empty.jsonl")
    with pytest.raises(Refused, match=r"no known trajectory format \(top level: \['bar', 'foo'\]\)"):
        detect_format(tmp_path / "other.json")
    assert detect_format(tmp_path / "canon.jsonl") == "canonical"
    mini = tmp_path / "x.traj.json"
    mini.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1.1", "messages": []}))
    assert detect_format(mini) == "mini-swe-agent"
    ((_, reason, explicit),) = import_paths([mini]).refused
    assert reason.startswith("no assistant message") and explicit


def test_refused_explicit_file_is_reported_not_raised_by_import_paths(tmp_path):
    (tmp_path / "README.md").write_text("# notes\n")
    result = import_paths([tmp_path / "README.md"])
    assert result.trajectories == [] and result.refused[0][2] is True


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "log.jsonl",
            '{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": [{"role": "bot", "content": "x"}]}\n',
            r"log.jsonl:2: \$.messages\[0\].role: expected one of system, developer, user, assistant, tool; got 'bot'",
        ),
        (
            "mc.jsonl",
            '{"timestamp": 0, "input_length": 100, "output_length": 1, "hash_ids": [1, 2, 3]}\n',
            r"mc.jsonl:1: \$.hash_ids: expected 0 or 1 ids for input_length 100",
        ),
        (
            "m.traj.json",
            '{"trajectory_format": "mini-swe-agent-1.1", "messages": [{"role": "assistant", "content": "x",'
            ' "tool_calls": [{"function": {"arguments": "{}"}}]}]}',
            r"m.traj.json: \$.messages\[0\].tool_calls\[0\].function.name: expected a string",
        ),
        (
            "w.json",
            '{"block_size": 64, "requests": [{"t": 0, "in": 10, "out": 1}]}',
            r"w.json: \$.requests\[0\].hash_ids: missing",
        ),
        ("cc.jsonl", '{"type": "user", "uuid": "u", "sessionId": "s"}\n', r"cc.jsonl:1: \$.message: missing"),
        (
            "oh.json",
            '[{"id": 0, "source": "agent", "action": "run",'
            ' "tool_call_metadata": {"model_response": {"id": "r", "choices": []}}}]',
            r"oh.json: \$\[0\].tool_call_metadata.model_response.choices: expected a non-empty list",
        ),
        ("bad.jsonl", '{"messages": []}\n{not json\n', r"bad.jsonl:2: not valid JSON"),
    ],
)
def test_bad_input_names_file_line_path_and_expectation(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ImportFailure, match=message):
        import_paths([path])


def test_forced_format_on_the_wrong_file_says_what_was_expected(tmp_path):
    path = write_jsonl(tmp_path / "log.jsonl", [{"messages": [SYS]}, {"messages": [SYS]}])
    with pytest.raises(ImportFailure, match=r"not valid JSON .*expected a Weka trace"):
        import_paths([path], "weka")
    with pytest.raises(ValueError, match="unknown format 'nope'"):
        import_paths([path], "nope")


# ------------------------------------------------------------------------------------------- CLI


def test_cli_import_directory_skips_non_trajectories_and_refuses_named_ones(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    write_jsonl(
        src / "log.jsonl", [_req([SYS, {"role": "user", "content": "hi"}], {"role": "assistant", "content": "yo"})]
    )
    (src / "README.md").write_text("# about\n")
    out = tmp_path / "w.jsonl"
    runner = CliRunner()
    res = runner.invoke(main, ["import", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "skipped" in res.output and "README.md: not JSON" in res.output
    assert "1 trajectory, 1 turn" in res.output and "trajectories" not in res.output
    assert load_workload([out]).turns == 1
    res = runner.invoke(main, ["import", str(src / "README.md"), "-o", str(out)])
    assert res.exit_code == 1 and "README.md: refused: not JSON or JSON Lines" in res.output
    res = runner.invoke(main, ["import", "--from", "openai-log", str(src / "log.jsonl"), "-o", "-", "-q"])
    assert res.exit_code == 0 and json.loads(res.stdout.splitlines()[0])["format"] == "replay.trajectory/1"
    res = runner.invoke(main, ["import", str(src / "log.jsonl"), "--from", "weka", "-o", str(out)])
    assert res.exit_code == 1 and "log.jsonl: $.block_size: missing; expected the block size" in res.output


def test_claude_code_says_per_call_how_much_context_the_transcript_lacks(tmp_path):
    result, trajs = load(tmp_path, _session(tmp_path))
    for imported in result.trajectories:
        loaded = trajs[imported.id]
        gaps = [t.recorded["unrecorded_context_tokens"] for t in loaded.turns]
        # provider's prompt (input + cache read + cache creation) minus what the replay sends, call by call
        assert gaps == [t.recorded["prompt_tokens"] - t.prompt_tokens_est for t in loaded.turns]
        assert imported.header["source"]["unrecorded_context_tokens"] == sum(gaps)
        assert "system prompt" in imported.header["source"]["unrecorded_context_note"]


# ------------------------------------------------------------------------------------------- mini-swe-agent


def _mini(tmp_path: Path) -> Path:
    def assistant(n, command, completion, ts):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": json.dumps(command)}}
        usage = {"prompt_tokens": 100 * n, "completion_tokens": completion}
        return {"role": "assistant", "content": None, "tool_calls": [call],
                "extra": {"timestamp": ts, "response": {"created": int(ts) - 1, "usage": usage}}}  # fmt: skip

    def tool(n, text, ts):
        return {"role": "tool", "tool_call_id": f"c{n}", "content": text, "extra": {"timestamp": ts}}

    error = {"role": "user", "content": "No tool calls found.", "extra": {"interrupt_type": "FormatError"}}
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "fix it"},
        assistant(1, "ls", 30, 10.0),
        tool(1, "a.py", 11.0),
        error,
        dict(error),
        assistant(2, "cat a.py", 50, 20.0),
        tool(2, "print(1)", 21.0),
        assistant(3, "submit", 70, 30.0),
        {"role": "exit", "content": ""},
    ]
    data = {"trajectory_format": "mini-swe-agent-1.1", "messages": messages,
            "info": {"model_stats": {"api_calls": 5}}}  # fmt: skip
    path = tmp_path / "m.traj.json"
    path.write_text(json.dumps(data))
    return path


def test_mini_swe_agent_discarded_calls_are_counted_or_replayed(tmp_path):
    path = _mini(tmp_path)
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    kept, kept_trajs = load(tmp_path / "a", path)
    (plain,) = kept.trajectories
    assert len(plain.turns) == 3 and plain.header["source"]["unrecorded_calls"] == 2
    assert plain.header["source"]["unrecorded_calls_replayable"] is True
    full, full_trajs = load(tmp_path / "b", path, include_discarded=True)
    (traj,) = full.trajectories
    source = traj.header["source"]
    assert len(traj.turns) == 5 == source["api_calls"] and "unrecorded_calls" not in source
    assert source["discarded_calls"] == 2 and "stand-in answer of 50 tokens" in source["discarded_calls_note"]
    first, d1, d2, second, _ = traj.turns
    for d in (d1, d2):  # exact input, an empty stand-in answer as long as the median kept answer
        assert d["recorded"] == {"discarded": "FormatError", "output_missing": True}
        assert d["output"] == {"content": ""} and d["output_tokens"] == 50 and d["tool_time_s"] == 0.0
    assert d1["append"] == [{"role": "tool", "tool_call_id": "c1", "content": "a.py"}] and "truncate_to" not in d1
    # each next call drops the discarded answer again and sees the error message, as the agent did
    assert d2["truncate_to"] == 4 and d2["append"] == [{"role": "user", "content": "No tool calls found."}]
    assert second["truncate_to"] == 5 and second["append"] == d2["append"]
    assert first["tool_time_s"] == pytest.approx(1.0)
    # the calls the agent kept send exactly the requests they sent without the discarded ones
    replayed = [t for t in full_trajs[traj.id].turns if not (t.recorded or {}).get("discarded")]
    assert [t.prompt_tokens_est for t in replayed] == [t.prompt_tokens_est for t in kept_trajs[plain.id].turns]
    assert [t.output_tokens for t in replayed] == [30, 50, 70]
    res = CliRunner().invoke(main, ["import", str(path), "--include-discarded", "-o", str(tmp_path / "c.jsonl")])
    assert res.exit_code == 0, res.output
    assert "1 trajectory, 5 turns ->" in res.stderr
