"""The process entry point: READY line with the port, serves, stops cleanly on SIGTERM."""

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.runner.embedded_host import embedded_host

ROOT = Path(__file__).resolve().parents[2]


def test_serve_prints_ready_serves_and_stops_on_sigterm(tmp_path):
    truth = tmp_path / "truth.jsonl"
    code = f"from replay.sim.server.app import serve; serve(port=0, profile='fast', truth_log={str(truth)!r})"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("REPLAY_SIM_READY port="), line
        port = int(line.strip().split("=", 1)[1])
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "X-Request-Id": "sub-1"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert json.loads(resp.read())["usage"]["completion_tokens"] == 3
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert proc.stdout.read() == ""  # exactly one line on stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (record,) = [json.loads(line) for line in truth.read_text().splitlines()]
    assert record["request_id"] == "sub-1" and record["status"] == "ok"


def test_embedded_host_passes_dialect_and_fallback_through(tmp_path):
    truth = tmp_path / "truth.jsonl"
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True}
    with embedded_host("fast", str(truth), dialect="groq", fallback="1:fast") as host:
        req = urllib.request.Request(
            f"{host.base_url}/chat/completions", data=json.dumps(body).encode(), headers={"X-Request-Id": "e1"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.headers["x-replay-route"] == "fallback:fast"
            first = resp.read().split(b"\n\n")[0]
    assert json.loads(first[len(b"data: ") :])["x_groq"] == {"id": "req_e1"}
    (record,) = [json.loads(line) for line in truth.read_text().splitlines()]
    assert record["route"] == "fallback:fast"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--dialect", "nope"], "unknown dialect 'nope'"),
        (["--fallback", "0.3"], "expected SHARE:PROFILE"),
        (["--fallback", "0.3:nope"], "unknown sim profile 'nope'"),
        (["--faults", "429:0.1:wait=1"], "option 'wait=1'"),
    ],
)
def test_bad_sim_options_get_one_line_errors(args, says):
    result = CliRunner().invoke(main, ["sim", *args])
    assert result.exit_code == 1 and says in result.output and "Traceback" not in result.output
