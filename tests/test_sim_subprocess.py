"""The process entry point: READY line with the port, serves, stops cleanly on SIGTERM."""

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_serve_prints_ready_serves_and_stops_on_sigterm(tmp_path):
    truth = tmp_path / "truth.jsonl"
    code = f"from replay.sim.server import serve; serve(port=0, profile='fast', truth_log={str(truth)!r})"
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
