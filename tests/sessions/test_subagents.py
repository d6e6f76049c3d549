"""Subagents: spawned after a call, run concurrently inside the parent's slot, joined before its next call."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from replay.loops.closed_loop import LoadConfig
from replay.records.reader import read_run
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.trajectory import TrajectoryError, load_workload
from tests.support.trajectories import simple_turns, write_trajectory


def _child_turns(tag: str, n: int, fresh: bool) -> list[dict]:
    turns = []
    for i in range(n):
        append = [{"role": "user", "content": f"[{tag}] subtask step {i}: " + "grep -rn parser " * (20 + 5 * i)}]
        if i == 0 and fresh:
            append.insert(0, {"role": "system", "content": f"You are the {tag} helper agent."})
        turns.append({"append": append, "output": {"content": f"{tag} result {i}"}, "output_tokens": 30,
                      "tool_time_s": 0.0})  # fmt: skip
    return turns


def _tree(tmp_path: Path) -> Path:
    parent = simple_turns(3, output_tokens=10, tool_time_s=0.01)
    parent[1]["spawn"] = [{"trajectory": "fork-child", "fork": True}, {"trajectory": "fresh-child"}]
    path = write_trajectory(tmp_path / "tree.jsonl", "parent", parent)
    write_trajectory(path, "fork-child", _child_turns("fork", 2, fresh=False), subagent=True)
    write_trajectory(path, "fresh-child", _child_turns("fresh", 3, fresh=True), subagent=True)
    return path


def test_subagents_run_concurrently_with_their_own_cache_behaviour(tmp_path: Path) -> None:
    spec = RunSpec(
        trajectories=[str(_tree(tmp_path))],
        load=LoadConfig(concurrency=1, tool_time=ToolTimePolicy.parse("recorded")),
        out=str(tmp_path / "run.jsonl"),
        sim_profile="default",
        sim_truth_log=str(tmp_path / "truth.jsonl"),
        progress=False,
    )
    result = execute(spec)
    run = read_run(result.path)
    truth = {t["request_id"]: t for t in map(orjson.loads, (tmp_path / "truth.jsonl").read_bytes().splitlines())}
    assert all(r.error is None for r in run.requests)
    by = {(r.trajectory, r.turn): r for r in run.requests}
    assert len(run.requests) == 3 + 2 + 3
    assert {r.parent for r in run.requests if r.trajectory != "parent"} == {"parent"}
    fork0, fresh0 = by[("fork-child", 0)], by[("fresh-child", 0)]
    # both children start right after the spawning call and overlap in time
    spawn_done = by[("parent", 1)].t_done
    assert fork0.t_sent >= spawn_done and fresh0.t_sent >= spawn_done
    assert max(fork0.t_sent, fresh0.t_sent) < min(fork0.t_done, fresh0.t_done)
    # join: the parent's next call waits for every subagent call
    last_child = max(r.t_done for r in run.requests if r.parent)
    assert by[("parent", 2)].t_sent >= last_child
    # the forked child inherits the parent's context: the host serves it from cache; the fresh one starts cold
    parent_ctx = by[("parent", 1)].prompt_tokens_est - 3 + 4 + 2  # request minus priming, plus output message
    assert fork0.prompt_tokens == fork0.prompt_tokens_est == truth[fork0.id]["prompt_tokens"]
    assert fork0.reusable_prefix_tokens >= parent_ctx - 4
    # the host caches what it prefilled: the spawning request's prompt, in whole 16-token blocks
    spawning = by[("parent", 1)]
    assert truth[fork0.id]["cached_tokens"] >= (spawning.prompt_tokens - 1) // 16 * 16 > 0
    # the fresh one starts cold but for one 16-token block: the chat template's start and the run's tag, which every
    # system prompt of the run begins with (the run's sessions share it, as real agents' do)
    assert fresh0.reusable_prefix_tokens == 0 and truth[fresh0.id]["cached_tokens"] <= 16
    task = run.tasks[0]
    assert (task.complete, task.subagents, task.subagent_calls) == (True, 2, 5)
    assert task.subagent_model_time_s > 0
    assert result.summary["tasks"]["count"] == 1  # subagent trajectories are not tasks of their own


def test_spawn_errors_name_the_turn(tmp_path: Path) -> None:
    turns = simple_turns(2)
    turns[0]["spawn"] = [{"trajectory": "missing"}]
    path = write_trajectory(tmp_path / "a.jsonl", "a", turns)
    with pytest.raises(TrajectoryError, match=r"a.jsonl:2: field 'spawn\[0\].trajectory': no trajectory 'missing'"):
        load_workload([path])
    turns[0]["spawn"] = [{"trajectory": "b"}]
    path = write_trajectory(tmp_path / "b.jsonl", "a", turns)
    write_trajectory(path, "b", simple_turns(1))
    with pytest.raises(TrajectoryError, match='must have "subagent": true'):
        load_workload([path])
    loop = simple_turns(1)
    loop[0]["spawn"] = [{"trajectory": "c"}]
    path = write_trajectory(tmp_path / "c.jsonl", "top", [dict(loop[0])])
    write_trajectory(path, "c", loop, subagent=True)
    with pytest.raises(TrajectoryError, match="subagent cycle: top -> c -> c"):
        load_workload([path])


def test_imported_weka_trace_replays_its_subagents_concurrently(tmp_path: Path) -> None:
    """The real Weka trace with subagents, imported and replayed: four subagents at once, each its own cache."""
    from replay.workload.importers import import_paths, write_canonical
    from tests.support.paths import SHARED

    source = SHARED / "trajectories" / "real" / "weka" / "sample_trace_with_subagent.json"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    canonical = tmp_path / "weka.jsonl"
    with open(canonical, "wb") as out:
        write_canonical(import_paths([str(source)], "weka").trajectories, out)
    spec = RunSpec(
        trajectories=[str(canonical)], out=str(tmp_path / "run.jsonl"), sim_profile="instant", progress=False,
        sim_truth_log=str(tmp_path / "truth.jsonl"),
        load=LoadConfig(concurrency=1, tool_time=ToolTimePolicy.parse("none")),
    )  # fmt: skip
    run = read_run(execute(spec).path)
    truth = {t["request_id"]: t for t in map(orjson.loads, (tmp_path / "truth.jsonl").read_bytes().splitlines())}
    assert all(r.error is None for r in run.requests)
    subs: dict[str, list] = {}
    for r in run.requests:
        if r.parent:
            subs.setdefault(r.trajectory, []).append(r)
    assert len(subs) == 4
    spans = {k: (min(r.t_sent for r in v), max(r.t_done for r in v)) for k, v in subs.items()}
    latest_start = max(s for s, _ in spans.values())
    assert latest_start < min(e for _, e in spans.values())  # all four were running at the same moment
    parent_after = [r for r in run.requests if not r.parent and r.t_sent > latest_start]
    assert parent_after and min(r.t_sent for r in parent_after) >= max(e for _, e in spans.values())  # joined
    for calls in subs.values():
        calls.sort(key=lambda r: r.turn)
        first, rest = calls[0], calls[1:]
        # each subagent's own history is served from the cache after its first call
        assert sum(truth[r.id]["cached_tokens"] for r in rest) >= 0.8 * sum(r.prompt_tokens for r in rest)
        assert truth[first.id]["cached_tokens"] < first.prompt_tokens
    assert run.tasks[0].subagents == 4 and run.tasks[0].subagent_calls == sum(len(v) for v in subs.values())
