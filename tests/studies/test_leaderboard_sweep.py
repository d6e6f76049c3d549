"""A sweep on the leaderboards' axes: E2E-normalised interactivity at every level, recounted from each level's run
file by code that shares nothing with replay, and the Pareto frontier drawn on it (``--frontier-x``)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from tests.support import recount
from tests.support.trajectories import simple_turns, write_trajectory


@pytest.fixture(scope="module")
def sweep_doc(tmp_path_factory) -> tuple[Path, dict]:
    """Levels 1, 2 and 4 on the fast profile, the frontier on interactivity_e2e_p90, with the page."""
    tmp = tmp_path_factory.mktemp("lb-sweep")
    work = tmp / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(4, output_tokens=24, tool_time_s=0.02))
    args = ["sweep", str(work), "-c", "1,2,4", "--window", "1.5", "--warmup", "0.5", "--sim-profile", "fast",
            "--frontier-x", "interactivity_e2e_p90", "--out", str(tmp / "sw"), "--json", "-q"]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    return tmp, orjson.loads(res.stdout)


def test_each_levels_interactivity_e2e_equals_a_recount_from_its_run_file(sweep_doc):
    _, doc = sweep_doc
    for lv in doc["levels"]:
        mine, theirs = lv["interactivity_e2e"], recount.interactivity_e2e(lv["run_file"])
        assert mine["n"] == theirs["n"] > 0
        for key in ("p50", "p75", "p90", "p95"):
            assert mine[key] == pytest.approx(theirs[key], rel=0.002)  # 3 significant digits (done when: 0.5 %)
        assert mine["mean"] == pytest.approx(theirs["mean"], rel=0.002)
        assert mine["std"] == pytest.approx(theirs["std"], rel=0.01, abs=0.01)


def test_the_frontier_is_computed_on_the_chosen_x(sweep_doc):
    _, doc = sweep_doc
    assert doc["frontier_x"] == "interactivity_e2e_p90" and doc["frontier_axes"]["x"] == "interactivity_e2e.p90"
    gpus = doc["hardware"]["gpus"] or 1
    points = [(lv["concurrency"], recount.interactivity_e2e(lv["run_file"])["p90"],
               lv["throughput"]["total_tps"] / gpus) for lv in doc["levels"]]  # fmt: skip
    assert sorted(p["concurrency"] for p in doc["frontier"]) == recount.pareto(points)
    for p in doc["frontier"]:
        lv = next(lv for lv in doc["levels"] if lv["concurrency"] == p["concurrency"])
        assert p["x"] == p["interactivity_e2e_p90"] == lv["interactivity_e2e"]["p90"]
    xs = [p["x"] for p in doc["frontier"]]
    assert xs == sorted(xs, reverse=True)  # fastest per user first


def test_report_rebuilds_the_frontier_and_draws_it_on_that_axis(sweep_doc, tmp_path):
    tmp, live = sweep_doc
    index = tmp / "sw" / "sweep.json"
    res = CliRunner().invoke(main, ["report", str(index), "--json"])
    assert res.exit_code == 0, res.output
    rebuilt = orjson.loads(res.stdout)
    assert rebuilt["levels"] == live["levels"] and rebuilt["frontier"] == live["frontier"]
    text = CliRunner().invoke(main, ["report", str(index)]).output
    assert "E2E intvty p90" in text and "E2E-normalised interactivity p90" in text
    pytest.importorskip("matplotlib")
    page = tmp_path / "sweep.html"
    assert CliRunner().invoke(main, ["report", str(index), "--html", str(page)]).exit_code == 0
    html = page.read_text()
    frontier = html[html.index('id="frontier"') :]
    assert "--frontier-x interactivity_e2e_p90" in frontier and "<svg" in frontier
    assert "E2E-normalised interactivity p90 (tokens/s)" in frontier  # the plot's x label


def test_an_unknown_frontier_axis_is_refused_before_any_run(tmp_path):
    res = CliRunner().invoke(main, ["sweep", "-c", "1", "--frontier-x", "ttft_p90", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "--frontier-x" in res.output and "interactivity_e2e_p90" in res.output
    assert not (tmp_path / "sweep.json").exists()
