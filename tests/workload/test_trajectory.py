"""Trajectory loading: validation errors name file, line and field; counts match an independent recount."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, get_tokenizer
from replay.workload.trajectory import TrajectoryError, load_workload, output_as_message
from tests.support.trajectories import simple_turns, write_trajectory


def _recount(messages: list[dict]) -> int:
    enc = get_tokenizer()
    total = REPLY_PRIMING_TOKENS
    for m in messages:
        total += len(enc.encode(m.get("content") or "")) + MESSAGE_OVERHEAD_TOKENS
        for call in m.get("tool_calls") or ():
            total += len(enc.encode(call["function"]["name"] + call["function"]["arguments"]))
    return total


def test_counts_match_a_full_recount_of_each_request(tmp_path: Path) -> None:
    turns = simple_turns(6)
    turns[4]["truncate_to"] = 2  # compaction: keep system + task
    turns[4]["append"] = [{"role": "user", "content": "Summary so far: parser fixed, tests pending."}]
    turns[2]["output"] = {
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd":"ls"}'}}],
    }
    turns[3]["append"] = [{"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"}]
    path = write_trajectory(tmp_path / "t.jsonl", "t1", turns)
    traj = load_workload([path]).trajectories[0]

    context: list[dict] = []
    previous: list[dict] | None = None
    for raw, turn in zip(turns, traj.turns, strict=True):
        if "truncate_to" in raw:
            del context[raw["truncate_to"] :]
        context += raw["append"]
        assert turn.prompt_tokens_est == _recount(context)
        if previous is None:
            assert turn.reusable_prefix_tokens == 0
        else:
            common = 0
            while common < min(len(previous), len(context)) and previous[common] == context[common]:
                common += 1
            assert turn.reusable_prefix_tokens == _recount(context[:common]) - REPLY_PRIMING_TOKENS
        context.append(output_as_message(raw["output"]))
        previous = list(context)
    assert traj.turns[4].reusable_prefix_tokens < traj.turns[3].reusable_prefix_tokens  # compaction broke reuse


def test_nested_form_loads_like_line_form(tmp_path: Path) -> None:
    turns = simple_turns(3)
    line_file = write_trajectory(tmp_path / "a.jsonl", "a", turns)
    nested = tmp_path / "b.jsonl"
    nested.write_bytes(orjson.dumps({"format": "replay.trajectory/1", "id": "a", "turns": turns}) + b"\n")
    a = load_workload([line_file]).trajectories[0]
    b = load_workload([nested]).trajectories[0]
    assert [t.prompt_tokens_est for t in a.turns] == [t.prompt_tokens_est for t in b.turns]
    assert [t.reusable_prefix_tokens for t in a.turns] == [t.reusable_prefix_tokens for t in b.turns]


@pytest.mark.parametrize(
    ("mutate", "line", "field", "words"),
    [
        (lambda t: t[1]["append"][0].update(role="bot"), 3, "append[0].role", "expected one of"),
        (lambda t: t[0].pop("output_tokens"), 2, "output_tokens", "missing"),
        (lambda t: t[2].update(output_tokens=0), 4, "output_tokens", "positive integer"),
        (lambda t: t[1].update(tool_time_s="slow"), 3, "tool_time_s", "number of seconds"),
        (lambda t: t[2].update(truncate_to=99), 4, "truncate_to", "at most"),
        (lambda t: t[1]["append"][0].update(content=7), 3, "append[0].content", "string"),
        (lambda t: t[1].update(output="text"), 3, "output", "object"),
        (lambda t: t[1].update(tool_time_s=True), 3, "tool_time_s", "number of seconds"),  # a bool is no number
        (lambda t: t[0].update(output_tokens=False), 2, "output_tokens", "positive integer"),
    ],
)
def test_errors_name_file_line_and_field(tmp_path: Path, mutate, line: int, field: str, words: str) -> None:
    turns = simple_turns(3)
    mutate(turns)
    path = write_trajectory(tmp_path / "bad.jsonl", "bad", turns)
    with pytest.raises(TrajectoryError) as info:
        load_workload([path])
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), line, field)
    assert words in str(err)
    assert str(err).startswith(f"{path}:{line}: field '{field}'")


def test_bad_json_header_and_duplicates(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "replay.trajectory/1", "id": "x"}\n{not json\n')
    with pytest.raises(TrajectoryError, match=r"bad.jsonl:2: not valid JSON"):
        load_workload([bad])
    headless = tmp_path / "headless.jsonl"
    headless.write_text(orjson.dumps(simple_turns(1)[0]).decode() + "\n")
    with pytest.raises(TrajectoryError, match=r"headless.jsonl:1: field 'format'"):
        load_workload([headless])
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text('{"format": "replay.trajectory/9", "id": "x"}\n')
    with pytest.raises(TrajectoryError, match=r"expected 'replay.trajectory/1'"):
        load_workload([wrong])
    dup = write_trajectory(tmp_path / "dup.jsonl", "same", simple_turns(1))
    write_trajectory(dup, "same", simple_turns(1))
    with pytest.raises(TrajectoryError, match=r"dup.jsonl:3: field 'id': duplicate"):
        load_workload([dup])
    with pytest.raises(TrajectoryError, match="no such file"):
        load_workload([tmp_path / "missing.jsonl"])
