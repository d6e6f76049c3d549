"""Ctrl-C in the middle of a run: every finished request is on disk, and the file still reports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from replay.records.reader import read_run
from tests.support.trajectories import simple_turns, write_trajectory


def _request_lines(path: Path) -> int:
    return path.read_bytes().count(b'"type":"request"') if path.exists() else 0


def test_sigint_leaves_every_finished_request_and_a_footer(tmp_path: Path) -> None:
    work = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(30, output_tokens=40, tool_time_s=0.05))
    out = tmp_path / "run.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "replay", "run", str(work), "-c", "4", "--duration", "60", "--out", str(out), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while _request_lines(out) < 8 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a condition on disk, not standing in for synchronisation
    assert _request_lines(out) >= 8, proc.stderr.read().decode() if proc.poll() is not None else "too slow"
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert b"every finished request is in the run file" in err
    run = read_run(out)
    assert run.skipped_lines == 0
    assert run.footer is not None and run.footer["stop_reason"] == "interrupted (SIGINT)"
    assert run.footer["signal"] == "SIGINT"
    assert len(run.requests) >= 8
    finished = [r for r in run.requests if r.error is None]
    assert len(finished) >= 8 and all(r.output_tokens == r.max_tokens for r in finished)
    # calls cut by the interrupt are recorded as cancelled, not lost
    assert {r.error for r in run.requests} <= {None, "cancelled"}
    assert run.footer["requests"] == len(run.requests)
