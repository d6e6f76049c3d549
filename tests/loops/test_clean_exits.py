"""Every way `replay run` can end leaves nothing behind: the embedded simulated host ends with its parent (kill -9
included), and SIGTERM or SIGHUP stop the run as Ctrl-C does, with a footer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from replay.records.reader import read_run
from tests.support.trajectories import simple_turns, write_trajectory


def _start(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    work = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(30, output_tokens=40, tool_time_s=0.05))
    out = tmp_path / "run.jsonl"
    cmd = [sys.executable, "-m", "replay", "run", str(work), "-c", "4", "--duration", "60", "--out", str(out), "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while out.read_bytes().count(b'"type":"request"') < 4 if out.exists() else True:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()  # type: ignore
        time.sleep(0.05)  # polling a condition on disk, not standing in for synchronisation
    return proc, out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())  # a zombie has ended


def test_kill_9_of_the_client_takes_the_simulated_host_with_it(tmp_path: Path) -> None:
    proc, out = _start(tmp_path)
    sim_pid = orjson.loads(out.read_bytes().split(b"\n", 1)[0])["simulated"]["pid"]
    assert _alive(sim_pid)
    proc.kill()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while _alive(sim_pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling for the process to be gone
    if _alive(sim_pid):
        os.kill(sim_pid, signal.SIGKILL)
        pytest.fail("the simulated host outlived its killed parent by more than 5 s")
    run = read_run(out)  # no footer: the report says the client was killed
    assert run.footer is None and run.requests


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_gracefully_with_a_footer(tmp_path: Path, sig: signal.Signals) -> None:
    proc, out = _start(tmp_path)
    sim_pid = orjson.loads(out.read_bytes().split(b"\n", 1)[0])["simulated"]["pid"]
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err.decode()
    assert b"every finished request is in the run file" in err
    run = read_run(out)
    assert run.footer is not None and run.footer["stop_reason"] == f"interrupted ({sig.name})"
    assert run.footer["requests"] == len(run.requests)
    assert {r.error for r in run.requests} <= {None, "cancelled"}
    assert not _alive(sim_pid)
