"""`replay inspect`: statistics of a workload, checked against hand-made trajectories with known figures."""

from __future__ import annotations

import builtins
import json
import re
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
    assert "pooled: 2 trajectories (1 subagent), 4 turns" in text
    assert f"prefix reuse (replay's: whole messages, tokens): pooled {100 * report['prefix_reuse_pooled']:.1f}%" in text
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
    report = json.loads(res.stdout)
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
    assert res.exit_code == 1 and "pip install 'agentic-replay[plots]'" in res.output and not png.exists()
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


# ----------------------------------------------------------------------------------- what a new user saw


def header(traj_id: str, **source) -> dict:
    return {"format": "replay.trajectory/1", "id": traj_id, "source": {"importer": "x", **source}}


def turn(text: str, tool: float = 0.0, **recorded) -> dict:
    row = {"append": [msg("user", text)], "output": {"content": "ok"}, "output_tokens": 1, "tool_time_s": tool}
    if recorded:
        row["recorded"] = recorded
    return row


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def cells(text: str) -> dict[str, dict[str, str]]:
    """The table as {trajectory id: {column: cell}}: figures are right-aligned under their heads, the name last."""
    lines = text.split("\n")
    spans = [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+(?: \S+)?", lines[0])]
    *figures, (_, name_at, _) = spans
    table = {}
    for line in lines[2:]:
        if not line.strip():
            break
        row, left = {}, 0
        for head, _, end in figures:
            row[head] = line[left:end].strip()
            left = end
        table[line[name_at:].strip().removeprefix("↳ ")] = row
    return table


def test_two_long_names_that_differ_in_the_middle_stay_apart(tmp_path):
    a = "swe-agent/" + "x" * 60 + "__alpha__" + "y" * 60
    b = "swe-agent/" + "x" * 60 + "__omega__" + "y" * 60
    path = write(tmp_path / "w.jsonl", [header(a), turn("one"), header(b), turn("two")])
    text = to_text(summarize(load([path])))
    assert a in text and b in text
    assert set(cells(text)) == {a, b}


def test_missing_tool_time_is_a_dash_and_a_recorded_zero_is_zero(tmp_path):
    rows = [
        header("none", tool_time="none recorded"),
        turn("a", latency_s=2.0),
        turn("b", latency_s=1.0),
        header("zero", tool_time="timestamps"),
        turn("c", 0.0, latency_s=2.0),
        turn("d", 0.0, latency_s=1.0),
    ]
    report = summarize(load([write(tmp_path / "w.jsonl", rows)]))
    missing, zero = report["trajectories"]
    assert missing["tool_time_s"] is None and missing["tool_share"] is None
    assert zero["tool_time_s"] == 0.0 and zero["tool_share"] == 0.0
    assert report["pooled"]["tool_time_s"] == 0.0 and report["pooled"]["tool_time_trajectories"] == 1
    table = cells(to_text(report))
    assert (table["none"]["tool s"], table["none"]["tool%"], table["none"]["model s"]) == ("-", "-", "3.0")
    assert (table["zero"]["tool s"], table["zero"]["tool%"]) == ("0.0", "0.0%")
    only_missing = summarize(load([write(tmp_path / "m.jsonl", rows[:3])]))
    assert only_missing["pooled"]["tool_time_s"] is None
    assert "tool time - (not recorded)" in to_text(only_missing)


def test_skipped_notes_go_to_stderr_and_stdout_stays_the_report(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    canonical(src / "w.jsonl")
    (src / "NOTES.md").write_text("# notes\n")
    runner = CliRunner()
    res = runner.invoke(main, ["inspect", str(src)])
    assert res.exit_code == 0, res.output
    assert "skipped" not in res.stdout and f"skipped {src / 'NOTES.md'}: not JSON" in res.stderr
    res = runner.invoke(main, ["inspect", str(src), "--json"])
    assert json.loads(res.stdout)["skipped"][0]["path"] == str(src / "NOTES.md")
    assert "skipped" in res.stderr


def test_calls_the_source_did_not_keep_show_in_text_and_json(tmp_path):
    rows = [
        header("mini/a", unrecorded_calls=5, unrecorded_calls_replayable=True),
        turn("a"),
        header("oh/b", unrecorded_calls=1),
        turn("b"),
        header("mini/c"),
        turn("c", discarded="FormatError", output_missing=True),
        turn("d"),
    ]
    report = summarize(load([write(tmp_path / "w.jsonl", rows)]))
    a, b, c = report["trajectories"]
    assert (a["unrecorded_calls"], a["unrecorded_calls_replayable"], b["unrecorded_calls"]) == (5, 5, 1)
    assert (b["unrecorded_calls_replayable"], c["discarded_calls_replayed"]) == (0, 1)
    pooled = report["pooled"]
    assert (pooled["unrecorded_calls"], pooled["unrecorded_calls_replayable"], pooled["discarded_calls_replayed"]) == (
        6,
        5,
        1,
    )
    text = to_text(report)
    assert "not replayed: 6 calls the sources counted but did not keep" in text
    assert "(5 of them: replay import --include-discarded)" in text
    assert "replayed with a stand-in answer: 1 call " in text
    table = cells(text)
    assert (table["mini/a"]["lost calls"], table["oh/b"]["lost calls"], table["mini/c"]["stand-ins"]) == ("5", "1", "1")


def test_unrecorded_context_per_trajectory_and_pooled(tmp_path):
    rows = [
        header("cc/a"),
        turn("a", prompt_tokens=1000, unrecorded_context_tokens=900),
        turn("b", prompt_tokens=3000, unrecorded_context_tokens=1100),
        header("plain"),
        turn("c", prompt_tokens=50),
    ]
    report = summarize(load([write(tmp_path / "w.jsonl", rows)]))
    a, plain = report["trajectories"]
    assert (a["unrecorded_context_tokens"], a["unrecorded_context_tokens_last"]) == (2000, 1100)
    assert a["unrecorded_context_share"] == pytest.approx(2000 / 4000)
    assert plain["unrecorded_context_tokens"] is None and plain["unrecorded_context_share"] is None
    pooled = report["pooled"]
    assert (pooled["unrecorded_context_tokens"], pooled["unrecorded_context_tokens_last_max"]) == (2000, 1100)
    text = to_text(report)
    assert "unrecorded context: 2,000 of the provider's prompt tokens (50.0%) are not in the replay" in text
    table = cells(text)
    assert (table["cc/a"]["unrec ctx%"], table["plain"]["unrec ctx%"]) == ("50.0%", "-")


def test_prefix_reuse_by_the_dev_set_readmes_definition_beside_replays(tmp_path):
    """Issue 24: replay's reuse (whole messages, tokens, the first call as 0) could not be set beside the figure a
    corpus's README publishes (characters, calls after the first, mean of calls then of trajectories)."""
    report = summarize(load([canonical(tmp_path / "w.jsonl")]))
    t1 = next(t for t in report["trajectories"] if t["id"] == "t1")
    system, count, answer = "system: You are terse.\n", "user: Count to three.\n", "assistant: one two\n"
    first = len(system + count + answer)
    r1 = first / (first + len("user: and then?\n"))  # the whole previous request and answer are its prefix
    r2 = (len(system) + len("user: ")) / len(system + "user: Summary: counted.\n")  # after the truncation
    assert t1["prefix_reuse_chars"] == pytest.approx((r1 + r2) / 2)
    sub = next(t for t in report["trajectories"] if t["id"] == "sub")
    assert sub["prefix_reuse_chars"] is None  # one call: no call after the first
    assert report["pooled"]["prefix_reuse_chars_mean"] == pytest.approx(t1["prefix_reuse_chars"])
    text = to_text(report)
    assert "prefix reuse (replay's: whole messages, tokens)" in text
    assert "prefix reuse (the dev set README's: characters, calls after the first)" in text
