"""ATIF (Harbor's RFC 0001): replay import --from atif and replay export-trajectories --format atif.

The written files are checked against a JSON Schema of the RFC written here from its field tables (not replay's
code), and against the reference validator's rules (step ids in order from 1, a result's source_call_id names a
tool call of its own step, agent-only fields on agent steps only). Round trip: import(export(x)) is x, by the
workload's fingerprint (turns, messages, tokens, tool pauses, recorded figures, spawns)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.workload.importers import ImportFailure, detect_format, import_paths, write_canonical
from replay.workload.trajectory import default_workload_path, load_workload

_ANY_EXTRA = {"type": "object"}
_TOOL_CALL = {
    "type": "object",
    "required": ["tool_call_id", "function_name", "arguments"],
    "properties": {"tool_call_id": {"type": "string"}, "function_name": {"type": "string"},
                   "arguments": {"type": "object"}, "extra": _ANY_EXTRA},
    "additionalProperties": False,
}  # fmt: skip
_REF = {
    "type": "object",
    "required": ["session_id"],
    "properties": {"session_id": {"type": "string"}, "trajectory_path": {"type": "string"}, "extra": _ANY_EXTRA},
    "additionalProperties": False,
}
_RESULT = {
    "type": "object",
    "properties": {"source_call_id": {"type": "string"}, "content": {"type": "string"},
                   "subagent_trajectory_ref": {"type": "array", "items": _REF}},
    "additionalProperties": False,
}  # fmt: skip
_COUNT = {"type": "integer", "minimum": 0}
_METRICS = {
    "type": "object",
    "properties": {"prompt_tokens": _COUNT, "completion_tokens": _COUNT, "cached_tokens": _COUNT,
                   "cost_usd": {"type": "number"}, "prompt_token_ids": {"type": "array"},
                   "completion_token_ids": {"type": "array"}, "logprobs": {"type": "array"}, "extra": _ANY_EXTRA},
    "additionalProperties": False,
}  # fmt: skip
_STEP = {
    "type": "object",
    "required": ["step_id", "source", "message"],
    "properties": {
        "step_id": {"type": "integer", "minimum": 1},
        "timestamp": {"type": "string"},
        "source": {"enum": ["system", "user", "agent"]},
        "model_name": {"type": "string"},
        "reasoning_effort": {"type": ["string", "number"]},
        "message": {"type": "string"},
        "reasoning_content": {"type": "string"},
        "tool_calls": {"type": "array", "items": _TOOL_CALL},
        "observation": {"type": "object", "required": ["results"], "additionalProperties": False,
                        "properties": {"results": {"type": "array", "items": _RESULT}}},
        "metrics": _METRICS,
        "extra": _ANY_EXTRA,
    },
    "additionalProperties": False,
}  # fmt: skip
ATIF_SCHEMA = {
    "type": "object",
    "required": ["schema_version", "session_id", "agent", "steps"],
    "properties": {
        "schema_version": {"type": "string", "pattern": r"^ATIF-v1\.[0-9]+$"},
        "session_id": {"type": "string"},
        "agent": {"type": "object", "required": ["name", "version"], "additionalProperties": False,
                  "properties": {"name": {"type": "string"}, "version": {"type": "string"},
                                 "model_name": {"type": "string"}, "extra": _ANY_EXTRA}},
        "steps": {"type": "array", "minItems": 1, "items": _STEP},
        "notes": {"type": "string"},
        "final_metrics": {"type": "object", "additionalProperties": False,
                          "properties": {"total_prompt_tokens": _COUNT, "total_completion_tokens": _COUNT,
                                         "total_cached_tokens": _COUNT, "total_cost_usd": {"type": "number"},
                                         "total_steps": _COUNT, "extra": _ANY_EXTRA}},
        "extra": _ANY_EXTRA,
    },
    "additionalProperties": False,
}  # fmt: skip
AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


def check_atif(doc: dict) -> None:
    """The RFC's schema, then the reference validator's rules."""
    jsonschema.validate(doc, ATIF_SCHEMA)
    assert [s["step_id"] for s in doc["steps"]] == list(range(1, len(doc["steps"]) + 1))
    for step in doc["steps"]:
        if step["source"] != "agent":
            assert not [k for k in AGENT_ONLY if k in step], step
        ids = {c["tool_call_id"] for c in step.get("tool_calls", ())}
        for r in step.get("observation", {}).get("results", ()):
            assert "source_call_id" not in r or r["source_call_id"] in ids, (step["step_id"], r)
        if "timestamp" in step:
            datetime.fromisoformat(step["timestamp"])


def export(tmp_path: Path, *paths: Path, name: str = "atif") -> list[Path]:
    out = tmp_path / name
    got = CliRunner().invoke(main, ["export-trajectories", *map(str, paths), "--format", "atif", "-o", str(out)])
    assert got.exit_code == 0, got.output
    return sorted(out.glob("*.json"))


def reimport(tmp_path: Path, src: Path, name: str = "back.jsonl") -> Path:
    out = tmp_path / name
    got = CliRunner().invoke(main, ["import", "--from", "atif", str(src), "-o", str(out), "-q"])
    assert got.exit_code == 0, got.output
    return out


def canonical(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


CALL = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
PARENT = [
    {"format": "replay.trajectory/1", "id": "demo/parent", "model": "m1", "tools": TOOLS, "source": {"x": 1}},
    {"append": [{"role": "system", "content": "sys"}, {"role": "user", "content": "fix it"}],
     "output": {"content": "", "reasoning": "think", "tool_calls": [CALL]}, "output_tokens": 31, "tool_time_s": 2.5,
     "recorded": {"prompt_tokens": 900, "cached_tokens": 0, "latency_s": 1.25, "timestamp": 1767225600.0,
                  "reasoning_tokens": 7, "cache_creation_tokens": 12}},
    {"append": [{"role": "tool", "tool_call_id": "call_1", "content": "a.py b.py"}],
     "output": {"content": "delegating"}, "output_tokens": 5, "tool_time_s": 0.5,
     "spawn": [{"trajectory": "demo/child", "fork": False}, {"trajectory": "demo/fork", "fork": True}]},
    {"truncate_to": 2, "append": [{"role": "user", "content": [{"type": "text", "text": "summary"}]}],
     "output": {"content": "done"}, "output_tokens": 3, "tool_time_s": 0},
    {"format": "replay.trajectory/1", "id": "demo/child", "subagent": True},
    {"append": [{"role": "user", "content": "sub task"}, {"role": "assistant", "content": "earlier"},
                {"role": "user", "content": "go"}],
     "output": {"content": "ok"}, "output_tokens": 2, "tool_time_s": 0},
    {"format": "replay.trajectory/1", "id": "demo/fork", "subagent": True},
    {"append": [{"role": "tool", "tool_call_id": "call_1", "content": "orphan"}],
     "output": {"content": "forked"}, "output_tokens": 2, "tool_time_s": 0},
]  # fmt: skip


@pytest.mark.parametrize("which", ["default", "spawns"])
def test_export_validates_and_round_trips_by_fingerprint(tmp_path, which):
    src = default_workload_path() if which == "default" else canonical(tmp_path / "p.jsonl", PARENT)
    files = export(tmp_path, src)
    before = load_workload([src])
    assert len(files) == len(before.trajectories)
    for f in files:
        check_atif(json.loads(f.read_text()))
    after = load_workload([reimport(tmp_path, tmp_path / "atif")])
    assert after.fingerprint == before.fingerprint
    by_id = after.by_id()
    assert sorted((t.id, t.subagent) for t in after.trajectories) == sorted(
        (t.id, t.subagent) for t in before.trajectories
    )
    # turns, tokens and pauses, read back one by one
    for a in before.trajectories:
        b = by_id[a.id]
        assert [(t.output_tokens, t.tool_time_s, t.prompt_tokens_est, t.truncate_to) for t in a.turns] == [
            (t.output_tokens, t.tool_time_s, t.prompt_tokens_est, t.truncate_to) for t in b.turns
        ]


def test_export_puts_the_call_in_atif_fields(tmp_path):
    export(tmp_path, canonical(tmp_path / "p.jsonl", PARENT))
    doc = json.loads((tmp_path / "atif" / "demo_parent.json").read_text())
    steps = doc["steps"]
    assert [s["source"] for s in steps] == ["system", "user", "agent", "agent", "user", "agent"]
    first = steps[2]
    assert first["tool_calls"] == [{"tool_call_id": "call_1", "function_name": "bash", "arguments": {"cmd": "ls"}}]
    assert first["reasoning_content"] == "think"
    assert first["metrics"] == {"completion_tokens": 31, "prompt_tokens": 900, "cached_tokens": 0,
                                "extra": {"reasoning_tokens": 7, "cache_creation_input_tokens": 12}}  # fmt: skip
    assert first["timestamp"] == "2026-01-01T00:00:01.250000+00:00"  # the start plus the latency: when it answered
    assert first["observation"]["results"] == [{"source_call_id": "call_1", "content": "a.py b.py"}]
    refs = [r["subagent_trajectory_ref"][0] for r in steps[3]["observation"]["results"]]
    assert refs == [
        {"session_id": "demo/child", "trajectory_path": "demo_child.json"},
        {"session_id": "demo/fork", "trajectory_path": "demo_fork.json", "extra": {"fork": True}},
    ]
    assert steps[4]["extra"]["replay"]["truncate_to"] == 2
    assert doc["agent"]["model_name"] == "m1"
    assert doc["final_metrics"] == {"total_completion_tokens": 39, "total_steps": 6}


def _atif(steps: list[dict], **root) -> dict:
    return {"schema_version": "ATIF-v1.7", "session_id": "s-1", "agent": {"name": "terminus", "version": "2"},
            "steps": [{"step_id": i, **s} for i, s in enumerate(steps, start=1)], **root}  # fmt: skip


FOREIGN = [
    {"source": "system", "message": "You are an agent.", "timestamp": "2026-03-01T10:00:00Z"},
    {"source": "user", "message": "Count files.", "timestamp": "2026-03-01T10:00:01Z"},
    {"source": "agent", "message": "", "timestamp": "2026-03-01T10:00:04.5Z", "model_name": "gpt-x",
     "tool_calls": [{"tool_call_id": "t1", "function_name": "sh", "arguments": {"c": "ls | wc -l"}}],
     "observation": {"results": [{"source_call_id": "t1", "content": "42"}]},
     "metrics": {"prompt_tokens": 500, "completion_tokens": 20, "cached_tokens": 300, "cost_usd": 0.01,
                 "extra": {"reasoning_tokens": 4}}},
    {"source": "agent", "message": "There are 42 files.", "timestamp": "2026-03-01T10:00:10Z",
     "metrics": {"prompt_tokens": 560, "completion_tokens": 9}},
]  # fmt: skip


def test_import_of_a_file_written_by_another_agent(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_atif(FOREIGN), indent=2))
    assert detect_format(path) == "atif"
    (traj,) = import_paths([path]).trajectories
    assert traj.id == "s-1"
    one, two = traj.turns
    assert one["append"] == [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Count files."},
    ]
    assert one["output"]["tool_calls"][0]["function"] == {"name": "sh", "arguments": '{"c":"ls | wc -l"}'}
    assert one["output_tokens"] == 20 and two["output_tokens"] == 9
    start = datetime.fromisoformat("2026-03-01T10:00:01+00:00").timestamp()
    assert one["recorded"] == {"prompt_tokens": 500, "cached_tokens": 300, "output_tokens": 20, "reasoning_tokens": 4,
                               "cost_usd": 0.01, "model": "gpt-x", "latency_s": 3.5, "timestamp": start}  # fmt: skip
    assert one["tool_time_s"] == 5.5  # to the next step's time (which holds the next call's time too)
    assert two["append"] == [{"role": "tool", "tool_call_id": "t1", "content": "42"}]
    assert two["tool_time_s"] == 0.0 and "latency_s" not in two["recorded"]


def test_a_subagent_file_is_imported_through_its_parent_only(tmp_path):
    (tmp_path / "child.json").write_text(json.dumps(_atif(
        [{"source": "user", "message": "sub"}, {"source": "agent", "message": "done"}], session_id="c-1")))  # fmt: skip
    ref = {"session_id": "c-1", "trajectory_path": "child.json"}
    parent = _atif([
        {"source": "user", "message": "task"},
        {"source": "agent", "message": "spawning", "observation": {"results": [{"subagent_trajectory_ref": [ref]}]}},
        {"source": "agent", "message": "finished"},
    ])  # fmt: skip
    (tmp_path / "parent.json").write_text(json.dumps(parent))
    result = import_paths([tmp_path])
    assert [(t.id, bool(t.header.get("subagent"))) for t in result.trajectories] == [("s-1", False), ("c-1", True)]
    assert result.trajectories[0].turns[0]["spawn"] == [{"trajectory": "c-1", "fork": False}]
    out = tmp_path / "w.jsonl"
    with out.open("wb") as fh:
        write_canonical(result.trajectories, fh)
    assert load_workload([out]).by_id()["c-1"].subagent


def test_a_subagent_spawned_twice_is_one_trajectory_and_a_cycle_is_refused(tmp_path):
    ref = {"session_id": "c-1", "trajectory_path": "child.json"}
    spawn = {"source": "agent", "message": "go", "observation": {"results": [{"subagent_trajectory_ref": [ref]}]}}
    child = _atif([{"source": "user", "message": "sub"}, {"source": "agent", "message": "done"}], session_id="c-1")
    (tmp_path / "child.json").write_text(json.dumps(child))
    (tmp_path / "parent.json").write_text(json.dumps(_atif([{"source": "user", "message": "task"}, spawn, spawn])))
    result = import_paths([tmp_path / "parent.json"])
    assert [t.id for t in result.trajectories] == ["s-1", "c-1"]
    assert [t.get("spawn") for t in result.trajectories[0].turns] == [[{"trajectory": "c-1", "fork": False}]] * 2
    back = {**ref, "session_id": "s-1", "trajectory_path": "parent.json"}
    child["steps"][1]["observation"] = {"results": [{"subagent_trajectory_ref": [back]}]}
    (tmp_path / "child.json").write_text(json.dumps(child))
    with pytest.raises(ImportFailure) as err:
        import_paths([tmp_path / "parent.json"])
    where = "$.steps[1].observation.results[0].subagent_trajectory_ref[0]"
    assert str(err.value) == f"{tmp_path / 'child.json'}: {where}: subagent cycle: s-1 -> c-1 -> s-1"


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d["steps"][1].update(step_id=5), "$.steps[1].step_id: expected 2"),
        (lambda d: d["steps"][1].update(source="tool"), "$.steps[1].source: expected one of system, user, agent"),
        (lambda d: d["steps"][1].update(metrics={}), "$.steps[1].metrics: only an agent step has it"),
        (lambda d: d["steps"][2]["observation"]["results"][0].update(source_call_id="t9"),
         '$.steps[2].observation.results[0].source_call_id: "t9" is no tool_call_id of this step'),
        (lambda d: d["steps"][2]["tool_calls"][0].update(arguments="ls"),
         "$.steps[2].tool_calls[0].arguments: expected an object of arguments"),
        (lambda d: d.update(schema_version="v2"), '$.schema_version: expected "ATIF-v1.N"'),
        (lambda d: d["steps"][0].update(timestamp="yesterday"), "$.steps[0].timestamp: expected an ISO 8601 time"),
        (lambda d: d.update(steps=d["steps"][:2]), "$.steps: no agent step"),
    ],
)  # fmt: skip
def test_bad_input_names_the_file_and_field(tmp_path, change, where):
    doc = _atif(json.loads(json.dumps(FOREIGN)))
    change(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ImportFailure) as err:
        import_paths([path], "atif")
    assert str(err.value).startswith(f"{path}: {where}"), str(err.value)
    got = CliRunner().invoke(main, ["import", "--from", "atif", str(path), "-o", str(tmp_path / "o.jsonl")])
    assert got.exit_code == 1 and where in got.output and "Traceback" not in got.output


def test_an_atif_file_round_trips_import_export_import(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "run.json").write_text(json.dumps(_atif(FOREIGN)))
    first = reimport(tmp_path, tmp_path / "in", "first.jsonl")
    export(tmp_path, first, name="out")
    second = reimport(tmp_path, tmp_path / "out", "second.jsonl")
    a, b = load_workload([first]), load_workload([second])
    assert a.fingerprint == b.fingerprint
    assert [(t.output_tokens, t.tool_time_s, t.recorded) for t in a.trajectories[0].turns] == [
        (t.output_tokens, t.tool_time_s, t.recorded) for t in b.trajectories[0].turns
    ]
