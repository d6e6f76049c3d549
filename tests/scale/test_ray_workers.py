"""``--ray``: on a local Ray cluster on 127.0.0.1 (skipped without Ray: it is the ``ray`` extra, not ``test``), a run
over 2 actors is the same run as over 2 local worker processes (calls, tokens, tasks, the summary's definition),
the actors' clocks, skewed on purpose, are brought to the parent's within their bound, the API key reaches no log
of Ray's, and no actor outlives the run, killed or not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from replay.records.reader import read_run
from replay.scale.clock_sync import REQUEST_TIMES
from replay.scale.remote_worker import SKEW_ENV
from tests.support.trajectories import simple_turns, write_trajectory

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]
SKEW_S = 1000.0  # actor k's clock runs (k + 1) x this ahead
KEY = "sk-ray-test-secret-0123456789"
# No token file written to $HOME; the cluster on the loopback address only (Ray otherwise swaps 127.0.0.1 for the
# machine's address: replay's runs set it for themselves, for a --ray address on 127.0.0.1).
RAY_ENV = {"RAY_AUTH_MODE": "disabled"}
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
CLUSTER = """
import logging, sys, ray
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
print(ray.get_runtime_context().gcs_address, ray._private.worker._global_node.get_session_dir_path(), flush=True)
sys.stdin.read()
ray.shutdown()
"""


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": path, **extra}
    env.pop(next(iter(LOOPBACK)), None)  # the runs set it themselves
    return env


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, Any]]:
    """A 2-CPU Ray cluster on 127.0.0.1, held by a process of its own (stopped by closing its stdin), its actors'
    clocks skewed."""
    proc = subprocess.Popen([sys.executable, "-c", CLUSTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=_env(**{SKEW_ENV: str(SKEW_S)}) | LOOPBACK)  # fmt: skip
    try:
        assert proc.stdout is not None
        address, session = proc.stdout.readline().decode().split()
        yield {"address": address, "session": Path(session), "pid": proc.pid}
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _run(tmp: Path, name: str, *args: str) -> dict[str, Any]:
    work = tmp / "w.jsonl"
    if not work.exists():
        for i in range(8):
            write_trajectory(work, f"w{i}", simple_turns(4, output_tokens=16 + i, tool_time_s=0.01))
    out = tmp / f"{name}.jsonl"
    cmd = [sys.executable, "-m", "replay", "run", str(work), "-c", "4", "--workers", "2", "--sim-profile", "fast",
           "--no-salt-tasks", "--api-key-env", "REPLAY_RAY_TEST_KEY", "--out", str(out), "-q", "--json",
           *args]  # fmt: skip
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, env=_env(REPLAY_RAY_TEST_KEY=KEY), timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return {"summary": orjson.loads(done.stdout), "run": read_run(out), "path": out, "wall_s": time.monotonic() - t0,
            "stderr": done.stderr}  # fmt: skip


@pytest.fixture(scope="module")
def runs(cluster: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("ray")
    return {"ray": _run(tmp, "ray", "--ray", cluster["address"]), "local": _run(tmp, "local")}


def _keys(value: Any, prefix: str = "") -> set[str]:
    if not isinstance(value, dict):
        return set()
    return set().union(*({f"{prefix}/{k}"} | _keys(v, f"{prefix}/{k}") for k, v in value.items()))


def test_two_actors_make_the_same_run_as_two_local_workers(runs: dict[str, Any]) -> None:
    ray, local = runs["ray"]["summary"], runs["local"]["summary"]
    # The host's cache hits hang on how the sessions interleave (no salt: sessions share prompts), as between any
    # two runs; every other count is the workload's.
    uncached = lambda s: {k: v for k, v in s["totals"].items() if k != "cached_tokens"}  # noqa: E731
    assert uncached(ray) == uncached(local) and ray["totals"]["requests"] == ray["totals"]["ok"] == 32
    assert ray["tasks"]["count"] == local["tasks"]["count"] == 8
    assert ray["tasks"]["complete"] == local["tasks"]["complete"] == 8
    assert _keys(ray) == _keys(local)
    calls = lambda run: sorted((r.trajectory, r.turn, r.output_tokens, r.prompt_tokens) for r in run.requests)  # noqa: E731
    assert calls(runs["ray"]["run"]) == calls(runs["local"]["run"])
    footer, header = runs["ray"]["run"].footer, runs["ray"]["run"].header
    assert footer is not None and footer["ray"]["cpus"] == 2 and header["load"]["ray"]
    assert [(w["worker"], w["lanes"], w["requests"]) for w in footer["workers"]] == [(0, 2, 16), (1, 2, 16)]
    for name in ("ray", "local"):  # the figures of docs/scale-out.md (pytest -s)
        s = runs[name]["summary"]
        print(f"{name}: {runs[name]['wall_s']:.1f} s, {s['totals']['requests']} calls, output "
              f"{s['throughput']['output_tps']:.0f} tok/s, TTFT p50 {s['ttft_s']['p50'] * 1e3:.2f} ms, token times vs "
              f"the host's truth p50 {s['truth']['token_dev_s']['p50'] * 1e3:.3f} ms")  # fmt: skip


def test_the_actors_clocks_are_the_parent_s_within_their_bound(runs: dict[str, Any]) -> None:
    run = runs["ray"]["run"]
    for w in run.footer["workers"]:
        truth = -SKEW_S * (w["worker"] + 1)  # one machine: the skew is the whole offset
        assert abs(w["clock_offset_s"] - truth) <= w["clock_error_s"] + 1e-6, w
        assert 0 < w["clock_error_s"] < 0.05, w
    start, end = run.phases["start"], run.phases["end"]
    for rec in run.requests:
        assert all(start - 0.05 <= getattr(rec, n) <= end + 0.05 for n in REQUEST_TIMES if getattr(rec, n) is not None)
    # Every token's arrival, in the parent's clock, against when the simulated host (this machine's clock) wrote it.
    truth = runs["ray"]["summary"]["truth"]
    assert truth["aligned"] == 32 and abs(truth["token_dev_s"]["p50"]) < 0.02, truth["token_dev_s"]


def test_the_key_is_in_no_file_and_no_log_of_ray_s(runs: dict[str, Any], cluster: dict[str, Any]) -> None:
    assert KEY.encode() not in runs["ray"]["path"].read_bytes() and KEY.encode() not in runs["ray"]["stderr"]
    logs = [p for p in cluster["session"].rglob("*") if p.is_file()]
    assert logs and not [p for p in logs if KEY.encode() in p.read_bytes()]


def _actors(cluster_pid: int) -> list[int]:
    """The live processes under the cluster's that run our actor (Ray names them ray::RemoteWorker...)."""
    parents, names = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                parents[int(stat.parent.name)] = int(fields[1])
                names[int(stat.parent.name)] = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue

    def under(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == cluster_pid:
                return True
        return False

    return [pid for pid, name in names.items() if name.startswith(b"ray::RemoteWorker") and under(pid)]


def _none_left(cluster_pid: int, within_s: float = 30.0) -> bool:
    deadline = time.monotonic() + within_s
    while _actors(cluster_pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # polling the processes' state, not standing in for synchronisation
    return not _actors(cluster_pid)


def test_no_actor_outlives_the_run(runs: dict[str, Any], cluster: dict[str, Any]) -> None:
    assert _none_left(cluster["pid"])


def _start(cluster: dict[str, Any], tmp_path: Path, duration: str = "60") -> tuple[subprocess.Popen[bytes], Path]:
    """A run on the cluster's 2 actors (no --workers: one per CPU) on its way, 8 calls written."""
    work = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(30, output_tokens=40, tool_time_s=0.05))
    out = tmp_path / "run.jsonl"
    cmd = [sys.executable, "-m", "replay", "run", str(work), "-c", "4", "--ray", cluster["address"], "--duration",
           duration, "--out", str(out), "-q"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    deadline = time.monotonic() + 90
    while (out.read_bytes().count(b'"type":"request"') if out.exists() else 0) < 8:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()  # type: ignore
        time.sleep(0.05)  # polling a condition on disk, not standing in for synchronisation
    assert len(_actors(cluster["pid"])) == 2
    return proc, out


def test_an_actor_killed_is_reported_and_the_other_goes_on(cluster: dict[str, Any], tmp_path: Path) -> None:
    """A worker lost on a cluster (its actor killed, its node gone) is no crash of the run: the others go on to the
    end, and the run says which and how many calls it had in flight, and fails (test_ray_fleet.py: a whole node)."""
    proc, out = _start(cluster, tmp_path, duration="6")
    os.kill(_actors(cluster["pid"])[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err.decode()[-3000:]
    run = read_run(out)
    assert run.footer is not None and run.footer["stop_reason"] == "duration"
    [node] = run.footer["nodes"]  # one node, with both workers
    assert node["workers"] == 2 and node["lost_workers"] == 1 and not node["lost"]
    assert [w.get("lost", False) for w in run.footer["workers"]].count(True) == 1
    report = subprocess.run([sys.executable, "-m", "replay", "report", str(out), "--json"], capture_output=True,
                            env=_env(), timeout=120)  # fmt: skip
    reason, *rest = orjson.loads(report.stdout)["verdict"]["reasons"]
    assert reason.startswith(f"the run lost node {node['node']} (1 of its 2 workers), ")
    # the lost worker's lanes were idle for the rest of the run: the delivered concurrency says so too, nothing else
    assert all(r.startswith("the client delivered less than the load asked: ") for r in rest)
    assert _none_left(cluster["pid"])


def test_sigint_stops_every_actor_and_writes_the_footer(cluster: dict[str, Any], tmp_path: Path) -> None:
    proc, out = _start(cluster, tmp_path)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()[-3000:]
    run = read_run(out)
    assert run.footer is not None and run.footer["stop_reason"] == "interrupted (SIGINT)"
    assert [w["stop_reason"] for w in run.footer["workers"]] == ["interrupted (SIGINT)"] * 2
    assert _none_left(cluster["pid"])


def test_kill_9_of_the_parent_takes_every_actor_with_it(cluster: dict[str, Any], tmp_path: Path) -> None:
    proc, _ = _start(cluster, tmp_path)
    proc.kill()  # Ray ends a dead driver's actors; each also finds its connection closed and cuts its calls
    proc.communicate(timeout=30)
    assert _none_left(cluster["pid"])


def test_more_workers_than_the_cluster_has_cpus_is_refused(cluster: dict[str, Any], tmp_path: Path) -> None:
    work = tmp_path / "w.jsonl"
    for i in range(4):  # 4 sessions: room for 3 workers
        write_trajectory(work, f"w{i}", simple_turns(1))
    cmd = [sys.executable, "-m", "replay", "run", str(work), "-c", "4", "--ray", cluster["address"], "--workers", "3",
           "--out", str(tmp_path / "r.jsonl"), "-q"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, env=_env(), timeout=120)
    assert done.returncode == 1 and b"--workers 3: the Ray cluster has 2 CPUs" in done.stderr, done.stderr
    assert _none_left(cluster["pid"])
