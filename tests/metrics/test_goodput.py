"""Goodput (issue 27): the share of calls meeting every per-call SLO term, the share of complete tasks whose every
call met it, and the met calls' throughput; equal to an independent recount from the raw run file, live and offline,
re-judged at another SLO by ``replay report --slo``, merged exactly from parts, and gated on by thresholds."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.metrics.accumulator import Accumulator
from replay.metrics.goodput import SloError, is_call_term, parse_slo
from replay.metrics.summary import accumulate, header_slo, steady_window
from replay.records.reader import read_run
from tests.support import recount
from tests.support.trajectories import simple_turns, write_trajectory

SLO = "ttft<=2s,user_decode_tps>=30"
TERMS = [("ttft", "<=", 2.0), ("user_decode_tps", ">=", 30.0)]
# 52 agents on moe-8gpu (virtual clock) run at about 30 tok/s each: some calls and tasks meet the SLO, some do not.
LEVEL = 52


def _invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return res.exit_code, res.stdout if res.exit_code == 0 else res.output


@pytest.fixture(scope="module")
def level(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """One level of a virtual-clock sweep at the SLO: its live summary and its run file."""
    work = tmp_path_factory.mktemp("goodput")
    traj = work / "short.jsonl"
    for i in range(12):
        write_trajectory(traj, f"s{i}", simple_turns(3 + i % 4, output_tokens=80, tool_time_s=0.5))
    sweep = ["sweep", str(traj), "-c", str(LEVEL), "--virtual", "--window", "30s", "--warmup", "5s"]
    code, out = _invoke(*sweep, "--sim-profile", "moe-8gpu", "--slo", SLO, "--out", str(work / "sweep"), "--json", "-q")
    assert code == 0, out
    doc = orjson.loads(out)
    assert doc["goodput_slo"] == ["ttft<=2s", "user_decode_tps>=30"] and doc["slo"] == []
    (row,) = doc["levels"]
    return row, Path(row["run_file"])


def _same(ours: dict, theirs: dict) -> None:
    for key in ("calls", "calls_met", "calls_met_share", "tasks", "tasks_met", "tasks_met_share"):
        assert ours[key] == theirs[key], key
    for key in ("output_tps", "total_tps"):
        assert ours[key] == pytest.approx(theirs[key], rel=1e-12), key


def test_goodput_equals_a_recount_from_the_records(level: tuple[dict, Path]) -> None:
    row, run_file = level
    g = row["goodput"]
    assert g["slo"] == SLO
    assert 0 < g["calls_met"] < g["calls"] == row["window"]["requests"]  # some met it and some did not
    assert 0 < g["tasks_met"] < g["tasks"] == row["tasks"]["complete"]
    assert g["output_tps"] < row["throughput"]["output_tps"]
    _same(g, recount.goodput(run_file, TERMS))


def test_the_report_rebuilds_it_and_rejudges_it_at_another_slo(level: tuple[dict, Path]) -> None:
    row, run_file = level
    code, out = _invoke("report", str(run_file), "--json")
    assert code == 0, out
    assert orjson.loads(out)["goodput"] == row["goodput"]  # the header keeps the SLO
    code, out = _invoke("report", str(run_file), "--json", "--slo", "e2e<=3s", "--slo", "itl<35ms")
    assert code == 0, out
    other = orjson.loads(out)["goodput"]
    assert other["slo"] == "e2e<=3s,itl<35ms" and other["calls_met_share"] != row["goodput"]["calls_met_share"]
    _same(other, recount.goodput(run_file, [("e2e", "<=", 3.0), ("itl", "<", 0.035)]))
    code, out = _invoke("report", str(run_file), "--slo", "ttfat<=2s")
    assert code == 0 and "Goodput at the per-call SLO ttfat<=2s" in out
    page = run_file.parent / "page.html"
    code, out = _invoke("report", str(run_file), "--slo", "ttfat<=2s", "--html", str(page))
    assert code == 0 and "goodput at ttfat&lt;=2s" in page.read_text()


def test_parts_merge_exactly(level: tuple[dict, Path]) -> None:
    """Goodput of the records in two parts (the other half's through JSON, as a window record or a worker's part
    travels) merged is that of all of them."""
    _, run_file = level
    run = read_run(run_file)
    win, slo = steady_window(run), header_slo(run.header)
    whole = accumulate(run.requests, win, tasks=run.tasks, slo=slo)
    half = len(run.requests) // 2
    first = accumulate(run.requests[:half], win, tasks=run.tasks[: len(run.tasks) // 2], slo=slo)
    second = accumulate(run.requests[half:], win, tasks=run.tasks[len(run.tasks) // 2 :], slo=slo)
    merged = Accumulator()
    merged.merge(Accumulator.decode(orjson.loads(orjson.dumps(second.encode()))))
    merged.merge(first)
    complete = whole.tasks.complete
    assert merged.goodput.figures(complete, win.seconds) == whole.goodput.figures(complete, win.seconds)
    assert merged.goodput.missed == whole.goodput.missed and whole.goodput.n["calls"] > 0


def test_thresholds_gate_on_goodput(tmp_path: Path) -> None:
    traj = tmp_path / "w.jsonl"
    write_trajectory(traj, "w", simple_turns(4, output_tokens=16))
    base = ["run", str(traj), "-c", "2", "--tasks", "2", "--sim-profile", "fast", "-q", "--json", "--slo", "ttft<=60s"]
    code, out = _invoke(*base, "--threshold", "goodput.calls_met_share>=90%", "--out", str(tmp_path / "a.jsonl"))
    assert code == 0, out
    assert orjson.loads(out)["thresholds"][0]["figure"] == "goodput.calls_met_share"
    code, _ = _invoke(*base, "--threshold", "goodput.calls_met_share>1", "--out", str(tmp_path / "b.jsonl"))
    assert code == 2  # breached
    res = CliRunner().invoke(main, ["run", str(traj), "--sim-profile", "fast", "-q", "--threshold",
                                    "goodput.calls_met_share>=90%", "--out", str(tmp_path / "c.jsonl")])  # fmt: skip
    assert res.exit_code == 1 and "give --slo" in res.output


def test_the_grammar_names_per_call_figures_only() -> None:
    slo = parse_slo(["ttft<=2s, ttfat<3000ms", "e2e<1m,itl<=50ms,user_decode_tps>=30"])
    assert slo is not None and slo.terms == (
        ("ttft", "<=", 2.0), ("ttfat", "<", 3.0), ("e2e", "<", 60.0), ("itl", "<=", 0.05),
        ("user_decode_tps", ">=", 30.0))  # fmt: skip
    assert parse_slo([]) is None
    assert is_call_term("ttft<=2s") and not is_call_term("ttft_p95<=2s") and not is_call_term("nonsense")
    for bad, why in (("ttft_p95<=2s", "per-call figure"), ("ttft==2s", "a bound"), ("speed>3", "per-call figure")):
        with pytest.raises(SloError, match=why):
            parse_slo([bad])
    res = CliRunner().invoke(main, ["run", "--slo", "ttft_p95<2s", "--sim-profile", "fast", "-q"])
    assert res.exit_code == 1 and "--slo" in res.output and "ttft_p95<2s" in res.output


def test_a_resumed_run_keeps_its_slo() -> None:
    from replay.runner.resume import ResumeError, check_same

    before = {"load": {"duration_s": 60.0}, "slo": ["ttft<=2s"]}
    check_same(before, {"slo": ["ttft<=2s"]}, 60.0)
    check_same({"load": {"duration_s": 60.0}}, {"slo": []}, 60.0)  # a file made before --slo existed
    with pytest.raises(ResumeError, match="slo"):
        check_same(before, {"slo": ["ttft<=1s"]}, 60.0)


def _same_window(ours: dict, theirs: dict) -> None:
    assert ours["index"] == theirs["index"]
    _same(ours["goodput"], theirs)


def test_each_windows_goodput_equals_a_recount_of_the_records_written_in_it(tmp_path: Path) -> None:
    """On the virtual clock (the same figures every time): a windowed run at the SLO, each window's goodput recounted
    from the run file's lines (the calls and tasks written between its window record and the one before)."""
    from replay.sim.core.profiles import get_profile
    from replay.workload.trajectory import load_workload
    from tests.support.virtual import virtual_run

    traj = tmp_path / "short.jsonl"
    for i in range(12):
        write_trajectory(traj, f"s{i}", simple_turns(3 + i % 4, output_tokens=80, tool_time_s=0.5))
    out = tmp_path / "windowed.jsonl"
    virtual_run(get_profile("moe-8gpu"), load_workload([traj]), LEVEL, 40, 5, out=out, window_s=8.0, slo=[SLO])
    code, text = _invoke("report", str(out), "--json")
    assert code == 0, text
    summary = orjson.loads(text)
    windows, theirs = summary["windows"], recount.window_goodput(out, TERMS)
    assert len(windows) == len(theirs) >= 5
    for ours, recounted in zip(windows, theirs, strict=True):
        assert ours["goodput"]["slo"] == SLO
        _same_window(ours, recounted)
    goods = [w["goodput"] for w in windows]
    assert any(0 < g["calls_met"] < g["calls"] for g in goods)  # some calls of a window met the SLO, some not
    # a window whose every call met it, where a task that ended in it still missed (a call of it, in an earlier
    # window, did not): a task is judged by all its calls
    assert any(g["calls_met"] == g["calls"] and 0 < g["tasks_met"] < g["tasks"] for g in goods)
    # the windows hold every successful call once (warm-up and drain included), and every complete task
    assert sum(w["goodput"]["calls"] for w in windows) == sum(w["requests"] - w["errors"] for w in windows)
    assert sum(w["goodput"]["tasks"] for w in windows) == summary["goodput"]["tasks"]
    code, text = _invoke("report", str(out))
    assert code == 0 and f"Goodput over time at the per-call SLO {SLO}" in text
    first = next(w for w in windows if w["goodput"]["calls"])
    lead = f"  {first['start_s']:>6.0f} s {first['goodput']['calls']:>7,}"
    row = next(line for line in text[text.index("Goodput over time") :].splitlines() if line.startswith(lead))
    assert f"{100 * first['goodput']['calls_met_share']:.1f}%" in row
