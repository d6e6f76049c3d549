"""Lanes as session trees, open-loop arrivals, start points, tool-time distributions and idle caps."""

from __future__ import annotations

import asyncio
import itertools
import random
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.loops.arrivals import Arrivals
from replay.loops.closed_loop import LoadConfig
from replay.metrics.summary import summarize
from replay.records.reader import read_run
from replay.runner.single_run import RunSpec, execute
from replay.sessions.idle import IdleGuard, TreeState
from replay.sessions.lanes import LaneConfig
from replay.sessions.start_points import StartAt, Timeline
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.trajectory import load_workload
from tests.support.trajectories import simple_turns, write_trajectory


def _tree(path: Path, child_latency: float = 0.3) -> Path:
    """A root of 3 calls whose first spawns a 3-call subagent that ends after the root's last call starts."""
    root = simple_turns(3, output_tokens=8, tool_time_s=0.05)
    for i, t in enumerate(root):
        t["recorded"] = {"timestamp": 100.0 + 0.2 * i, "latency_s": 0.1}
    root[0]["spawn"] = [{"trajectory": "child"}]
    child = simple_turns(3, output_tokens=8, tool_time_s=0.3)
    for i, t in enumerate(child):
        t["recorded"] = {"timestamp": 100.1 + 0.6 * i, "latency_s": child_latency}
    write_trajectory(path, "root", root)
    write_trajectory(path, "child", child, subagent=True)
    return path


def _spec(tmp: Path, workload: Path, load: LoadConfig, **kw) -> RunSpec:
    return RunSpec(trajectories=[str(workload)], load=load, out=str(tmp / "run.jsonl"), sim_profile="fast",
                   progress=False, **kw)  # fmt: skip


def test_a_background_subagent_keeps_its_lane_busy_after_its_root_finishes(tmp_path) -> None:
    workload = _tree(tmp_path / "w.jsonl")
    lanes = LaneConfig(background_subagents=True)
    result = execute(_spec(tmp_path, workload, LoadConfig(concurrency=1, tasks=2, lanes=lanes)))
    run = read_run(result.path)
    for task in (0, 1):
        root = [r for r in run.requests if r.task == task and r.parent is None]
        child = [r for r in run.requests if r.task == task and r.parent == "root"]
        assert len(root) == 3 and len(child) == 3
        assert max(r.t_done for r in root) < max(r.t_done for r in child)  # the root did not wait for it
    first_of_next = min(r.t_sent for r in run.requests if r.task == 1)
    assert first_of_next >= max(r.t_done for r in run.requests if r.task == 0)  # the lane was held until it ended
    t0 = next(t for t in run.tasks if t.task == 0)
    assert t0.t_root_end is not None and t0.t_root_end < t0.t_end and t0.status == "complete"


def test_without_background_subagents_the_parent_joins_its_subagent(tmp_path) -> None:
    workload = _tree(tmp_path / "w.jsonl")
    run = read_run(execute(_spec(tmp_path, workload, LoadConfig(concurrency=1, tasks=1))).path)
    root = sorted((r for r in run.requests if r.parent is None), key=lambda r: r.turn)
    child = [r for r in run.requests if r.parent == "root"]
    assert root[1].t_sent >= max(r.t_done for r in child)


def test_timeline_plans_resume_turns_and_running_subagents(tmp_path) -> None:
    wl = load_workload([_tree(tmp_path / "w.jsonl")])
    by_id = wl.by_id()
    tl = Timeline(by_id["root"], by_id)
    assert tl.bounds() == pytest.approx((100.0, 101.3))
    plan = tl.plan(0.25)  # t* = 100.325: root resumes at call 2 (100.4); the subagent at call 1 (100.7)
    assert plan.root.resume == 2 and plan.root.primer == 1
    assert [(ref.trajectory, c.resume, c.primer) for ref, c in plan.root.children] == [("child", 1, 0)]
    assert plan.primers() == 2
    assert tl.background(by_id["root"], 0, by_id["child"])  # no later root call starts after it ends
    assert tl.plan(1.0).root.children[0][1].resume == 2


def test_open_loop_latency_grows_with_the_backlog_and_the_closed_loop_does_not(tmp_path) -> None:
    """Poisson arrivals at about three times what 2 live sessions can serve, against a closed loop of 2."""
    path = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(path, f"t{i}", simple_turns(2, output_tokens=150, tool_time_s=0.0))
    arrivals = Arrivals.parse("poisson:12")
    spec = _spec(tmp_path, path, LoadConfig(concurrency=2, tasks=36), arrivals=arrivals, max_live=2)
    opened = execute(spec).summary["intended"]
    quarters = opened["ttft_from_intended_by_quarter_s"]
    assert opened["open_loop"]["backlog_max"] >= 8 and opened["open_loop"]["max_live"] == 2
    assert quarters[3] > 3 * quarters[0] and quarters[2] > quarters[1]
    closed_spec = _spec(tmp_path / "c", path, LoadConfig(concurrency=2, tasks=36))
    (tmp_path / "c").mkdir()
    # the closed loop has no backlog, by construction rather than by timing: each session's call is meant to start
    # only once its previous call is back, so latency from the intended start holds no wait for a free session
    calls: dict[int, list] = {}
    for r in read_run(execute(closed_spec).path).requests:
        calls.setdefault(r.session, []).append(r)
    for mine in calls.values():
        mine.sort(key=lambda r: r.t_intended)
        assert all(b.t_intended >= a.t_done for a, b in itertools.pairwise(mine))
        assert all(r.t_intended <= r.t_call for r in mine)


def test_arrival_models_parse_and_keep_their_mean() -> None:
    sched = Arrivals.parse("gamma:4:2").schedule([], iter(lambda: None, 1), seed=3)
    times = [t for t, _ in (next(sched) for _ in range(4001))]
    assert times[-1] / 4000 == pytest.approx(0.25, rel=0.1)  # the mean gap: 1 / RATE
    for bad in ("poisson", "poisson:0", "gamma:1", "uniform:3", "recorded:-1"):
        with pytest.raises(ValueError, match="arrivals"):
            Arrivals.parse(bad)
    assert str(Arrivals.parse("recorded")) == "recorded:1"


def test_tool_time_distribution_is_seeded_and_capped() -> None:
    policy = ToolTimePolicy.parse("dist:lognormal:2:0.5")
    draws = [policy.pause(99.0, random.Random(7)) for _ in range(3)]
    assert draws[0] == draws[1] == draws[2]  # the same seed, the same pause; the recorded time is not used
    many = sorted(policy.pause(0.0, rng) for rng in [random.Random(1)] for _ in range(4001))
    assert many[2000] == pytest.approx(2.0, rel=0.1)  # the median
    capped = ToolTimePolicy.parse("recorded", cap=5.0)
    assert capped.pause(300.0) == 5.0 and capped.pause(1.0) == 1.0 and str(capped) == "recorded,idle-cap:5"
    for bad in ("dist:lognormal:0:1", "dist:normal:1:1", "dist:lognormal:1"):
        with pytest.raises(ValueError, match="tool time policy"):
            ToolTimePolicy.parse(bad)


def test_start_at_parses_ratios_and_ranges() -> None:
    assert StartAt.parse("0.5") == StartAt(0.5, 0.5)
    assert StartAt.parse("random:0.25:0.75") == StartAt(0.25, 0.75)
    for bad in ("1.5", "random:0.8:0.2", "half"):
        with pytest.raises(ValueError, match="start point"):
            StartAt.parse(bad)


def test_idle_caps_end_pauses_when_nothing_is_in_flight() -> None:
    async def go() -> tuple[float, float, float]:
        stop = asyncio.Event()
        system = IdleGuard(system_cap_s=0.05, tree_cap_s=None)
        a, b = TreeState(), TreeState()
        t0 = asyncio.get_running_loop().time()

        async def then_call() -> float:  # the released pause is followed by a call of 1 s, as an agent's would be
            await system.pause(a, 30.0, stop)
            end = asyncio.get_running_loop().time() - t0
            system.started(a)
            await asyncio.sleep(1.0)
            system.ended(a)
            return end

        async def later() -> float:
            await system.pause(b, 30.5, stop)
            return asyncio.get_running_loop().time() - t0

        first, second = await asyncio.gather(then_call(), later())
        tree = IdleGuard(system_cap_s=None, tree_cap_s=0.05)
        busy = TreeState()
        tree.started(busy)  # a call of another tree in flight does not hold this tree's pause
        alone = await tree.pause(TreeState(), 30.0, stop)
        return first, second, alone

    first, second, alone = asyncio.run(go())
    assert first < 5 and second < 5 and alone < 5  # cut from 30 s (and 30.5 s)
    assert second - first >= 0.5 - 2e-3  # shifted together: the spacing is kept (late when busy, never early)


def test_bad_recipe_options_name_the_option(tmp_path) -> None:
    runner = CliRunner()
    for args, option in ((["--start-at", "2"], "--start-at"), (["--arrivals", "poisson:-1"], "--arrivals"),
                         (["--rate-card", "1:2"], "--rate-card"), (["--slo-tier", "x:1"], "--slo-tier"),
                         (["--recipe", "agentx", "--arrivals", "poisson:1"], "--arrivals")):  # fmt: skip
        result = runner.invoke(main, ["run", "--out", str(tmp_path / "r.jsonl"), *args])
        assert result.exit_code != 0 and option in result.output, result.output
        assert "Traceback" not in result.output


def test_aa_recipe_judges_its_tiers_per_run_and_normalises_them(tmp_path) -> None:
    path = tmp_path / "w.jsonl"
    for i in range(3):
        write_trajectory(path, f"t{i}", simple_turns(3, output_tokens=40, tool_time_s=0.01))
    args = ["run", str(path), "--recipe", "aa-agentperf", "-c", "3", "--sim-profile", "fast", "--gpus", "4",
            "--power-kw", "10", "--slo-tier", "easy:30:1", "--slo-tier", "impossible:0.000001:1000000",
            "--rate-card", "1:0.1:4", "--json", "-q", "--out", str(tmp_path / "r.jsonl")]  # fmt: skip
    s = orjson.loads(CliRunner().invoke(main, args, catch_exceptions=False).output)
    easy, impossible = s["aa"]["slo_tiers"]
    assert easy["met"] and easy["max_concurrent_agents"] == 3
    assert easy["agents_per_accelerator"] == pytest.approx(3 / 4) and easy["agents_per_mw"] == pytest.approx(300)
    assert not impossible["met"] and impossible["max_concurrent_agents"] is None
    assert s["aa"]["total_tokens_per_s"] == s["throughput"]["total_tps"]
    assert s["aa"]["output_speed_after_first_token_p25"] == s["user_decode_tps"]["p25"]
    cost = s["beside"]["cost_per_task"]
    assert cost["tasks"] == 3 and cost["mean"] > 0
    assert s["submission_valid"] is True  # no duration floor or error in AA's public rules
    text = CliRunner().invoke(main, ["report", str(tmp_path / "r.jsonl")]).output
    assert "tier easy" in text and "met by 3 agents" in text
    rebuilt = summarize(read_run(tmp_path / "r.jsonl"))  # the run file alone gives the same figures
    assert rebuilt["aa"] == s["aa"] and rebuilt["beside"] == s["beside"] and rebuilt["submission_valid"]


def test_recorded_arrivals_follow_the_workload_timestamps_scaled(tmp_path) -> None:
    path = tmp_path / "w.jsonl"
    for i, ts in enumerate((1000.0, 1010.0, 1004.0)):
        turns = simple_turns(1)
        turns[0]["recorded"] = {"timestamp": ts}
        write_trajectory(path, f"t{i}", turns)
    tasks = load_workload([path]).tasks
    sched = list(Arrivals.parse("recorded:2").schedule(tasks, iter(tasks), seed=0))
    assert [(t, traj.id) for t, traj in sched] == [(0.0, "t0"), (2.0, "t2"), (5.0, "t1")]


def test_start_at_warm_starts_the_first_tree_with_its_primers(tmp_path) -> None:
    workload = _tree(tmp_path / "w.jsonl")
    out = tmp_path / "r.jsonl"
    args = ["run", str(workload), "--start-at", "0.25", "--tasks", "2", "-c", "1", "--sim-profile", "fast", "--json",
            "-q", "--out", str(out)]  # fmt: skip
    summary = orjson.loads(CliRunner().invoke(main, args, catch_exceptions=False).output)
    run = read_run(out)
    warm = [r for r in run.requests if r.phase == "warmup"]
    assert sorted((r.trajectory, r.turn) for r in warm) == [("child", 0), ("root", 1)]  # the calls before t*
    assert all(r.task == 0 and r.max_tokens == 1 for r in warm)
    first = [r for r in run.requests if r.task == 0 and r.phase == "measured"]
    assert sorted((r.trajectory, r.turn) for r in first) == [("child", 1), ("child", 2), ("root", 2)]
    assert len([r for r in run.requests if r.task == 1]) == 6  # the next tree starts at turn 0
    assert run.phases["steady_start"] >= max(r.t_done for r in warm)
    assert summary["warmup_requests"] == 2 and summary["tasks"]["warm_started"] == 1
    assert summary["tasks"]["count"] == 1  # only the whole task counts in the per-task figures
    assert "submission_valid" not in summary  # no recipe, no verdict
