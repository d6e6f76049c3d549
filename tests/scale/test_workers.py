"""``--workers N``: a run sharded over worker processes is the same run as in one process (the same tasks, calls,
tokens and summary), its run file holds every call once and reports, bad combinations are refused, and no worker
outlives an interrupted or killed run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.loops.closed_loop import LoadConfig
from replay.metrics.streaming import StreamSummary
from replay.metrics.summary import Window, _client
from replay.records.reader import read_run
from replay.reports.text_report import to_text
from replay.runner.single_run import RunError, RunSpec, check_spec, execute
from replay.scale.workers import shard_lanes
from replay.sessions.tool_time import ToolTimePolicy
from tests.support.trajectories import simple_turns, write_trajectory


def _workload(path: Path, n: int = 8, turns: int = 4) -> Path:
    for i in range(n):
        write_trajectory(path, f"w{i}", simple_turns(turns, output_tokens=16 + i, tool_time_s=0.01))
    return path


def _keys(value: Any, prefix: str = "") -> set[str]:
    """Every key path of a summary (lists' items aside): its definition, whatever its figures."""
    if not isinstance(value, dict):
        return set()
    out = set()
    for key, inner in value.items():
        out |= {f"{prefix}/{key}"} | _keys(inner, f"{prefix}/{key}")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Any]:
    """The same 8 tasks at concurrency 4 in one process and over 2 (the instant simulated host, no salt: every
    prompt the same bytes in both runs)."""
    tmp = tmp_path_factory.mktemp("workers")
    work = _workload(tmp / "w.jsonl")
    out = {}
    for workers in (1, 2):
        spec = RunSpec(trajectories=[str(work)], load=LoadConfig(concurrency=4, salt_tasks=False,
                       tool_time=ToolTimePolicy.parse("recorded")), out=str(tmp / f"run{workers}.jsonl"),
                       sim_profile="instant", progress=False, workers=workers)  # fmt: skip
        out[workers] = execute(spec)
    return out


def test_two_workers_make_the_same_run_as_one(runs: dict[int, Any]) -> None:
    one, two = runs[1].summary, runs[2].summary
    assert one["totals"] == two["totals"]  # calls, successes, prompt, cached and output tokens
    assert one["totals"]["requests"] == 8 * 4 and one["totals"]["ok"] == 8 * 4
    assert one["tasks"]["count"] == two["tasks"]["count"] == 8
    assert one["tasks"]["complete"] == two["tasks"]["complete"] == 8
    assert _keys(one) == _keys(two)  # the same summary definition
    assert one["window"]["whole_run"] and two["window"]["whole_run"]  # a run of N tasks is measured whole
    assert runs[1].exit_code == runs[2].exit_code == 0
    assert runs[2].header["load"]["workers"] == 2 and "workers" not in runs[1].header["load"]
    shards = runs[2].footer["workers"]
    assert [w["lanes"] for w in shards] == [2, 2] and sum(w["requests"] for w in shards) == 32


def test_the_two_worker_run_file_holds_every_call_once_and_reports(runs: dict[int, Any]) -> None:
    path = runs[2].path
    data = read_run(path)
    assert data.skipped_lines == 0 and data.footer is not None
    ids = [r.id for r in data.requests]
    assert len(ids) == len(set(ids)) == data.footer["requests"] == 32
    assert sorted(t.task for t in data.tasks) == list(range(8))  # the seeded order's task numbers, each once
    assert sorted({r.session for r in data.requests}) == [0, 1, 2, 3]  # lanes 0..3 over the two workers
    one = read_run(runs[1].path)
    turns = lambda run: sorted((r.trajectory, r.turn) for r in run.requests)  # noqa: E731
    assert turns(data) == turns(one)
    result = CliRunner().invoke(main, ["report", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["totals"] == runs[2].summary["totals"]


def test_lanes_are_dealt_round_robin() -> None:
    assert shard_lanes(5, 2) == [(0, 2, 4), (1, 3)]
    assert shard_lanes(2, 4) == [(0,), (1,)]  # never more workers than lanes
    assert shard_lanes(1, 1) == [(0,)]


@pytest.mark.parametrize(
    "args, words",
    [
        (["--workers", "0"], "--workers"),
        (["--workers", "2", "--max-rpm", "60"], "--workers 2: --max-rpm"),
        (["--workers", "2", "--start-at", "0.5"], "--workers 2: --start-at"),
    ],
)
def test_bad_worker_options_are_refused_naming_the_option(tmp_path: Path, args: list[str], words: str) -> None:
    work = _workload(tmp_path / "w.jsonl", n=1, turns=1)
    result = CliRunner().invoke(main, ["run", str(work), "--out", str(tmp_path / "r.jsonl"), "-q", *args])
    assert result.exit_code == 1, result.output
    assert words in result.output
    assert not (tmp_path / "r.jsonl").exists()


def test_a_resumed_or_open_loop_run_is_one_process() -> None:
    with pytest.raises(RunError, match=r"--workers 2: --resume"):
        check_spec(RunSpec(workers=2, resume=True))
    with pytest.raises(RunError, match=r"--workers: expected 1 or more, not 0"):
        check_spec(RunSpec(workers=0))


def test_saturation_is_judged_per_worker() -> None:
    quiet = {"wall_s": 5.0, "cpu_s": 1.0, "lag_p99_ms": 2.0}
    busy = {"wall_s": 5.0, "cpu_s": 4.9, "lag_p99_ms": 80.0}
    samples = [{"t": 1.0, "worker": 0, **quiet}, {"t": 1.0, "worker": 1, **busy}]
    acc = StreamSummary().acc
    cl = _client(samples, Window(0.0, 10.0, True), acc).to_dict()
    assert cl["saturated"] and cl["cpu_share"] == pytest.approx(0.98) and cl["loop_lag_p99_ms"] == 80.0
    assert [(w["worker"], w["saturated"]) for w in cl["workers"]] == [(0, False), (1, True)]
    single = _client([{"t": 1.0, **quiet}], Window(0.0, 10.0, True), acc).to_dict()
    assert "workers" not in single and not single["saturated"] and single["cpu_share"] == pytest.approx(0.2)


def test_the_report_names_the_saturated_worker(runs: dict[int, Any]) -> None:
    summary = dict(runs[2].summary)
    workers = [
        {"worker": 0, "cpu_share": 0.2, "loop_lag_p99_ms": 2.0, "saturated": False},
        {"worker": 1, "cpu_share": 0.98, "loop_lag_p99_ms": 80.0, "saturated": True},
    ]
    summary["client"] = {**summary["client"], "saturated": True, "cpu_share": 0.98, "loop_lag_p99_ms": 80.0,
                         "workers": workers}  # fmt: skip
    text = to_text(summary, runs[2].header)
    assert "the client was the bottleneck (worker 1 of 2: its CPU was 98" in text


def _children(pid: int) -> set[int]:
    """The live processes whose parent is ``pid`` (Linux /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.add(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    try:
        return "State:\tZ" not in status.read_text()
    except OSError:
        return False


def _start(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, set[int]]:
    """A 2-worker run on its way (8 calls written), and its child processes (the workers and the sim)."""
    work = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(30, output_tokens=40, tool_time_s=0.05))
    out = tmp_path / "run.jsonl"
    cmd = [sys.executable, "-m", "replay", "run", str(work), "-c", "4", "--workers", "2", "--duration", "60",
           "--out", str(out), "-q"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 90
    while (out.read_bytes().count(b'"type":"request"') if out.exists() else 0) < 8:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()  # type: ignore
        time.sleep(0.05)  # polling a condition on disk, not standing in for synchronisation
    kids = _children(proc.pid)
    assert len(kids) == 3, kids  # two workers and the simulated host
    return proc, out, kids


def _gone(pids: set[int], within_s: float = 30.0) -> bool:
    deadline = time.monotonic() + within_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the processes' state, not standing in for synchronisation
    return not any(_alive(p) for p in pids)


def test_sigint_stops_every_worker_and_writes_the_footer(tmp_path: Path) -> None:
    proc, out, kids = _start(tmp_path)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert _gone(kids)
    run = read_run(out)
    assert run.skipped_lines == 0 and run.footer is not None
    assert run.footer["stop_reason"] == "interrupted (SIGINT)" and run.footer["signal"] == "SIGINT"
    assert [w["stop_reason"] for w in run.footer["workers"]] == ["interrupted (SIGINT)"] * 2
    ids = [r.id for r in run.requests]
    assert len(ids) == len(set(ids)) == run.footer["requests"] >= 8
    assert {r.error for r in run.requests} <= {None, "cancelled"}
    assert [p for p in ("start", "stop", "end") if p in run.phases] == ["start", "stop", "end"]


def test_kill_9_of_the_parent_takes_every_worker_with_it(tmp_path: Path) -> None:
    proc, out, kids = _start(tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    assert _gone(kids), [p for p in kids if _alive(p)]
    assert orjson.loads(out.read_bytes().splitlines()[0])["load"]["workers"] == 2
    run = read_run(out, notes=lambda _: None)  # a line torn by the kill at most; no footer
    ids = [r.id for r in run.requests]
    assert run.footer is None and len(ids) == len(set(ids)) >= 8
    result = CliRunner().invoke(main, ["report", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["totals"]["requests"] == len(ids)


def test_a_timed_two_worker_run_has_the_single_process_window(tmp_path: Path) -> None:
    work = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(30, output_tokens=20, tool_time_s=0.02))
    load = LoadConfig(concurrency=4, duration_s=1.5)
    spec = RunSpec(trajectories=[str(work)], load=load, out=str(tmp_path / "r.jsonl"), sim_profile="fast",
                   progress=False, workers=2, window_s=0.5)  # fmt: skip
    result = execute(spec)
    run = read_run(result.path)
    p = run.phases
    assert p["start"] <= p["steady_start"] < p["stop"] <= p["end"]
    assert p["stop"] - p["start"] >= 1.5 - 2e-6  # the parent's clock times the duration: late when busy, never early
    first_back = {}
    for r in sorted(run.requests, key=lambda r: r.t_done or 0.0):
        first_back.setdefault(r.session, r.t_done)
    assert p["steady_start"] >= max(first_back.values())  # opened once every lane's first call was back
    assert result.footer["stop_reason"] == "duration" and result.summary["window"]["steady"]
    assert result.summary["totals"]["requests"] == len(run.requests) == result.footer["requests"]
    assert len(result.summary["windows"]) >= 3  # the windows are closed by the parent, from every worker's records


def test_a_workers_abort_stops_every_worker(tmp_path: Path) -> None:
    work = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(30, output_tokens=20, tool_time_s=0.01))
    out = tmp_path / "r.jsonl"
    args = ["run", str(work), "-c", "4", "--workers", "2", "--host", "sim:fast", "--sim-faults", "500:0.1",
            "--sim-fault-seed", "1", "--retries", "0", "--on-error", "abort", "--out", str(out), "-q"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 3, result.output
    footer = read_run(out).footer
    assert footer is not None and footer["stop_reason"].startswith("aborted: turn ")
    assert all(w["stop_reason"].startswith("aborted: turn ") for w in footer["workers"])


def test_a_worker_killed_stops_the_run_with_a_clear_error(tmp_path: Path) -> None:
    """The run started and could not complete: exit 3 (issue 25), the footer and the verdict name the worker."""
    proc, out, kids = _start(tmp_path)
    workers = [p for p in kids if b"replay.scale.worker_proc" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(workers) == 2
    os.kill(workers[1], signal.SIGKILL)
    stdout, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err.decode()
    said = re.search(rb"worker ([01]) exited \(code -9\) before the end of its run", stdout)  # (which index a pid
    assert said is not None, stdout  # is, the order the processes started in says nothing of)
    assert _gone(kids)
    run = read_run(out, notes=lambda _: None)
    assert run.footer is not None
    assert run.footer["stop_reason"].startswith(f"aborted: worker {said.group(1).decode()} exited (code -9)")
    assert run.footer["requests"] == len(run.requests)  # every record the parent got is written
    report = CliRunner().invoke(main, ["report", str(out), "--json"])
    assert report.exit_code == 0 and orjson.loads(report.stdout)["verdict"]["exit_code"] == 3


def test_more_sessions_than_trajectories_every_worker_and_every_lane_makes_calls(tmp_path: Path) -> None:
    """Issue 30: with 256 trajectories, ``-c 600 --workers 2`` ran one worker with no task and ``-c 1024`` none at all
    (a full socket buffer read as the parent gone), and the run passed. 48 lanes over 8 trajectories, 2 workers."""
    work = _workload(tmp_path / "w.jsonl", n=8, turns=2)
    out = tmp_path / "r.jsonl"
    args = ["run", str(work), "-c", "48", "--workers", "2", "--duration", "1.5", "--host", "sim:instant",
            "--out", str(out), "-q", "--json"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    run = read_run(out)
    assert run.footer is not None and run.footer["stop_reason"] == "duration"
    shards = run.footer["workers"]
    assert [w["lanes"] for w in shards] == [24, 24] and all(w["stop_reason"] == "duration" for w in shards)
    assert all(w["requests"] > 0 for w in shards)
    assert {r.session for r in run.requests} == set(range(48))  # every lane asked for made calls
    for w in shards:  # lane k runs in worker k mod 2: each worker's count is its lanes' calls in the file
        assert w["requests"] == sum(1 for r in run.requests if r.session % 2 == w["worker"])
    assert orjson.loads(result.stdout)["requests"] == len(run.requests) == run.footer["requests"]


NO_CALL_FOOTERS = [
    {"stop_reason": "completed"},  # one process, a pass over the workload
    {"stop_reason": "duration"},
    {"stop_reason": "tasks", "workers": [{"worker": 0, "requests": 0}, {"worker": 1, "requests": 0}]},  # --workers
    {"stop_reason": "completed", "window": "whole"},
]


@pytest.mark.parametrize("footer", NO_CALL_FOOTERS)
def test_a_run_that_sent_no_call_never_passes(footer: dict[str, Any]) -> None:
    from replay.verdict.judge import judge

    summary = judge({"requests": 0, "error_rate": None}, {"thresholds": []}, footer)
    assert summary["verdict"]["exit_code"] == 3 and not summary["verdict"]["passed"]
    reason = f"the run sent no call (stop: {footer['stop_reason']}): nothing was measured"
    assert summary["verdict"]["reasons"] == [reason]
    with_thresholds = judge({"requests": 0, "error_rate": None, "ttft_p95": None}, {"thresholds": ["error_rate<1%"]},
                            footer)  # fmt: skip
    assert with_thresholds["verdict"]["exit_code"] == 3
