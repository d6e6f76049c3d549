"""The embedded simulated host: a child process of its own, so it never shares the client's event loop.

``replay run`` without ``--host`` starts ``python -m replay sim --port 0`` here, learns the ephemeral port
from the line the simulator prints when it listens, and stops it when the run ends.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

READY_PREFIX = "REPLAY_SIM_READY port="


@dataclass(frozen=True, slots=True)
class EmbeddedHost:
    base_url: str
    port: int
    pid: int


@contextlib.contextmanager
def embedded_host(
    profile: str = "default",
    truth_log: str | None = None,
    faults: str | None = None,
    fault_seed: int = 0,
    start_timeout_s: float = 30.0,
    dialect: str | None = None,
    fallback: str | None = None,
    profile_file: str | None = None,
) -> Iterator[EmbeddedHost]:
    """Start the simulated host on 127.0.0.1 (ephemeral port); stop it on exit, whatever happened.
    ``dialect``, ``fallback`` and ``profile_file`` are ``replay sim --dialect``, ``--fallback`` and
    ``--profile-file`` (a profile from that file, over its base ``profile``)."""
    cmd = [sys.executable, "-m", "replay", "sim", "--host", "127.0.0.1", "--port", "0", "--profile", profile]
    if profile_file:
        cmd += ["--profile-file", profile_file]
    if truth_log:
        cmd += ["--truth-log", truth_log]
    if faults:
        cmd += ["--faults", faults]
    if faults or fallback:
        cmd += ["--fault-seed", str(fault_seed)]
    if dialect:
        cmd += ["--dialect", dialect]
    if fallback:
        cmd += ["--fallback", fallback]
    # Own session: a Ctrl-C in the terminal reaches the client, which then stops the host itself. Its stdin is a
    # pipe this process holds: if this process dies in any way (kill -9 included), the pipe closes and the host
    # stops itself.
    cmd.append("--exit-with-stdin")
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True, bufsize=1, start_new_session=True
    )
    try:
        port = _wait_ready(proc, start_timeout_s)
        # Keep draining its stdout so a chatty simulator can never block on a full pipe.
        threading.Thread(target=_forward, args=(proc,), daemon=True).start()
        yield EmbeddedHost(base_url=f"http://127.0.0.1:{port}/v1", port=port, pid=proc.pid)
    finally:
        with contextlib.suppress(OSError):
            if proc.stdin is not None:  # a pipe: Popen was asked for one
                proc.stdin.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _forward(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    with contextlib.suppress(ValueError, OSError):
        for line in proc.stdout:
            print(f"[sim] {line.rstrip()}", file=sys.stderr)


def _wait_ready(proc: subprocess.Popen[str], timeout_s: float) -> int:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    fd = proc.stdout.fileno()
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the simulated host exited with code {proc.returncode} before it was ready")
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            if line.startswith(READY_PREFIX):
                return int(line[len(READY_PREFIX) :].strip())
            if line:
                print(f"[sim] {line.rstrip()}", file=sys.stderr)
    raise RuntimeError(f"the simulated host did not report ready within {timeout_s:.0f} s (pid {os.getpid()})")
