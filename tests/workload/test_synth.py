"""`replay synth`: profiles fitted to trajectories, and synthetic sets that inspect like their source."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.workload.stats import load
from replay.workload.synth import ProfileError, check_profile, figures, fit, load_profile, synthesize
from replay.workload.tokens import get_tokenizer
from replay.workload.trajectory import load_workload
from tests.support.paths import SHARED

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "trajectories" / "coding-agent-default.jsonl"
REAL = SHARED / "trajectories" / "real"
REAL_SETS = ("mini-swe-agent-v2", "swe-agent", "openhands-v0")

# The tolerances docs/synth.md states.
REL = 0.15  # median turns, first-call prompt, growth per call: within ±15 %
REUSE_PP = 0.03  # pooled prefix reuse: within ±3 percentage points


def assert_like(source: dict, made: dict) -> None:
    for key in ("turns_median", "first_prompt_tokens_median", "growth_median"):
        assert made[key] == pytest.approx(source[key], rel=REL), key
    assert abs(made["prefix_reuse_pooled"] - source["prefix_reuse_pooled"]) <= REUSE_PP


def synth_like(tmp_path: Path, paths: list[Path], n: int = 200) -> tuple[dict, dict]:
    out, prof = tmp_path / "synth.jsonl", tmp_path / "profile.json"
    args = ["synth", "--like", *map(str, paths), "-n", str(n), "--save-profile", str(prof), "-o", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    profile = json.loads(prof.read_text())
    # What `replay inspect` reports for the output, against what it reports for the source.
    source = figures(load(paths).trajectories)
    made = figures(load([out]).trajectories)
    assert profile["fitted_from"] == source
    return source, made


def test_like_generated_set_matches(tmp_path: Path) -> None:
    source, made = synth_like(tmp_path, [DEFAULT], n=100)
    assert made["trajectories"] == 100
    assert_like(source, made)


@pytest.mark.skipif(not all((REAL / s).is_dir() for s in REAL_SETS), reason="real development set not present")
def test_like_real_set_matches(tmp_path: Path) -> None:
    source, made = synth_like(tmp_path, [REAL / s for s in REAL_SETS])
    assert_like(source, made)


def test_same_seed_same_bytes_and_seeds_differ() -> None:
    profile = load_profile("coding-agent")
    a, b, c = synthesize(profile, 8, seed=3), synthesize(profile, 8, seed=3), synthesize(profile, 8, seed=4)
    assert a == b
    assert a != c


def test_shipped_profile_generates_valid_trajectories(tmp_path: Path) -> None:
    path = ROOT / "trajectories" / "profiles" / "coding-agent.json"
    profile = json.loads(path.read_text())
    check_profile(profile)
    text = path.read_text()
    assert "content" not in text  # numbers only: no text of the source
    out = tmp_path / "s.jsonl"
    result = CliRunner().invoke(main, ["synth", "--profile", "coding-agent", "-n", "20", "--seed", "1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    work = load_workload([out])
    tasks = work.tasks
    assert len(tasks) == 20
    enc = get_tokenizer()
    system = None
    for traj in work.trajectories:
        first = traj.turns[0]
        assert first.append[0].raw["role"] == "system"
        if system is None:
            system = first.append[0].raw["content"]
        # one shared system prompt (a prefix of it when the sampled first call is smaller)
        assert system.startswith(first.append[0].raw["content"]) or first.append[0].raw["content"].startswith(system)
        assert traj.turns[-1].tool_time_s == 0
        for turn in traj.turns:
            out_text = turn.output["content"] + turn.output.get("reasoning", "")
            assert turn.output_tokens == len(enc.encode(out_text))
    # distinct trajectories have distinct task text
    tasks_text = {t.turns[0].append[1].raw["content"] for t in tasks}
    assert len(tasks_text) == len(tasks)


def test_sizes_are_exact() -> None:
    """First-call prompt and growth equal the drawn sizes: a profile with a single value gives exactly it."""
    profile = {
        "format": "replay.profile/1",
        "name": "flat",
        "system_prompt_tokens": 50,
        "distributions": {
            "turns": [5, 5],
            "first_prompt_tokens": [300, 300],
            "growth_tokens": [120, 120],
            "output_tokens": [40, 40],
            "answer_tokens": [10, 10],
            "tool_time_s": [1.5, 1.5],
        },
    }
    rows = [orjson.loads(line) for line in synthesize(profile, 3, seed=0).splitlines()]
    path_rows = b"".join(orjson.dumps(r) + b"\n" for r in rows)
    from replay.workload.trajectory import MessageBuilder, parse_lines

    trajs = list(parse_lines("x", path_rows.splitlines(), MessageBuilder(get_tokenizer())))
    for t in trajs:
        assert [u.prompt_tokens_est for u in t.turns] == [300, 420, 540, 660, 780]
        assert [u.reusable_prefix_tokens for u in t.turns] == [0, 311, 431, 551, 671]
        assert [u.output_tokens for u in t.turns] == [40] * 5
        assert [u.tool_time_s for u in t.turns] == [1.5, 1.5, 1.5, 1.5, 0.0]


def test_compaction_and_subagents(tmp_path: Path) -> None:
    profile = load_profile("coding-agent")
    profile["compaction"] = {"probability": 0.2, "kept_fraction": [0.1, 0.3]}
    profile["subagents"] = {"spawn_probability": 0.1, "turns": [2, 6], "first_prompt_tokens": [500, 900]}
    out = tmp_path / "s.jsonl"
    out.write_bytes(synthesize(profile, 30, seed=2))
    work = load_workload([out])
    subs = [t for t in work.trajectories if t.subagent]
    assert subs and all(2 <= len(t.turns) <= 6 for t in subs)
    compacted = [u for t in work.trajectories for u in t.turns if u.truncate_to is not None]
    assert compacted and all(u.truncate_to == 2 and u.reusable_prefix_tokens < u.prompt_tokens_est for u in compacted)
    # a profile fitted to this set sees the subagents and the compaction again
    refit = fit(work.trajectories)
    assert refit["subagents"]["spawn_probability"] > 0 and refit["subagents"]["turns"] is not None
    assert 0.1 < refit["compaction"]["probability"] < 0.3


def test_bad_profile_and_usage(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="first_prompt_tokens"):
        check_profile({"format": "replay.profile/1", "distributions": {"turns": [1, 2]}})
    with pytest.raises(ProfileError, match="no such profile"):
        load_profile("no-such-profile")
    runner = CliRunner()
    assert runner.invoke(main, ["synth", "-o", str(tmp_path / "x")]).exit_code != 0
    result = runner.invoke(main, ["synth", "--profile", "no-such-profile", "-o", str(tmp_path / "x")])
    assert result.exit_code != 0 and "no such profile" in result.output
