"""The workload fingerprint: the same corpus in other files and orders has the same one, one changed turn another,
and what a run makes of the recording (padding, flattened tool calls) leaves it as the recording's."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from click.testing import CliRunner

from replay.cli import main
from replay.workload.history import HistoryPolicy
from replay.workload.trajectory import load_workload
from tests.support.trajectories import simple_turns, write_trajectory


def _trees() -> dict[str, list[dict]]:
    calls = [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}]
    with_tools = [
        {
            "append": [{"role": "user", "content": "Fix it."}],
            "output": {"content": None, "tool_calls": calls},
            "output_tokens": 5,
            "tool_time_s": 1.5,
        },
        {
            "append": [{"role": "tool", "tool_call_id": "c1", "content": "a.py b.py"}],
            "output": {"content": "done"},
            "output_tokens": 3,
            "tool_time_s": 0,
            "recorded": {"latency_s": 0.8, "unrecorded_context_tokens": 120},
        },
    ]
    return {"a": simple_turns(3), "b": simple_turns(2, grow="y"), "c": with_tools}


def _write(path: Path, trees: dict[str, list[dict]], order: list[str]) -> Path:
    for name in order:
        write_trajectory(path, name, trees[name], model="m")
    return path


def test_same_content_in_other_files_and_orders_has_the_same_fingerprint(tmp_path):
    trees = _trees()
    one = load_workload([_write(tmp_path / "all.jsonl", trees, ["a", "b", "c"])])
    (tmp_path / "split").mkdir()
    _write(tmp_path / "split" / "x.jsonl", trees, ["c"])
    _write(tmp_path / "split" / "y.jsonl", trees, ["b", "a"])
    split = load_workload([tmp_path / "split"])
    # the same trajectories written another way: nested turns in the header, spaces in the JSON, another source
    nested = tmp_path / "nested.jsonl"
    lines = [
        json.dumps({"format": "replay.trajectory/1", "id": n, "model": "m", "turns": trees[n], "source": {"f": n}})
        for n in ("b", "c", "a")
    ]
    nested.write_text("\n".join(lines) + "\n")
    spaced = load_workload([nested])
    assert one.fingerprint.startswith("sha256:") and len(one.fingerprint) == len("sha256:") + 64
    assert one.fingerprint == split.fingerprint == spaced.fingerprint
    assert len({one.digest, split.digest, spaced.digest}) == 3  # the files' bytes differ: their digest says so


def test_one_changed_turn_changes_the_fingerprint(tmp_path):
    trees = _trees()
    base = load_workload([_write(tmp_path / "base.jsonl", trees, ["a", "b", "c"])]).fingerprint
    changes = {
        "message": lambda t: t["a"][1]["append"][0].update(content="<output>line 1 changed</output>"),
        "output": lambda t: t["b"][1]["output"].update(content="another answer"),
        "output_tokens": lambda t: t["c"][0].update(output_tokens=6),
        "tool_time_s": lambda t: t["c"][0].update(tool_time_s=1.25),
        "recorded": lambda t: t["c"][1]["recorded"].update(latency_s=0.9),
        "truncate_to": lambda t: t["a"][2].update(truncate_to=1),
        "a turn less": lambda t: t["a"].pop(),
    }
    seen = {base}
    for name, change in changes.items():
        changed = copy.deepcopy(trees)
        change(changed)
        fingerprint = load_workload([_write(tmp_path / f"{name}.jsonl", changed, ["a", "b", "c"])]).fingerprint
        assert fingerprint not in seen, name
        seen.add(fingerprint)
    renamed = {"a2" if k == "a" else k: v for k, v in trees.items()}
    assert load_workload([_write(tmp_path / "renamed.jsonl", renamed, ["a2", "b", "c"])]).fingerprint not in seen


def test_padding_and_flattened_tool_calls_keep_the_recordings_fingerprint(tmp_path):
    path = _write(tmp_path / "w.jsonl", _trees(), ["a", "b", "c"])
    plain = load_workload([path])
    padded = load_workload([path], unrecorded_context="pad")
    flat = load_workload([path], policy=HistoryPolicy(tool_calls="text"))
    assert padded.padding.added_tokens > 0  # the run's requests did change: a head and growth were put back
    assert padded.trajectories[2].turns[0].append[0].wire != plain.trajectories[2].turns[0].append[0].wire
    assert flat.trajectories[2].turns[1].append[0].wire != plain.trajectories[2].turns[1].append[0].wire
    assert plain.fingerprint == padded.fingerprint == flat.fingerprint


def test_inspect_prints_the_fingerprint(tmp_path):
    path = _write(tmp_path / "w.jsonl", _trees(), ["a", "b", "c"])
    fingerprint = load_workload([path]).fingerprint
    text = CliRunner().invoke(main, ["inspect", str(path)])
    assert text.exit_code == 0, text.output
    assert f"fingerprint {fingerprint}" in text.output
    as_json = CliRunner().invoke(main, ["inspect", str(path), "--json"])
    assert json.loads(as_json.output)["fingerprint"] == fingerprint
    padded = CliRunner().invoke(main, ["inspect", str(path), "--json", "--unrecorded-context", "pad"])
    assert json.loads(padded.output)["fingerprint"] == fingerprint
