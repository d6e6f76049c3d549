"""Workers over TCP (the path of ``--ray``'s actors, here as local processes, so it is tested without Ray): only the
run's key gets in, a worker's clock is brought to the parent's within the bound even when it is skewed on purpose,
every timestamp of every record is moved, and the API key reaches the worker over the channel and nowhere else."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
from multiprocessing.connection import AuthenticationError, Client
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import replay
from replay import event_loop
from replay.cli import main
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.loops.closed_loop import LoadConfig
from replay.records.reader import read_run
from replay.records.run_file import RequestRecord, RunWriter, TaskRecord
from replay.runner.embedded_host import embedded_host
from replay.runner.single_run import SIM_MODEL
from replay.scale.clock_sync import REQUEST_TIMES, TASK_TIMES, best_offset, shift_message
from replay.scale.remote_worker import SKEW_ENV
from replay.scale.worker_link import WorkerListener, tcp_processes
from replay.scale.workers import ShardedRun, WorkerError, run_workers
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.trajectory import load_workload
from tests.support.trajectories import simple_turns, write_trajectory

SKEW_S = 1000.0  # worker k's clock runs (k + 1) x this ahead


def test_the_offset_is_the_shortest_round_trip_s_midpoint() -> None:
    # (parent sent, worker read, parent received): the second exchange has the shortest round trip
    clock = best_offset([(10.0, 5.0, 10.4), (11.0, 6.05, 11.1), (12.0, 7.0, 12.3)])
    assert clock.offset_s == pytest.approx(11.05 - 6.05) and clock.error_s == pytest.approx(0.05)


def test_every_absolute_stamp_is_moved_and_the_relative_ones_are_not() -> None:
    assert set(REQUEST_TIMES) == {"t_sent", "t_headers", "t_first_token", "t_first_answer", "t_last_token", "t_done",
                                  "t_call", "t_intended"}  # fmt: skip
    assert set(TASK_TIMES) == {"t_start", "t_end", "t_root_end", "t_intended"}
    rec = RequestRecord("r", 0, 0, "t", 0, **{name: 1.0 for name in REQUEST_TIMES}, chunks=[0.1, 1.0])
    (_, moved) = shift_message(("request", rec), 5.0)
    assert all(getattr(moved, name) == 6.0 for name in REQUEST_TIMES) and moved.chunks == [0.1, 1.0]
    task = TaskRecord(0, 0, "t", 1.0, 2.0, 1, 1, 0.5, 0.5, True, t_root_end=None)
    (_, task) = shift_message(("task", task), 5.0)
    assert (task.t_start, task.t_end, task.t_root_end, task.t_intended) == (6.0, 7.0, None, None)
    assert shift_message(("client", {"t": 1.0, "cpu_s": 2.0}), 5.0)[1] == {"t": 6.0, "cpu_s": 2.0}
    live = shift_message(("live", {"in_flight": 1, "pauses": {3: 2.0}, "paused_at": {3: 1.0}, "left": {3: (1, 2.0)}}),
                         5.0)[1]  # fmt: skip
    assert live == {"in_flight": 1, "pauses": {3: 7.0}, "paused_at": {3: 6.0}, "left": {3: (1, 2.0)}}


def test_a_connection_without_the_run_s_key_is_dropped() -> None:
    listener, tried, outcome = WorkerListener("127.0.0.1"), threading.Event(), []

    def check() -> None:
        if tried.is_set():
            raise WorkerError("the stranger was not taken for a worker")

    def accept() -> None:
        try:
            outcome.append(listener.accept(1, {}, check))
        except WorkerError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        with pytest.raises((AuthenticationError, EOFError, ConnectionError)):
            Client((listener.host, listener.port), family="AF_INET", authkey=b"not the key")
    finally:
        tried.set()
        thread.join(timeout=10)
        listener.close()
    assert len(outcome) == 1 and isinstance(outcome[0], WorkerError)


@pytest.fixture(scope="module")
def skewed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """8 tasks at concurrency 4 over 2 TCP workers whose clocks run 1000 s and 2000 s ahead."""
    tmp = tmp_path_factory.mktemp("link")
    work = tmp / "w.jsonl"
    for i in range(8):
        write_trajectory(work, f"w{i}", simple_turns(4, output_tokens=16 + i, tool_time_s=0.01))
    out = tmp / "run.jsonl"
    saved = {name: os.environ.get(name) for name in (SKEW_ENV, "REPLAY_LINK_TEST_KEY")}
    os.environ[SKEW_ENV], os.environ["REPLAY_LINK_TEST_KEY"] = str(SKEW_S), "sk-link-test-secret"
    try:
        with embedded_host("instant") as sim:
            host = HostConfig(sim.base_url, SIM_MODEL, api_key_env="REPLAY_LINK_TEST_KEY")
            load = LoadConfig(concurrency=4, salt_tasks=False, tool_time=ToolTimePolicy.parse("recorded"))
            plan = ShardedRun(load_workload([work]), host, RequestOptions(SIM_MODEL), load, 2, tcp_processes())
            writer = RunWriter(out)
            writer.header({"test": "worker_link"})
            try:
                footer = event_loop.run(run_workers(plan, writer, progress=False))
                writer.footer(footer)
            finally:
                writer.close()
    finally:
        for name, value in saved.items():
            os.environ.pop(name) if value is None else os.environ.__setitem__(name, value)
    return {"run": read_run(out), "footer": footer, "path": out}


def test_a_skewed_worker_clock_is_corrected_within_its_bound(skewed: dict[str, Any]) -> None:
    workers = skewed["footer"]["workers"]
    assert [w["worker"] for w in workers] == [0, 1]
    for w in workers:
        truth = -SKEW_S * (w["worker"] + 1)  # one machine: the skew is the whole offset
        assert abs(w["clock_offset_s"] - truth) <= w["clock_error_s"] + 1e-6, w
        assert w["clock_error_s"] > 0 and w["node"]  # its size is the pings' round trip: a busy machine's to set


def test_every_record_is_in_the_parent_s_clock(skewed: dict[str, Any]) -> None:
    run = skewed["run"]
    start, end = run.phases["start"], run.phases["end"]
    assert len(run.requests) == 8 * 4 and all(r.ok for r in run.requests)
    for rec in run.requests:
        stamps = [getattr(rec, name) for name in REQUEST_TIMES if getattr(rec, name) is not None]
        assert stamps and all(start - 0.05 <= t <= end + 0.05 for t in stamps), rec
    for task in run.tasks:
        assert start - 0.05 <= task.t_start <= task.t_end <= end + 0.05
    assert all(start - 0.05 <= s["t"] <= end + 5.0 for s in run.client)
    assert sorted(t.task for t in run.tasks) == list(range(8))


def test_the_key_reached_the_workers_and_nothing_else(skewed: dict[str, Any]) -> None:
    text = Path(skewed["path"]).read_text()
    assert "sk-link-test-secret" not in text
    assert all(r.status == 200 for r in skewed["run"].requests)


def test_the_tcp_workers_make_the_same_calls_as_local_ones(skewed: dict[str, Any], tmp_path: Path) -> None:
    from replay.runner.single_run import RunSpec, execute

    work = tmp_path / "w.jsonl"
    for i in range(8):
        write_trajectory(work, f"w{i}", simple_turns(4, output_tokens=16 + i, tool_time_s=0.01))
    spec = RunSpec(trajectories=[str(work)], load=LoadConfig(concurrency=4, salt_tasks=False,
                   tool_time=ToolTimePolicy.parse("recorded")), out=str(tmp_path / "local.jsonl"),
                   sim_profile="instant", progress=False, workers=2)  # fmt: skip
    local = read_run(execute(spec).path)
    calls = lambda run: sorted((r.trajectory, r.turn, r.output_tokens, r.prompt_tokens) for r in run.requests)  # noqa: E731
    assert calls(local) == calls(skewed["run"])
    assert dataclasses.asdict(local.tasks[0]).keys() == dataclasses.asdict(skewed["run"].tasks[0]).keys()


def test_a_worker_is_handed_the_environment_after_its_clock() -> None:
    """The greeting as a worker sees it: the challenge, pings answered, then the key (and nothing before auth)."""
    listener, got = WorkerListener("127.0.0.1"), {}

    def worker() -> None:
        conn = Client((listener.host, listener.port), family="AF_INET", authkey=listener.authkey)
        conn.send(("hello", 0, "node-a", replay.__version__, os.getpid()))
        pings = 0
        while (message := conn.recv())[0] == "ping":
            pings += 1
            conn.send(("pong", 42.0))  # a clock far from the parent's
        got.update(pings=pings, env=message[1])
        conn.close()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        (link,) = listener.accept(1, {"REPLAY_KEY": "sk-handed"}, lambda: None)
    finally:
        thread.join(timeout=10)
        listener.close()
    assert got == {"pings": 16, "env": {"REPLAY_KEY": "sk-handed"}}
    assert link.node == "node-a" and 0 < link.clock.error_s < float("inf")
    link.conn.close()


@pytest.mark.parametrize(
    "args, words", [(["--max-rpm", "60"], "--ray: --max-rpm"), (["--start-at", "0.5"], "--ray: --start-at")]
)
def test_what_needs_one_process_is_refused_with_ray(tmp_path: Path, args: list[str], words: str) -> None:
    work = tmp_path / "w.jsonl"
    write_trajectory(work, "w", simple_turns(1))
    result = CliRunner().invoke(main, ["run", str(work), "--out", str(tmp_path / "r.jsonl"), "-q", "--ray",
                                       "127.0.0.1:1", *args])  # fmt: skip
    assert result.exit_code == 1, result.output
    assert words in result.output
    assert not (tmp_path / "r.jsonl").exists()


def test_ray_is_imported_only_when_a_run_asks_for_it() -> None:
    code = ("import sys, replay.cli, replay.runner.single_run, replay.scale.ray_workers, replay.scale.workers; "
            "print('ray' in sys.modules)")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(replay.__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert done.stdout.strip() == "False", done.stderr
