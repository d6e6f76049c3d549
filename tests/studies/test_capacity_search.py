"""The capacity search: grow, bisect, repeat the boundary. On a fake run function (exact, so every rule can be
checked) and on the virtual-clock engine as a deterministic stand-in for a host, against a full sweep."""

from __future__ import annotations

import pytest

from replay.hosts.hardware import Hardware
from replay.runner.single_run import RunSpec
from replay.studies.capacity import CapacityPlan, bracket, result, search
from replay.studies.levels import Level, VirtualRunner
from replay.verdict.thresholds import parse_all
from replay.workload.trajectory import default_workload_path, load_workload

SLO = tuple(parse_all(["ttft_p95<=2s"]))


@pytest.fixture(scope="module")
def default_workload():
    return load_workload([default_workload_path()])


def fake_host(capacity: int, flaky: dict[int, list[bool]] | None = None):
    """TTFT p95 of 1 s up to ``capacity`` agents, 3 s beyond; ``flaky`` scripts a level's outcomes run by run."""
    calls: list[tuple[int, int]] = []
    scripted = {c: list(v) for c, v in (flaky or {}).items()}

    def run(c: int, attempt: int) -> Level:
        calls.append((c, attempt))
        ok = scripted[c].pop(0) if scripted.get(c) else c <= capacity
        summary = {"requests": 10, "errors": 0, "ttft_s": {"p95": 1.0 if ok else 3.0}}
        return Level(c, summary, None, attempt)

    return run, calls


def plan(**kw) -> CapacityPlan:
    return CapacityPlan(tuple(t.expr for t in SLO), 60, 20, "fake", **kw)


@pytest.mark.parametrize("capacity", [1, 2, 7, 13, 100, 255])
def test_finds_the_exact_capacity_in_fewer_runs_than_a_sweep(capacity):
    run, calls = fake_host(capacity)
    probes = search(run, SLO, plan(limit=256))
    lo, hi = bracket(probes)
    assert (lo, hi) == (capacity, capacity + 1)
    assert calls[-1] == (capacity, 2)  # the boundary repeated last
    if capacity >= 7:  # a linear sweep to the first failure takes capacity + 1 runs
        assert len(calls) < capacity + 1
    assert len(calls) <= 2 * (capacity + 1).bit_length() + 2


def test_grows_by_the_factor_then_bisects():
    run, calls = fake_host(13)
    search(run, SLO, plan(limit=256))
    assert [c for c, _ in calls] == [1, 2, 4, 8, 16, 12, 14, 13, 13]


def test_a_boundary_that_breaks_on_its_repeat_moves_the_answer_down():
    run, calls = fake_host(13, flaky={13: [True, False]})
    probes = search(run, SLO, plan(limit=256))
    assert bracket(probes) == (12, 13)
    assert calls[-2:] == [(13, 2), (12, 2)]  # 13 broke on its repeat: 12 is now the boundary, repeated too


def test_never_breaking_stops_at_max_and_says_the_capacity_is_at_least_that():
    run, calls = fake_host(1000)
    probes = search(run, SLO, plan(limit=20))
    doc = result(plan(limit=20).public(), probes)
    assert doc["max_concurrency"] == 20 and doc["first_broken"] is None
    assert "at least 20" in doc["uncertainty"]["text"]
    assert max(c for c, _ in calls) == 20


def test_nothing_holds():
    run, _ = fake_host(0)
    doc = result(plan().public(), search(run, SLO, plan(start=4)))
    assert doc["max_concurrency"] == 0 and doc["first_broken"] == 1
    assert "no level held" in doc["uncertainty"]["text"]


def test_a_level_above_the_boundary_that_held_is_reported_not_hidden():
    run, calls = fake_host(4, flaky={8: [True]})  # 8 holds on its first run (noise), breaks on its repeat
    doc = result(plan().public(), search(run, SLO, plan(limit=64)))
    assert doc["max_concurrency"] == 4 and doc["uncertainty"]["bracket"] == [4, 5]
    assert (8, 2) in calls  # the repeat that caught it
    assert doc["uncertainty"]["levels_out_of_order"] == [8]
    assert "not monotone" in doc["uncertainty"]["text"]


def test_answer_per_gpu_kw_mw_and_dollar_hour():
    run, _ = fake_host(24)
    hw = Hardware(gpus=8, power_kw=5.6, price_per_hour=40.0)
    doc = result(plan(hardware=hw).public(), search(run, SLO, plan(hardware=hw)))
    assert doc["max_concurrency"] == 24
    assert doc["per_gpu"] == 3.0
    assert doc["per_kw"] == pytest.approx(24 / 5.6)
    assert doc["per_mw"] == pytest.approx(24 / 0.0056)
    assert doc["per_dollar_hour"] == pytest.approx(0.6)
    assert "not the whole datacentre" in doc["power_note"]
    assert [p["step"] for p in doc["probes"]][:3] == ["grow", "grow", "grow"]


def test_on_the_virtual_engine_within_one_agent_of_a_full_sweep_in_fewer_runs(default_workload, tmp_path):
    """The deterministic stand-in: the same runs as against the simulated host, on a virtual clock."""
    slo = tuple(parse_all(["user_decode_tps_p25>=30"]))
    spec = RunSpec(sim_profile="moe-8gpu", progress=False)
    runner = VirtualRunner(spec, tmp_path, window_s=40, warmup_s=10, workload=default_workload)
    p = CapacityPlan(tuple(t.expr for t in slo), 40, 10, "sim:moe-8gpu", limit=64, mode="virtual clock")
    probes = search(runner, slo, p)
    answer, first_broken = bracket(probes)
    # the full sweep: every level from 1 up to the first that breaks
    full = []
    for c in range(1, 65):
        ok = all(t.judge(runner(c).summary)["ok"] for t in slo)
        full.append((c, ok))
        if not ok:
            break
    sweep_answer = max((c for c, ok in full if ok), default=0)
    assert abs(answer - sweep_answer) <= 1
    assert len(probes) < len(full)
    assert first_broken is not None and answer >= 4  # a real search, not the first level


def test_on_the_virtual_clock_no_level_is_repeated_nor_said_to_have_held_every_time(tmp_path):
    """Issue 24: a level run again on the virtual clock is the same run; "held every time" claimed evidence of it."""
    import orjson
    from click.testing import CliRunner

    from replay.cli import main
    from tests.support.trajectories import simple_turns, write_trajectory

    work = tmp_path / "w.jsonl"
    for i in range(3):
        write_trajectory(work, f"w{i}", simple_turns(4, output_tokens=16, tool_time_s=0.1))
    res = CliRunner().invoke(main, ["capacity", str(work), "--virtual", "--slo", "ttft_p95<=60s", "--max", "3",
                                    "--window", "4s", "--warmup", "1s", "--json", "-q"])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout)
    levels = [p["concurrency"] for p in doc["probes"]]
    assert len(levels) == len(set(levels)) and doc["uncertainty"]["boundary_runs"] == 1  # each level once
    assert "held every time" not in doc["uncertainty"]["text"] and "deterministic" in doc["uncertainty"]["text"]
