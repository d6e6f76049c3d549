"""No credential leaves the host's origin: every command that talks to a host, against a host on 127.0.0.1 that
answers every method and path with a redirect (301, 302, 303, 307, 308) to a second server on 127.0.0.1. The second
server must see nothing: no request at all, so no header carrying the key in any case."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
from aiohttp import web
from click.testing import CliRunner

from replay.cli import main
from tests.support.hostile import PATHS, answer, threaded_host
from tests.support.trajectories import simple_turns, write_trajectory

KEY = "sk-leak-CANARY-0123456789abcdef"
API = {path: api for api, path in PATHS.items()}
STATUSES = (301, 302, 303, 307, 308)
HEADER = f"X-Team-Key: {KEY}"  # a custom auth header: what aiohttp would carry along (it strips Authorization only)
CLAIMS = """
[verify]
window = "1s"
warmup = "0.5s"

[[claim]]
name = "output tokens per second at 1"
source = "a test"
metric = "output_tokens"
value = 10
unit = "tokens/s"
conditions = { concurrency = 1 }
"""


@contextmanager
def _redirecting(status: int, calls: bool = False) -> Iterator[tuple[str, list[str], list[tuple[str, str, dict]]]]:
    """(the redirecting host's base URL, what it was asked (METHOD path), what the second server saw). The host
    redirects every request; with ``calls``, it answers the API calls (POST) and redirects the rest (a probe gets
    past its first phase to its reads of what the host states)."""
    seen: list[tuple[str, str, dict[str, str]]] = []
    asked: list[str] = []

    async def elsewhere(request: web.Request) -> web.StreamResponse:
        await request.read()
        seen.append((request.method, request.path, dict(request.headers)))
        return web.json_response({"data": [{"id": "m"}]})

    catch_all = "/{tail:.*}"
    with threaded_host({catch_all: elsewhere, f"GET {catch_all}": elsewhere}, models=False) as other:
        origin = other.removesuffix("/v1")

        async def redirect(request: web.Request) -> web.StreamResponse:
            asked.append(f"{request.method} {request.path}")
            if calls and request.method == "POST":
                return await _paced(request, answer(API[request.path], tokens=12))
            await request.read()
            return web.Response(status=status, headers={"Location": origin + request.path_qs})

        with threaded_host({catch_all: redirect, f"GET {catch_all}": redirect}, models=False) as url:
            yield url, asked, seen


async def _paced(request: web.Request, parts: list[bytes]) -> web.StreamResponse:
    """An answer streamed a part every 2 ms, as a host decodes (the probe measures a step only between reads)."""
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for part in parts:
        await resp.write(part)
        await asyncio.sleep(0.002)
    await resp.write_eof()
    return resp


def _workload(tmp_path: Path) -> Path:
    work = tmp_path / "w.jsonl"
    write_trajectory(work, "w0", simple_turns(2, output_tokens=4))
    return work


def _commands(url: str, work: Path, tmp: Path) -> dict[str, list[str]]:
    """Every command that talks to a host, each in the shortest form that reaches it (and with the key where the
    command sends one: the flavour's auth header, and a custom one)."""
    (tmp / "claims.toml").write_text(CLAIMS)
    key = f"--host {url} --api-key-env LEAK_KEY -q"
    run = f"run {work} {key} --tasks 1 --tool-time none"
    level = f"{work} {key} --model m --warmup 0.5s --window 1s"
    commands = {
        "run chat, model found at /models": f"{run} --out {tmp}/a.jsonl",
        "run anthropic": f"{run} --model m --api anthropic --out {tmp}/b.jsonl",
        "run completions": f"{run} --model m --api completions --out {tmp}/c.jsonl",
        "run responses over a WebSocket": f"{run} --model m --api responses --transport websocket --out {tmp}/d.jsonl",
        "run --scrape-metrics": f"{run} --model m --scrape-metrics auto --window 1s --out {tmp}/e.jsonl",
        "run --follow-redirects": f"{run} --model m --follow-redirects --out {tmp}/f.jsonl",
        "probe, model found at /models": f"probe {work} {key} --duration 10 --out {tmp}/t.toml",
        "probe": f"probe {work} {key} --model m --duration 10 --out {tmp}/t.toml --runs {tmp}/runs",
        "sweep": f"sweep {level} -c 1 --out {tmp}/sweep",
        "capacity": f"capacity {level} --slo ttft_p95<=2s --max 1 --out {tmp}/capacity",
        "claims verify": f"claims verify {tmp}/claims.toml {work} {key} --model m --out {tmp}/claims",
    }
    return {name: [*line.split(), *(["--header", HEADER] if line.startswith("run") else [])]
            for name, line in commands.items()}  # fmt: skip


@pytest.mark.parametrize("status", STATUSES)
def test_no_command_sends_anything_to_where_a_host_redirects(status: int, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LEAK_KEY", KEY)
    monkeypatch.chdir(tmp_path)
    work = _workload(tmp_path)
    with _redirecting(status) as (url, asked, seen):
        for name, args in _commands(url, work, tmp_path).items():
            before = len(asked)
            res = CliRunner().invoke(main, args)
            assert "Traceback" not in res.output and not isinstance(res.exception, AssertionError), (name, res.output)
            assert len(asked) > before, f"{name} never asked the host"
            assert _carrying_the_key(seen) == [], f"{name}: the key went to the second server"
            assert seen == [], f"{name}: the second server was asked {seen}"
            if "model found at /models" in name:  # no model to run with: said as what it is
                said = f"{url}/models answered: redirected ({status} to http://127.0.0.1:"
                assert res.exit_code == 1 and said in res.output, res.output
            elif name.startswith("run"):  # every call a redirect, classified as one
                errors = _errors(Path(args[args.index("--out") + 1]))
                assert errors and set(errors) == {"redirect"}, (name, errors)
                assert res.exit_code == 2, res.output  # every call failed: the verdict fails the run


def _carrying_the_key(seen: list[tuple[str, str, dict[str, str]]]) -> list[tuple[str, str, str]]:
    """Every header the second server saw that carries the key, in any case (``Bearer KEY``, ``x-api-key``, ...)."""
    return [(method, path, h) for method, path, hs in seen for h, v in hs.items() if KEY.lower() in v.lower()]


def _errors(run_file: Path) -> list[str | None]:
    """The error class of every call in a run file, read from its lines."""
    lines = [orjson.loads(line) for line in run_file.read_bytes().splitlines() if line.strip()]
    return [rec.get("error") for rec in lines if rec.get("type") == "request"]


@pytest.mark.parametrize("status", STATUSES)
def test_the_probe_reads_what_a_host_states_without_following_it_elsewhere(status, tmp_path, monkeypatch) -> None:
    """The probe's reads of /metrics, /v1/models and /props (after its first phase) carry the key: a redirect of
    each is not followed (urllib followed 301/302/303/307 to any origin with Authorization and x-api-key)."""
    monkeypatch.setenv("LEAK_KEY", KEY)
    for api in ("chat", "anthropic"):
        with _redirecting(status, calls=True) as (url, asked, seen):
            args = f"probe --host {url} --model m --api {api} --api-key-env LEAK_KEY --duration 10 -q"
            res = CliRunner().invoke(
                main, [*args.split(), "--out", str(tmp_path / "t.toml"), "--runs", str(tmp_path / api)]
            )
            assert "Traceback" not in res.output, res.output
            assert {"GET /metrics", "GET /v1/models", "GET /props"} <= set(asked), (asked, res.output)
            assert _carrying_the_key(seen) == [] and seen == []


def test_every_request_goes_through_the_one_session_that_never_follows_a_redirect() -> None:
    """The guard of what comes later: no module of replay's opens HTTP any other way (a session of its own, urllib,
    http.client), so a new request cannot carry a key to where a redirect points."""
    package = Path(__file__).resolve().parents[2] / "replay"
    others = ("aiohttp.ClientSession(", "urllib.request", "http.client", "import requests", "import httpx")
    found = [(str(p.relative_to(package)), o) for p in package.rglob("*.py") for o in others if o in p.read_text()]
    assert found == [("clients/http_session.py", "aiohttp.ClientSession(")]
