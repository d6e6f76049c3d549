"""An open loop's figures say what they leave out (issue 24): the tasks' first calls, which waited for a session,
apart from their later calls; the arrivals that never started, counted beside them; the header's sessions.

A run used to print "concurrency 12" under --max-live 3 and an open-loop TTFT p95 of 30 ms while first calls had
waited up to 11.4 s and 10 of 18 sessions never started: the pooled percentiles were the later calls'.
"""

from __future__ import annotations

import orjson
from click.testing import CliRunner

from replay.cli import main
from replay.loops.arrivals import Arrivals
from replay.loops.closed_loop import LoadConfig
from replay.reports.text_report import to_text
from replay.runner.single_run import RunSpec, execute
from tests.support.trajectories import simple_turns, write_trajectory


def test_first_calls_and_the_never_started_are_reported_apart(tmp_path) -> None:
    """Poisson arrivals at several times what 2 live sessions serve (30 a second, tasks of 6 calls), stopped after
    3 s: a backlog, never drained."""
    path = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(path, f"t{i}", simple_turns(6, output_tokens=80, tool_time_s=0.0))
    spec = RunSpec(trajectories=[str(path)], load=LoadConfig(concurrency=12, duration_s=3.0, warmup_s=0.0),
                   arrivals=Arrivals.parse("poisson:30"), max_live=2, out=str(tmp_path / "run.jsonl"),
                   sim_profile="fast", progress=False)  # fmt: skip
    result = execute(spec)
    i = result.summary["intended"]
    ol = i["open_loop"]
    first, later = i["first_call_ttft_s"], i["later_calls_ttft_s"]
    assert i["never_started"] == ol["never_started"] > 0  # a backlog at the stop
    assert first["n"] >= 2 and later["n"] >= 2
    assert first["n"] + i["never_started"] <= ol["arrived"]
    assert first["n"] + later["n"] == i["ttft_from_intended_s"]["n"]  # the two parts of the pooled figure
    assert first["p95"] > later["p95"]  # the first calls waited for a session; the later ones never do
    text = to_text(result.summary, result.header)
    head = text.splitlines()[1]
    assert "open loop poisson:30, at most 2 live sessions" in head and "concurrency" not in head
    assert f"n={first['n']} of {ol['arrived']} arrived" in text
    assert f"the {ol['never_started']} never started are in no figure" in text


def test_a_closed_loop_has_no_never_started_and_counts_first_calls_apart(tmp_path) -> None:
    path = tmp_path / "w.jsonl"
    write_trajectory(path, "t0", simple_turns(3, output_tokens=8, tool_time_s=0.0))
    res = CliRunner().invoke(main, ["run", str(path), "-c", "1", "--sim-profile", "fast", "--json", "-q", "--out",
                                    str(tmp_path / "run.jsonl")])  # fmt: skip
    assert res.exit_code == 0, res.output
    i = orjson.loads(res.stdout)["intended"]
    assert i["never_started"] is None  # not an open loop: every session starts at once
    assert (i["first_call_ttft_s"]["n"], i["later_calls_ttft_s"]["n"]) == (1, 2)
