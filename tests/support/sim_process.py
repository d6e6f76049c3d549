"""``replay sim`` in a process of its own, with options ``embedded_host`` does not pass (``--tls``, ``--ws-limit``):
its base URL and what it printed before READY; stopped on every path."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def sim_process(*args: str) -> Iterator[tuple[str, list[str]]]:
    """(base URL, the lines before READY) of ``python -m replay sim --port 0 ARGS``."""
    cmd = [sys.executable, "-m", "replay", "sim", "--port", "0", *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        before: list[str] = []
        while not (line := proc.stdout.readline()).startswith("REPLAY_SIM_READY port="):
            assert line, f"the simulated host exited before READY: {before}"
            before.append(line.strip())
        scheme = "https" if "--tls" in args else "http"
        yield f"{scheme}://127.0.0.1:{int(line.strip().split('=', 1)[1])}/v1", before
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
