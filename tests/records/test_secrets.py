"""The API key reaches no byte of anything replay writes or prints, whatever path it takes.

A host that echoes every request header (and the body) back, in its error bodies for five statuses, in a response
header and inside its stream; a key nested deep inside --extra-body; a key in the --host URL. Then every output
is searched for the key: stdout and stderr, the run file, and the text, JSON, CSV and HTML reports.
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest
from aiohttp import web

KEY = "sk-test-SECRET-0123456789abcdef"
STATUSES = itertools.cycle([400, 401, 429, 500, 503, 200, 200])


def _echo_server() -> tuple[str, callable]:
    """An echoing host on 127.0.0.1 in a thread of its own (the client under test is another process)."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    state: dict = {}

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {str(k): v for k, v in request.headers.items()}
        echo = orjson.dumps({"error": {"message": "echo", "headers": headers, "body": body.decode()}})
        status = next(STATUSES)
        if status != 200:
            return web.Response(status=status, body=echo, headers={"x-request-id": request.headers["Authorization"]})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "x-ratelimit-key": KEY})
        await resp.prepare(request)
        chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}}], "system_fingerprint": KEY, "model": KEY}
        await resp.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
        usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": "x" + KEY}}  # bad usage, echoed
        await resp.write(b"data: " + orjson.dumps(usage) + b"\n\ndata: [DONE]\n\n")
        return resp

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": KEY}]})  # the key as a model name: the header would hold it

    async def start() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        app.router.add_get("/v1/models", models)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["runner"], state["port"] = runner, site._server.sockets[0].getsockname()[1]  # type: ignore
        started.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    thread.start()
    started.wait(10)

    def stop() -> None:
        asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)

    return f"http://127.0.0.1:{state['port']}/v1", stop


def _replay(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "replay", *args], capture_output=True, env=env, timeout=120)


@pytest.fixture
def env() -> dict[str, str]:
    import os

    return {**os.environ, "MY_PROVIDER_KEY": KEY}


def test_the_key_is_in_no_output_of_a_run_against_an_echoing_host(tmp_path: Path, env: dict[str, str]) -> None:
    from tests.support.trajectories import simple_turns, write_trajectory

    work = write_trajectory(tmp_path / "w.jsonl", "w", simple_turns(7, output_tokens=3))
    url, stop = _echo_server()
    out = tmp_path / "run.jsonl"
    extra = orjson.dumps({"metadata": {"nested": [{"deep": KEY}], "api_key": "other-secret-value"}}).decode()
    try:
        run = _replay("run", str(work), "--host", url, "--api-key-env", "MY_PROVIDER_KEY", "-c", "1", "--retries",
                      "0", "--extra-body", extra, "--out", str(out), env=env)  # fmt: skip
    finally:
        stop()
    assert run.returncode == 2, run.stderr.decode()  # most calls failed: more than 10 %
    written = out.read_bytes()
    assert b"http_4xx" in written and b"http_429" in written and b"http_5xx" in written and b"bad_usage" in written
    report = _replay("report", str(out), env=env)
    as_json = _replay("report", str(out), "--json", env=env)
    outputs = [run.stdout, run.stderr, written, report.stdout, report.stderr, as_json.stdout]
    html, csv_dir = tmp_path / "r.html", tmp_path / "csv"
    extra_files = _replay("report", str(out), "--html", str(html), "--csv", str(csv_dir), env=env)
    outputs += [extra_files.stdout, extra_files.stderr, *(p.read_bytes() for p in csv_dir.iterdir())]
    if html.exists():
        outputs.append(html.read_bytes())
    for data in outputs:
        assert KEY.encode() not in data
    assert b"other-secret-value" not in written  # a secret-named field, at any depth
    assert b"***" in written


def test_a_key_in_the_host_url_is_refused_and_never_printed(tmp_path: Path, env: dict[str, str]) -> None:
    for url in (f"http://user:{KEY}@127.0.0.1:9/v1", f"http://127.0.0.1:9/v1?api_key={KEY}"):
        res = _replay("run", "--host", url, "--out", str(tmp_path / "x.jsonl"), env=env)
        assert res.returncode == 1 and b"--api-key-env" in res.stderr
        assert KEY.encode() not in res.stdout + res.stderr
        assert not (tmp_path / "x.jsonl").exists()


def test_a_fragment_in_the_host_url_is_refused_and_a_key_in_its_path_never_printed(tmp_path, env) -> None:
    """A fragment is refused as a key in the query is; a key in the path reaches neither a start line (the run's,
    the probe's), a study's progress line or index, nor an error (the host is a port nobody listens on: every call
    fails to connect)."""
    import socket

    from tests.support.trajectories import simple_turns, write_trajectory

    work = write_trajectory(tmp_path / "w.jsonl", "w", simple_turns(2, output_tokens=3))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = _replay("run", "--host", f"http://127.0.0.1:{port}/v1#{KEY}", "--out", str(tmp_path / "x.jsonl"), env=env)
    assert res.returncode == 1 and b"carries a fragment (#...): pass the key through --api-key-env" in res.stderr
    assert KEY.encode() not in res.stdout + res.stderr and not (tmp_path / "x.jsonl").exists()
    for model in (["--model", "m"], []):  # the run's start line, its summary; the model list's error
        args = [str(work), "--host", f"http://127.0.0.1:{port}/{KEY}/v1", "--api-key-env", "MY_PROVIDER_KEY"]
        res = _replay("run", *args, *model, "--retries", "0", "--out", str(tmp_path / "y.jsonl"), env=env)
        assert res.returncode == 3, res.stderr.decode()
        assert b"against http://127.0.0.1:" in res.stderr or not model
        assert KEY[4:16].encode() not in res.stdout + res.stderr, res.stderr.decode()
    args = ["--host", f"http://127.0.0.1:{port}/{KEY}/v1", "--api-key-env", "MY_PROVIDER_KEY", "--model", "m"]
    res = _replay("probe", *args, "--duration", "10", "--out", str(tmp_path / "t.toml"), env=env)
    assert res.returncode == 3 and b"replay probe: http://127.0.0.1:" in res.stderr, res.stderr.decode()
    assert KEY[4:16].encode() not in res.stdout + res.stderr, res.stderr.decode()
    level = [str(work), *args, "--retries", "0", "--warmup", "0.5s", "--window", "1s"]
    for study in (["sweep", "-c", "1"], ["capacity", "--max", "1", "--slo", "ttft_p95<=2s"]):  # progress, index
        res = _replay(*study, *level, "--out", str(tmp_path / study[0]), env=env)
        written = b"".join(p.read_bytes() for p in (tmp_path / study[0]).iterdir() if p.suffix == ".json")
        assert b"http://127.0.0.1:" in res.stderr + res.stdout and b'"command": "replay ' in written, res.stderr
        assert KEY[4:16].encode() not in res.stdout + res.stderr + written, (res.stderr + written).decode()
