"""The virtual clock against real time: the same run (profile, workload, load, seed) through ``execute`` against the
embedded simulated host over HTTP and through ``execute_virtual`` with the engine in this process. Counts, order and
every figure's presence must agree exactly; the figures themselves within generous bounds (real time adds the HTTP
path and the loop's lag on a busy machine: docs/benchmarks.md states the measured agreement)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.loops.load import LoadConfig
from replay.records.reader import read_run
from replay.runner.single_run import RunError, RunSpec, execute
from replay.runner.virtual_run import execute_virtual
from replay.sessions.tool_time import ToolTimePolicy
from tests.support.trajectories import simple_turns, write_trajectory

FIGURE_TOLERANCE = 0.25  # end-to-end, decode speed, throughput, task wall time: virtual within 25 % of real time
TTFT_TOLERANCE_S = 0.05  # real time's TTFT adds the HTTP path and the client's loop lag (tens of ms when busy)


def _workload(tmp_path: Path) -> Path:
    path = tmp_path / "w.jsonl"
    if path.exists():
        return path
    for i in range(6):
        write_trajectory(path, f"w{i}", simple_turns(5 + i, output_tokens=40 + 10 * i, tool_time_s=0.2, grow="abc "))
    return path


def _spec(tmp_path: Path, name: str, **kw) -> RunSpec:
    load = LoadConfig(concurrency=3, tasks=6, tool_time=ToolTimePolicy.parse("recorded"), salt_tasks=False)
    return RunSpec(trajectories=[str(_workload(tmp_path))], load=load, out=str(tmp_path / f"{name}.jsonl"),
                   progress=False, sim_profile="default", **kw)  # fmt: skip


def _keys(d: dict, prefix: str = "") -> set[str]:
    out = set()
    for k, v in d.items():
        out.add(prefix + k)
        if isinstance(v, dict):
            out |= _keys(v, prefix + k + ".")
    return out


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> tuple:
    real_dir, virtual_dir = tmp_path_factory.mktemp("real"), tmp_path_factory.mktemp("virtual")
    return execute(_spec(real_dir, "run")), execute_virtual(_spec(virtual_dir, "run"))


def test_the_same_tasks_calls_and_prompts_as_real_time(both) -> None:
    real, virtual = (read_run(r.path) for r in both)
    assert len(virtual.requests) == len(real.requests) == sum(5 + i for i in range(6))
    assert {t.task: t.trajectory for t in virtual.tasks} == {t.task: t.trajectory for t in real.tasks}  # same order
    calls = [{(r.task, r.turn): (r.prompt_tokens, r.output_tokens) for r in run.requests} for run in (real, virtual)]
    assert calls[0] == calls[1]  # every call, its prompt as the host counted it, its answer
    for run in (real, virtual):  # each task's calls one after the other, in its turns' order
        for t in run.tasks:
            assert [r.turn for r in run.requests if r.task == t.task] == list(range(t.turns_total))


def test_every_figure_exists_on_both_clocks_and_agrees(both) -> None:
    real, virtual = (r.summary for r in both)
    assert _keys(virtual) == _keys(real) - {k for k in _keys(real) if k.startswith("truth")}  # no truth log to read
    assert virtual["ttfat_s"]["n"] == virtual["ttft_s"]["n"] == real["ttft_s"]["n"]
    assert virtual["ttft_s"]["p50"] == pytest.approx(real["ttft_s"]["p50"], abs=TTFT_TOLERANCE_S)
    for figure in (("e2e_s", "p50"), ("user_decode_tps", "p50"), ("throughput", "total_tps"), ("tasks", "wall_s")):
        got, want = virtual[figure[0]][figure[1]], real[figure[0]][figure[1]]
        assert got == pytest.approx(want, rel=FIGURE_TOLERANCE), figure


def test_a_virtual_run_is_repeatable_and_reports_as_it_ran(tmp_path) -> None:
    first = execute_virtual(_spec(tmp_path, "a"))
    again = execute_virtual(_spec(tmp_path, "b"))
    one, two = first.summary.to_dict(), again.summary.to_dict()
    for s in (one, two):
        s["run"].pop("created")
    assert one == two  # no noise: the same figures, exactly
    assert first.header["clock"]["name"] == "virtual" and first.footer["engine"]["steps"] > 0
    out = CliRunner().invoke(main, ["report", str(first.path), "--json"])
    assert out.exit_code == 0, out.output
    rebuilt = orjson.loads(out.output)
    rebuilt["run"].pop("created", None)
    assert rebuilt == one  # the recorded timeline included: the virtual run sets it beside the recording too


def test_time_to_first_answer_token_on_the_virtual_clock(tmp_path) -> None:
    """The reasoning profile streams 30 % of each answer as reasoning first: the first answer token comes later."""
    spec = _spec(tmp_path, "r")
    spec.sim_profile = "reasoning"
    result = execute_virtual(spec)
    s = result.summary
    assert s["ttfat_s"]["n"] == s["ttft_s"]["n"] > 0
    assert s["ttfat_s"]["p50"] > s["ttft_s"]["p50"]
    runs = read_run(result.path).requests
    assert all(r.t_first_answer > r.t_first_token for r in runs if r.reasoning_tokens)
    assert sum(r.reasoning_tokens for r in runs) == sum(round(0.3 * r.output_tokens) for r in runs)


@pytest.mark.parametrize(
    ("field", "value", "option"),
    [("sim_faults", "429:0.1", "--sim-faults"), ("workers", 2, "--workers"), ("api", "anthropic", "--api"),
     ("prometheus", "127.0.0.1:9464", "--prometheus")],
)  # fmt: skip
def test_what_the_virtual_clock_has_not_got_is_refused_by_name(tmp_path, field, value, option) -> None:
    spec = _spec(tmp_path, "x")
    setattr(spec, field, value)
    with pytest.raises(RunError, match=option):
        execute_virtual(spec)


def test_a_virtual_sweep_refuses_a_fault_by_name(tmp_path) -> None:
    res = CliRunner().invoke(main, ["sweep", "--virtual", "-c", "1", "--sim-faults", "429:0.1", "--window", "2",
                                    "--warmup", "1", "-q", "--out", str(tmp_path)])  # fmt: skip
    assert res.exit_code != 0 and "--sim-faults" in res.output and "Traceback" not in res.output
