"""Goodput across a sweep (issue 27): with a per-call ``--slo``, each level's row carries its goodput (the share of
its calls and of its complete tasks that met the SLO, and the met calls' output tokens/s), equal to a recount from
that level's run file by tests/support/recount.py (standard library only), in the JSON, the table and the page, and
rebuilt the same by ``replay report sweep.json``."""

from __future__ import annotations

import csv
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from tests.support import recount
from tests.support.trajectories import simple_turns, write_trajectory

SLO = "ttft<=2s,user_decode_tps>=30"
TERMS = [("ttft", "<=", 2.0), ("user_decode_tps", ">=", 30.0)]


@pytest.fixture(scope="module")
def sweep_doc(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Three levels of moe-8gpu on the virtual clock around the load where per-user speed falls to 30 tok/s."""
    work = tmp_path_factory.mktemp("goodput-sweep")
    traj = work / "short.jsonl"
    for i in range(12):
        write_trajectory(traj, f"s{i}", simple_turns(3 + i % 4, output_tokens=80, tool_time_s=0.5))
    args = ["sweep", str(traj), "-c", "40,52,64", "--virtual", "--window", "30s", "--warmup", "5s", "--sim-profile",
            "moe-8gpu", "--slo", SLO, "--out", str(work / "sw"), "--json", "-q"]  # fmt: skip
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return work / "sw" / "sweep.json", orjson.loads(res.stdout)


def test_each_levels_goodput_equals_a_recount_from_its_run_file(sweep_doc: tuple[Path, dict]) -> None:
    _, doc = sweep_doc
    assert doc["goodput_slo"] == ["ttft<=2s", "user_decode_tps>=30"]
    for lv in doc["levels"]:
        mine, theirs = lv["goodput"], recount.goodput(lv["run_file"], TERMS)
        assert mine["slo"] == SLO and mine["calls"] == lv["window"]["requests"] > 0
        for key in ("calls", "calls_met", "calls_met_share", "tasks", "tasks_met", "tasks_met_share"):
            assert mine[key] == theirs[key], (lv["concurrency"], key)
        for key in ("output_tps", "total_tps"):
            assert mine[key] == pytest.approx(theirs[key], rel=1e-12), (lv["concurrency"], key)
    shares = [lv["goodput"]["calls_met_share"] for lv in doc["levels"]]
    assert shares[0] > shares[-1] and any(0 < s < 1 for s in shares)  # more agents, slower each: fewer met it


def test_the_table_and_the_page_show_each_levels_goodput(sweep_doc: tuple[Path, dict], tmp_path: Path) -> None:
    index, live = sweep_doc
    res = CliRunner().invoke(main, ["report", str(index), "--json"])
    assert res.exit_code == 0, res.output
    assert [lv["goodput"] for lv in orjson.loads(res.stdout)["levels"]] == [lv["goodput"] for lv in live["levels"]]
    text = CliRunner().invoke(main, ["report", str(index)]).output
    header = next(line for line in text.splitlines() if line.startswith("sessions"))
    assert header.split()[-8:] == ["errors", "calls", "met", "tasks", "met", "good", "out", "tok/s"]
    assert f"goodput at the per-call SLO {SLO}: calls met" in text
    for lv in live["levels"]:
        g = lv["goodput"]
        row = next(line for line in text.splitlines() if line.split()[:1] == [str(lv["concurrency"])])
        cells = row.split()
        assert cells[-3:] == [
            f"{100 * g['calls_met_share']:.1f}%",
            f"{100 * g['tasks_met_share']:.1f}%",
            f"{g['output_tps']:,.0f}" if g["output_tps"] >= 100 else f"{g['output_tps']:,.1f}",
        ]
    pytest.importorskip("matplotlib")
    page = tmp_path / "sweep.html"
    assert CliRunner().invoke(main, ["report", str(index), "--html", str(page)]).exit_code == 0

    levels = page.read_text()
    levels = levels[levels.index('<section id="levels">') :]
    levels = levels[: levels.index("</section>")]
    assert "calls met" in levels and "good out tok/s" in levels and "Goodput at the per-call SLO" in levels
    for lv in live["levels"]:
        assert f"{100 * lv['goodput']['calls_met_share']:.1f}%" in levels


def test_a_sweep_without_a_per_call_slo_has_no_goodput_columns(tmp_path: Path) -> None:
    traj = tmp_path / "w.jsonl"
    write_trajectory(traj, "w", simple_turns(4, output_tokens=16))
    args = ["sweep", str(traj), "-c", "1,2", "--virtual", "--window", "3s", "--warmup", "1s", "--sim-profile", "fast",
            "--slo", "ttft_p95<=2s", "--out", str(tmp_path / "sw"), "-q"]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "calls met" not in res.output and "goodput at" not in res.output


def test_levels_csv_carries_each_levels_goodput(sweep_doc: tuple[Path, dict], tmp_path: Path) -> None:
    index, live = sweep_doc
    res = CliRunner().invoke(main, ["report", str(index), "--csv", str(tmp_path)])
    assert res.exit_code == 0, res.output
    with open(tmp_path / "levels.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["concurrency"]) for r in rows] == [lv["concurrency"] for lv in live["levels"]]
    for row, lv in zip(rows, live["levels"], strict=True):
        for key in ("calls_met_share", "tasks_met_share", "output_tps", "total_tps"):
            assert float(row[f"goodput.{key}"]) == pytest.approx(lv["goodput"][key], rel=1e-12), key
