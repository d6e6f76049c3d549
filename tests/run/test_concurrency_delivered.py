"""Delivered concurrency, proven: the summary's ``concurrency`` is the same live and offline (one process and
worker processes), equals a recount from the run file's raw lines made here without replay's code, agrees with the
simulated host's own truth log, and a run that delivered less than it asked never passes (exit 3)."""

from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from tests.support.trajectories import simple_turns, write_trajectory


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("work") / "w.jsonl"
    for i in range(6):
        write_trajectory(path, f"t{i}", simple_turns(5, output_tokens=16, tool_time_s=0.1))
    return path


def _run(*args: str) -> tuple[int, dict]:
    res = CliRunner().invoke(main, ["run", *args, "--sim-profile", "fast", "-q", "--json"], catch_exceptions=False)
    return res.exit_code, orjson.loads(res.stdout)


def _report(out: Path) -> dict:
    res = CliRunner().invoke(main, ["report", str(out), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


def _text(out: Path) -> str:
    return CliRunner().invoke(main, ["report", str(out)], catch_exceptions=False).stdout


def _lines(out: Path) -> list[dict]:
    return [orjson.loads(line) for line in out.read_bytes().splitlines() if line.strip()]


def _overlap(a: float, b: float, lo: float, hi: float) -> float:
    return max(0.0, min(b, hi) - max(a, lo))


def _recount(out: Path, span: tuple[float, float] | None = None) -> dict:
    """The lane figures from the raw lines: for each whole clock second in the steady window (or ``span``), the
    seconds of root calls (begun to done), of tasks (start to end) and between two tasks of a lane."""
    lines = _lines(out)
    header = lines[0]
    phases = {r["name"]: r["t"] for r in lines if r["type"] == "phase"}
    footer = next(r for r in lines if r["type"] == "footer")
    lanes = footer["sessions"]
    lo, hi = span or (phases["steady_start"], phases["stop"])
    seconds = range(math.ceil(lo), math.floor(hi))
    roots = [r for r in lines if r["type"] == "request" and r["parent"] is None and r["t_done"] is not None]
    tasks = [r for r in lines if r["type"] == "task"]
    by_lane: dict[int, list[dict]] = {}
    for t in sorted(tasks, key=lambda t: t["t_start"]):
        by_lane.setdefault(t["session"], []).append(t)
    gaps = [(a["t_end"], b["t_start"]) for lane in by_lane.values() for a, b in pairwise(lane)]
    calls, active = [], []
    for k in seconds:
        call = sum(_overlap(r["t_call"] or r["t_sent"], r["t_done"], k, k + 1) for r in roots)
        task = sum(_overlap(t["t_start"], t["t_end"], k, k + 1) for t in tasks)
        between = sum(_overlap(a, b, k, k + 1) for a, b in gaps)  # a closed loop's lane taking its next task
        calls.append(call)
        active.append(task + between)
    return {
        "asked": header["load"]["concurrency"],
        "made_calls": len({r["session"] for r in lines if r["type"] == "request"}),
        "seconds": len(seconds),
        "in_call_mean": sum(calls) / len(calls),
        "in_call_min": min(calls),
        "active_mean": sum(active) / len(active),
        "active_share": sum(active) / len(active) / lanes,
    }


def _host_in_flight(out: Path) -> tuple[float, float]:
    """From the simulated host's truth log: its calls in flight (arrival to done) per whole second of the window,
    over the client's root calls, as a mean; and the mean of the time between the client's and the host's stamps of
    each call's start and end."""
    lines = _lines(out)
    phases = {r["name"]: r["t"] for r in lines if r["type"] == "phase"}
    roots = {r["id"]: r for r in lines if r["type"] == "request" and r["parent"] is None and r["t_done"] is not None}
    truth = [orjson.loads(x) for x in out.with_suffix(".truth.jsonl").read_bytes().splitlines() if x.strip()]
    seconds = range(math.ceil(phases["steady_start"]), math.floor(phases["stop"]))
    host = edges = 0.0
    for t in truth:
        r = roots.get(t["request_id"])
        if r is None:
            continue
        for k in seconds:
            host += _overlap(t["arrival"], t["done"], k, k + 1)
            sent, done = sorted((r["t_sent"], t["arrival"])), sorted((t["done"], r["t_done"]))
            edges += _overlap(*sent, k, k + 1) + _overlap(*done, k, k + 1)  # either way (a stamp taken late)
    return host / len(seconds), edges / len(seconds)


def _check_recount(summary: dict, out: Path) -> None:
    c, mine = summary["concurrency"], _recount(out)
    assert (c["asked"], c["made_calls"], c["seconds"]) == (mine["asked"], mine["made_calls"], mine["seconds"])
    for key in ("in_call_mean", "in_call_min", "active_mean", "active_share"):
        assert c[key] == pytest.approx(mine[key], rel=1e-5, abs=1e-5), key


def test_a_closed_loops_delivery_is_the_same_live_offline_recounted_and_by_the_hosts_truth(
    workload: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run.jsonl"
    code, live = _run(str(workload), "-c", "4", "--duration", "3.2s", "--out", str(out))
    assert code == 0, live["verdict"]
    assert live == _report(out)
    c = live["concurrency"]
    assert c["judged"] and c["delivered"] and c["shortfall"] is None and c["seconds"] >= 2
    assert c["asked"] == c["lanes"] == c["made_calls"] == 4
    _check_recount(live, out)
    assert c["in_call_mean"] + c["in_tool_mean"] + c["between_tasks_mean"] == pytest.approx(c["active_mean"])
    assert c["active_mean"] + c["idle_mean"] == pytest.approx(4)
    host, edges = _host_in_flight(out)  # the host saw the calls between their sending and their end
    on_the_wire = c["in_call_mean"] - c["client_wait_mean"]
    # the same calls, apart from each end's stamps (and the summary's whole microseconds: one per call a second)
    assert host > 0 and abs(on_the_wire - host) <= edges + 1e-4
    text = _text(out)
    assert "Concurrency: 4 sessions asked, 4 made calls (delivered)" in text
    assert f"active {c['active_mean']:,.1f} ({c['active_min']:,.1f}) of 4 = " in text
    assert f"in a call {c['in_call_mean']:,.1f} ({c['in_call_min']:,.1f})" in text


def test_worker_processes_deliver_their_lanes_figures_to_the_parent_and_a_threshold_gates_on_them(
    workload: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run.jsonl"
    gate = "concurrency_active_share>1.01"  # more than every lane: breached, whatever was delivered
    code, live = _run(str(workload), "-c", "4", "--workers", "2", "--duration", "3.2s", "--threshold", gate,
                      "--out", str(out))  # fmt: skip
    assert live == _report(out)
    _check_recount(live, out)
    assert live["concurrency"]["made_calls"] == 4  # both workers' lanes
    [judged] = live["thresholds"]
    assert judged["figure"] == "concurrency.active_share" and judged["value"] == live["concurrency"]["active_share"]
    assert not judged["ok"] and code == live["verdict"]["exit_code"] == 2


def test_a_ramp_that_falls_behind_the_window_never_passes(workload: Path, tmp_path: Path) -> None:
    """The window opens at 1 s, the lanes start over 8 s: most lanes are idle in it."""
    out = tmp_path / "run.jsonl"
    code, live = _run(str(workload), "-c", "4", "--duration", "3.2s", "--warmup", "1s", "--ramp-up", "8s",
                      "--out", str(out))  # fmt: skip
    c = live["concurrency"]
    assert c["judged"] and c["delivered"] is False and c["active_share"] < 0.95
    assert c["made_calls"] < c["asked"] == 4
    assert code == live["verdict"]["exit_code"] == 3 and not live["verdict"]["passed"]
    assert c["shortfall"] in live["verdict"]["reasons"] and "lanes active on average" in c["shortfall"]
    assert "(NOT delivered: under 95%)" in _text(out)
    assert live == _report(out)
    _check_recount(live, out)


def test_an_open_loop_whose_arrivals_fall_behind_never_passes(workload: Path, tmp_path: Path) -> None:
    """Arrivals at 30 a second into at most 2 live sessions: most never start."""
    out = tmp_path / "run.jsonl"
    code, live = _run(str(workload), "--arrivals", "poisson:30", "--max-live", "2", "--duration", "2s",
                      "--warmup", "0", "--out", str(out))  # fmt: skip
    c = live["concurrency"]
    footer = next(r for r in _lines(out) if r["type"] == "footer")["open_loop"]
    assert (c["arrivals_asked"], c["arrivals_started"]) == (
        footer["arrived"],
        footer["arrived"] - footer["never_started"],
    )
    assert c["arrivals_started"] == sum(1 for r in _lines(out) if r["type"] == "task")  # every started task recorded
    assert c["asked"] == 2 and c["delivered"] is False and "arrivals started" in c["shortfall"]
    assert code == live["verdict"]["exit_code"] == 3
    assert live == _report(out)


def test_a_run_measured_whole_is_not_judged_on_its_drain(workload: Path, tmp_path: Path) -> None:
    """A run of N tasks is measured whole: its last lanes run out of tasks inside the window, as the workload says."""
    code, live = _run(str(workload), "-c", "4", "--tasks", "5", "--out", str(tmp_path / "run.jsonl"))
    c = live["concurrency"]
    assert code == 0 and not c["judged"] and c["delivered"] is None and c["shortfall"] is None


def test_each_window_of_a_soak_says_what_its_lanes_did(workload: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    code, live = _run(str(workload), "-c", "3", "--duration", "6.2s", "--window", "2s", "--out", str(out))
    assert code == 0 and live == _report(out)
    records = {r["index"]: r for r in _lines(out) if r["type"] == "window"}
    rows = [w for w in live["windows"] if w["concurrency"]["seconds"]]
    assert len(rows) >= 2
    for row in rows:  # each window's whole seconds, tasks that ended in a later window included
        w = records[row["index"]]
        mine = _recount(out, (w["t_start"], w["t_end"]))
        assert row["concurrency"]["seconds"] == mine["seconds"]
        for key in ("in_call_mean", "in_call_min", "active_mean", "active_share"):
            assert row["concurrency"][key] == pytest.approx(mine[key], rel=1e-5, abs=1e-5), key
