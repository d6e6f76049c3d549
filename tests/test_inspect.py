"""`replay inspect`: statistics of a workload, checked against hand-made trajectories with known figures."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.workload.stats import load, summarize, to_text
from replay.workload.tokens import get_tokenizer

ENC = get_tokenizer()


def n(text: str) -> int:
    return len(ENC.encode(text))


def msg(role: str, content: str) -> dict:
    return {"role": role, "content": content}


def canonical(path: Path) -> Path:
    rows = [
        {"format": "replay.trajectory/1", "id": "t1", "source": {"importer": "x"}},
        {
            "append": [msg("system", "You are terse."), msg("user", "Count to three.")],
            "output": {"content": "one two"},
            "output_tokens": 2,
            "tool_time_s": 3.0,
            "recorded": {"latency_s": 1.0, "prompt_tokens": 20, "cached_tokens": 0},
            "spawn": [{"trajectory": "sub", "fork": False}],
        },
        {
            "append": [msg("user", "and then?")],
            "output": {"content": "three"},
            "output_tokens": 1,
            "tool_time_s": 1.0,
            "recorded": {"latency_s": 1.0, "prompt_tokens": 30, "cached_tokens": 20},
        },
        {
            "truncate_to": 1,
            "append": [msg("user", "Summary: counted.")],
            "output": {"content": "ok"},
            "output_tokens": 1,
            "tool_time_s": 0.0,
        },
        {"format": "replay.trajectory/1", "id": "sub", "subagent": True},
        {"append": [msg("user", "Help.")], "output": {"content": "Sure."}, "output_tokens": 2, "tool_time_s": 0.0},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_figures_of_a_known_workload(tmp_path):
    report = summarize(load([canonical(tmp_path / "w.jsonl")]))
    t1, sub = report["trajectories"]
    sys_, u1, u2, u3 = (n(x) + 4 for x in ("You are terse.", "Count to three.", "and then?", "Summary: counted."))
    out1 = n("one two") + 4
    prompts = [sys_ + u1 + 3, sys_ + u1 + out1 + u2 + 3, sys_ + u3 + 3]
    reusable = [0, sys_ + u1 + out1, sys_]
    assert t1["turns"] == 3 and t1["prompt_tokens"] == prompts
    assert (t1["prompt_tokens_start"], t1["prompt_tokens_max"]) == (prompts[0], max(prompts))
    assert t1["prompt_tokens_median"] == sorted(prompts)[1]
    assert t1["prefix_reuse"] == pytest.approx(sum(reusable) / sum(prompts))
    assert t1["tool_time_s"] == 4.0 and t1["recorded_latency_s"] == 2.0 and t1["recorded_latency_turns"] == 2
    assert t1["tool_share"] == pytest.approx(4.0 / (4.0 + 2.0))
    assert t1["recorded_cached_share"] == pytest.approx(20 / 50)
    assert t1["subagents_spawned"] == 1 and not t1["subagent"]
    assert sub["subagent"] and sub["prefix_reuse"] == 0.0
    pooled = report["pooled"]
    all_prompts = [*prompts, sub["prompt_tokens"][0]]
    assert report["prefix_reuse_pooled"] == pytest.approx(sum(reusable) / sum(all_prompts))
    assert report["prefix_reuse_mean"] == pytest.approx((t1["prefix_reuse"] + 0.0) / 2)
    assert (pooled["trajectories"], pooled["subagent_trajectories"], pooled["turns"]) == (2, 1, 4)
    text = to_text(report)
    assert "pooled: 2 trajectories (1 subagents), 4 turns" in text
    assert f"prefix reuse: pooled {100 * report['prefix_reuse_pooled']:.1f}%" in text
    assert "↳ sub" in text


def test_cli_json_and_on_the_fly_import(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    rows = [
        {"messages": [msg("user", "hi")], "response": "hello", "session_id": "a"},
        {"messages": [msg("user", "hi"), msg("assistant", "hello"), msg("user", "bye")], "session_id": "a"},
    ]
    (src / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (src / "NOTES.md").write_text("# notes\n")
    canonical(src / "w.jsonl")
    runner = CliRunner()
    res = runner.invoke(main, ["inspect", str(src), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    ids = [t["id"] for t in report["trajectories"]]
    assert ids == ["t1", "sub", "openai-log/log/a"]  # canonical files first, then what was imported
    assert {"id", "turns", "prefix_reuse"} <= set(report["trajectories"][2])
    assert report["trajectories"][2]["turns"] == 2
    assert 0 < report["prefix_reuse_pooled"] < 1
    assert report["skipped"] == [{"path": str(src / "NOTES.md"), "reason": report["skipped"][0]["reason"]}]
    res = runner.invoke(main, ["inspect", str(src / "NOTES.md")])
    assert res.exit_code == 1 and "NOTES.md: not JSON or JSON Lines" in res.output


def test_plot_writes_a_png_or_says_how_to_get_matplotlib(tmp_path, monkeypatch):
    path = canonical(tmp_path / "w.jsonl")
    png = tmp_path / "g.png"
    runner = CliRunner()
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(builtins, "__import__", no_matplotlib)
        res = runner.invoke(main, ["inspect", str(path), "--plot", str(png)])
    assert res.exit_code == 1 and "pip install matplotlib" in res.output and not png.exists()
    pytest.importorskip("matplotlib")
    res = runner.invoke(main, ["inspect", str(path), "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_spawn_of_a_missing_subagent_is_a_loader_error(tmp_path):
    path = tmp_path / "w.jsonl"
    rows = [
        {"format": "replay.trajectory/1", "id": "t"},
        {
            "append": [msg("user", "x")],
            "output": {"content": "y"},
            "output_tokens": 1,
            "tool_time_s": 0,
            "spawn": [{"trajectory": "nope"}],
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(main, ["inspect", str(path)])
    assert res.exit_code == 1 and "no trajectory 'nope' in the workload" in res.output
