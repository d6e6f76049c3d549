"""``--ray`` across several nodes (issue 30), as a fleet on one machine: three Ray nodes, each on a loopback address of
its own (127.0.0.2, .3, .4), started and stopped here (``tests.support.ray_nodes``; skipped without Ray, the ``ray``
extra). One run spreads its workers over the three, each worker's clock skewed on purpose and brought back to the
parent's; one node is killed mid-run as a lost machine would be. The run goes on with the other two, keeps every
record the lost node's workers had sent, says which node went and how many calls it had in flight, checked against
the simulated host's own log, and fails (exit 3) rather than pass a run that lost part of its load."""

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
from replay.scale.remote_worker import SKEW_ENV
from tests.support.ray_nodes import alive, ray_nodes
from tests.support.trajectories import simple_turns, write_trajectory

pytest.importorskip("ray")
pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]
IPS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
SKEW_S = 1000.0  # worker k's clock runs (k + 1) x this ahead
LOST = IPS[2]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    logs = tmp_path_factory.mktemp("ray-nodes")
    with ray_nodes(IPS, logs, env={SKEW_ENV: str(SKEW_S)}) as (address, nodes):
        yield {"address": address, "nodes": nodes}
    left = [p for n in nodes for p in n.pids if alive(p)]
    assert not left, left  # every process of every node stopped


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": path}


def _actor_on(node: Any) -> bool:
    return any(b"ray::RemoteWorker" in Path(f"/proc/{p}/cmdline").read_bytes() for p in node.collect() if alive(p))


@pytest.fixture(scope="module")
def lost_run(fleet: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """6 sessions over 3 workers, one per node; node 3 killed once every worker has written calls."""
    tmp = tmp_path_factory.mktemp("fleet")
    work = tmp / "w.jsonl"
    for i in range(6):  # long answers, short pauses: a lane is mostly in a call
        write_trajectory(work, f"w{i}", simple_turns(40, output_tokens=400 + i, tool_time_s=0.01))
    out = tmp / "run.jsonl"
    cmd = [sys.executable, "-m", "replay", "run", str(work), "-c", "6", "--ray", fleet["address"], "--workers", "3",
           "--duration", "25", "--sim-profile", "fast", "--out", str(out), "-q", "--json"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    try:
        deadline = time.monotonic() + 240
        while True:
            lanes = {orjson.loads(line)["session"] for line in out.read_bytes().splitlines()[1:]
                     if b'"type":"request"' in line} if out.exists() else set()  # fmt: skip
            if {lane % 3 for lane in lanes} == {0, 1, 2}:
                break
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-3000:]  # type: ignore[union-attr]
            time.sleep(0.1)  # polling the run file, not standing in for synchronisation
        node = next(n for n in fleet["nodes"] if n.ip == LOST)
        assert _actor_on(node)  # spread: one worker on each node
        killed_at = time.perf_counter()
        node.kill(signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    truth = [orjson.loads(line) for line in out.with_suffix(".truth.jsonl").read_bytes().splitlines()]
    return {"code": proc.returncode, "stdout": stdout, "stderr": stderr, "run": read_run(out), "path": out,
            "killed_at": killed_at, "truth": truth}  # fmt: skip


def test_the_run_goes_on_without_the_lost_node_and_says_so(lost_run: dict[str, Any]) -> None:
    assert lost_run["code"] == 3, lost_run["stderr"].decode()[-3000:]
    run = lost_run["run"]
    footer = run.footer
    assert footer is not None and footer["stop_reason"] == "duration"  # not a crash: the others ran to the end
    nodes = {n["node"]: n for n in footer["nodes"]}
    assert set(nodes) == set(IPS) and all(n["workers"] == 1 for n in nodes.values())  # spread over the three
    assert nodes[LOST]["lost"] and nodes[LOST]["lost_workers"] == 1
    assert not any(nodes[ip]["lost"] or nodes[ip]["lost_workers"] for ip in IPS[:2])
    lost = next(w for w in footer["workers"] if w["node"] == LOST)
    assert lost["lost"] and lost["lost_in_flight"] == nodes[LOST]["lost_in_flight"]
    verdict = orjson.loads(lost_run["stdout"])["verdict"]
    assert verdict["exit_code"] == 3
    lost_node, *rest = verdict["reasons"]
    assert lost_node == f"the run lost node {LOST}, {nodes[LOST]['lost_in_flight']} calls in flight lost mid-run"
    # its lanes were gone for the rest of the run: the delivered concurrency says so too, and nothing else does
    assert all(r.startswith("the client delivered less than the load asked: ") for r in rest)
    after = [r for r in run.requests if r.t_sent > lost_run["killed_at"] + 1.0]
    assert {r.session % 3 for r in after} == {w["worker"] for w in footer["workers"] if not w.get("lost")}


def test_the_lost_node_s_finished_records_are_kept_and_summarised(lost_run: dict[str, Any]) -> None:
    run, footer = lost_run["run"], lost_run["run"].footer
    lost = next(w for w in footer["workers"] if w.get("lost"))
    mine = [r for r in run.requests if r.session % 3 == lost["worker"]]
    assert mine and len(mine) == lost["requests_written"] == {n["node"]: n for n in footer["nodes"]}[LOST]["records"]
    assert all(r.t_done is not None and r.t_done < lost_run["killed_at"] + 0.5 for r in mine)
    summary = orjson.loads(lost_run["stdout"])
    assert summary["requests"] == len(run.requests) == footer["requests"]  # the dead worker's records summarised
    report = subprocess.run([sys.executable, "-m", "replay", "report", str(lost_run["path"]), "--json"],
                            capture_output=True, env=_env(), timeout=120)  # fmt: skip
    rebuilt = orjson.loads(report.stdout)
    assert rebuilt == summary


def test_calls_lost_in_flight_match_the_host_s_own_log(lost_run: dict[str, Any]) -> None:
    """The host logged every call it received; those of the lost node's lanes that have no record are the calls lost
    in flight. The node's count is as of its last batch (at most 50 ms before it died): exact but for calls started
    or ended within that last batch, at most one per lane of it."""
    run, footer = lost_run["run"], lost_run["run"].footer
    lost = next(w for w in footer["workers"] if w.get("lost"))
    written = {r.id for r in run.requests}
    lanes = {r.session for r in run.requests if r.session % 3 == lost["worker"]}
    seen_lost = [t for t in lost_run["truth"] if t["request_id"] not in written]
    assert all(t["status"] in ("disconnected", "cancelled", "ok") for t in seen_lost)
    assert abs(len(seen_lost) - lost["lost_in_flight"]) <= len(lanes), (len(seen_lost), lost["lost_in_flight"])
    assert lost["lost_in_flight"] >= 1  # its 2 lanes were mostly in calls: one at least was going when the node went
    assert sum(t["status"] == "disconnected" for t in seen_lost) >= 1  # the host saw its client go mid-answer


def test_each_worker_s_clock_is_brought_to_the_parent_s(lost_run: dict[str, Any]) -> None:
    run = lost_run["run"]
    for w in run.footer["workers"]:
        skew = -SKEW_S * (w["worker"] + 1)
        assert abs(w["clock_offset_s"] - skew) <= w["clock_error_s"] + 1e-6, w
    start, end = run.phases["start"], run.phases["end"]
    assert all(start - 0.05 <= r.t_sent <= (r.t_done or r.t_sent) <= end + 0.05 for r in run.requests)
    truth = {t["request_id"]: t for t in lost_run["truth"]}
    devs = sorted(r.t_first_token - truth[r.id]["first_token"] for r in run.requests if r.t_first_token and r.id in
                  truth)  # fmt: skip
    assert devs and abs(devs[len(devs) // 2]) < 0.02  # first tokens in the parent's clock, against the host's
