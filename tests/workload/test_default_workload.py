"""Shape checks for the shipped default workload, `trajectories/coding-agent-default.jsonl`.

The file is read with plain `json` on purpose: these tests pin what `scripts/make_default_workload.py` promises
(session count and length, context growth, compaction, exact output token counts, tool times, determinism)
independently of the trajectory loader, so a loader bug cannot hide a workload regression or the reverse.
"""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, get_tokenizer

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "trajectories" / "coding-agent-default.jsonl"
GENERATOR = ROOT / "scripts" / "make_default_workload.py"

Session = tuple[dict, list[dict]]


def load_sessions(path: Path) -> list[Session]:
    """(header, turns) per trajectory, split on header lines as docs/trajectory-format.md describes."""
    sessions: list[Session] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        obj = json.loads(line)
        if "format" in obj:
            sessions.append((obj, []))
        else:
            assert sessions, f"line {number}: turn before any header"
            sessions[-1][1].append(obj)
    return sessions


@pytest.fixture(scope="module")
def sessions() -> list[Session]:
    return load_sessions(WORKLOAD)


@pytest.fixture(scope="module")
def prompt_tokens(sessions: list[Session]) -> dict[str, list[int]]:
    """Prompt size of every request, with the documented rule: content tokens + 4 per message + 3 per request."""
    tok = get_tokenizer()
    sizes: dict[str, list[int]] = {}
    for header, turns in sessions:
        context: list[int] = []
        per_turn = []
        for turn in turns:
            if "truncate_to" in turn:
                assert 0 <= turn["truncate_to"] <= len(context), header["id"]
                context = context[: turn["truncate_to"]]
            context += [len(tok.encode(m["content"])) + MESSAGE_OVERHEAD_TOKENS for m in turn["append"]]
            per_turn.append(sum(context) + REPLY_PRIMING_TOKENS)
            context.append(turn["output_tokens"] + MESSAGE_OVERHEAD_TOKENS)
        sizes[header["id"]] = per_turn
    return sizes


def test_file_is_small_enough_to_ship() -> None:
    assert WORKLOAD.stat().st_size < 3_000_000


def test_headers(sessions: list[Session]) -> None:
    ids = [header["id"] for header, _ in sessions]
    assert len(ids) == len(set(ids))
    for header, _ in sessions:
        assert header["format"] == "replay.trajectory/1"
        assert header["id"].startswith("default/")
        assert header["model"] == "synthetic"
        assert header["source"] == {"generator": "scripts/make_default_workload.py", "seed": 7}


def test_session_and_turn_counts(sessions: list[Session]) -> None:
    assert len(sessions) >= 8
    counts = [len(turns) for _, turns in sessions]
    assert all(10 <= n <= 40 for n in counts), counts
    assert 15 <= statistics.median(counts) <= 25, counts


def test_turn_shape(sessions: list[Session]) -> None:
    allowed = {"append", "truncate_to", "output", "output_tokens", "tool_time_s"}
    for header, turns in sessions:
        first = turns[0]["append"]
        assert [m["role"] for m in first] == ["system", "user"], header["id"]
        for turn in turns:
            assert set(turn) <= allowed, (header["id"], set(turn) - allowed)
            assert turn["append"], header["id"]
            assert all(isinstance(m["content"], str) and m["content"] for m in turn["append"])
            assert set(turn["output"]) == {"content"}
        for turn in turns[1:]:
            assert [m["role"] for m in turn["append"]] == ["user"], header["id"]


def test_outputs_are_a_thought_and_one_command(sessions: list[Session]) -> None:
    for header, turns in sessions:
        for turn in turns:
            content = turn["output"]["content"]
            assert content.startswith("THOUGHT: "), header["id"]
            assert content.count("```bash\n") == 1 and content.endswith("\n```"), (header["id"], content[:80])


def test_output_tokens_are_exact_cl100k_counts(sessions: list[Session]) -> None:
    tok = get_tokenizer()
    counts = []
    for _, turns in sessions:
        for turn in turns:
            assert turn["output_tokens"] == max(1, len(tok.encode(turn["output"]["content"])))
            counts.append(turn["output_tokens"])
    assert min(counts) >= 30 and max(counts) <= 600
    assert 110 <= statistics.median(counts) <= 190


def test_context_grows_like_a_coding_agent(prompt_tokens: dict[str, list[int]]) -> None:
    assert all(sizes[0] < 8_000 for sizes in prompt_tokens.values())
    peaks = sorted(max(sizes) for sizes in prompt_tokens.values())
    assert sum(peak >= 30_000 for peak in peaks) >= 6, peaks
    assert 40_000 <= peaks[-1] <= 60_000, peaks
    for name, sizes in prompt_tokens.items():  # growth is monotonic except across a compaction
        drops = sum(1 for a, b in itertools.pairwise(sizes) if b < a)
        assert drops <= 1, name


def test_history_compaction_keeps_system_and_task(sessions: list[Session]) -> None:
    compacted = 0
    for header, turns in sessions:
        for index, turn in enumerate(turns):
            if "truncate_to" not in turn:
                continue
            compacted += 1
            assert turn["truncate_to"] == 2, header["id"]
            assert turn["append"][0]["content"].startswith("Summary of the session so far"), header["id"]
            assert len(turns) - index >= 4, "the session must continue after compacting"
    assert compacted >= 1


def test_tool_times(sessions: list[Session]) -> None:
    for header, turns in sessions:
        times = [turn["tool_time_s"] for turn in turns]
        assert times[-1] == 0, header["id"]
        assert all(0.05 <= t <= 25.0 for t in times[:-1]), (header["id"], times)
        assert all(round(t, 3) == t for t in times)
        assert 15.0 <= sum(times) <= 70.0, (header["id"], sum(times))


def test_generator_reproduces_the_shipped_file(tmp_path: Path) -> None:
    out = tmp_path / "workload.jsonl"
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--out", str(out)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == WORKLOAD.read_bytes(), "regenerate with: python scripts/make_default_workload.py"


def test_project_files_agree_with_themselves() -> None:
    """What an editor of scripts/default_workload/projects/*.toml must keep true for the generator to work."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from workload_gen.data import projects
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    found = projects()
    assert len(found) >= 8 and len({p.name for p in found}) == len(found)
    for p in found:
        assert p.func in p.buggy and p.func in p.caller, p.name
        for old, _ in p.fixes:
            assert p.buggy.count(old) == 1, (p.name, old)  # the patch replaces one exact block
        assert {f.test_id for f in p.failures} <= set(p.new_ids), p.name
        for f in p.failures:
            assert f.marker in p.test_src, (p.name, f.marker)  # pytest marks that source line with ">"
        assert p.repro_bad != p.repro_good and p.shape.turns >= 10, p.name
