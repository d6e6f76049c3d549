"""A hostile host at the HTTP level (issue 25, items 2, 6, 8 and the resend of 11): redirects, compression, a
watchdog that holds whatever aiohttp does, and no call sent twice with ``--retries 0``."""

from __future__ import annotations

import asyncio
import gzip
import zlib

import pytest
from aiohttp import web

from replay.clients.client import make_client
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.clients.transport import Transport, _timeout_detail
from replay.records.run_file import RequestRecord
from replay.workload.trajectory import Message
from tests.support.hostile import PATHS, answer, raw_host, read_request, streaming, threaded_host

MSG = Message(raw={"role": "user", "content": "hi"}, wire=b'{"role":"user","content":"hi"}', tokens=5)
KEY = "sk-redirect-SECRET-0123456789"
AUTH = {"Ocp-Apim-Subscription-Key": "sub-SECRET-1", "X-Auth-Token": "tok-SECRET-2", "x-goog-api-key": "goog-SECRET-3"}


async def _call(host: HostConfig, warm: bool = False) -> RequestRecord:
    rec = RequestRecord(id="req-1", session=0, task=0, trajectory="t", turn=0)
    async with Transport(host) as transport:
        client = make_client(host, RequestOptions(model="m"), transport)
        if warm:
            await client.warm(2)
        await client.call(client.render([MSG], 5, None), rec)
    return rec


def _recorder(seen: list[dict[str, str]]) -> web.RequestHandler:
    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        seen.append(dict(request.headers))
        return await streaming(answer("chat"))(request)

    return handler


def _redirecting(target: str, status: int = 307) -> web.RequestHandler:
    async def handler(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=status, headers={"Location": target})

    return handler


@pytest.mark.parametrize("api", ["chat", "anthropic"])
@pytest.mark.parametrize("follow", [False, True])
def test_a_redirect_to_another_origin_is_never_followed_and_no_key_leaves(monkeypatch, api: str, follow: bool) -> None:
    monkeypatch.setenv("REDIRECT_KEY", KEY)
    elsewhere: list[dict[str, str]] = []
    routes = {PATHS[api]: _recorder(elsewhere), "GET /v1/models": _recorder(elsewhere)}
    with threaded_host(routes) as other:
        target = other + PATHS[api][3:]
        models = {PATHS[api]: _redirecting(target), "GET /v1/models": _redirecting(other + "/models", 302)}
        with threaded_host(models) as url:
            host = HostConfig(url, "m", api=api, api_key_env="REDIRECT_KEY", headers=AUTH, follow_redirects=follow)
            rec = asyncio.run(_call(host, warm=True))
    assert rec.error == "redirect" and rec.status == 307
    assert target in rec.error_detail and ("another origin" in rec.error_detail) == follow
    assert elsewhere == []  # neither the call nor the /models warm-ups went there


def test_follow_redirects_follows_within_the_origin_and_the_record_says_so() -> None:
    seen: list[dict[str, str]] = []
    routes = {PATHS["chat"]: _redirecting("/v2/chat/completions", 308), "/v2/chat/completions": _recorder(seen)}
    with threaded_host(routes) as url:
        rec = asyncio.run(_call(HostConfig(url, "m", headers=AUTH, follow_redirects=True)))
        refused = asyncio.run(_call(HostConfig(url, "m", headers=AUTH)))
    assert rec.error is None and rec.output_events == 3 and len(seen) == 1
    assert seen[0]["X-Auth-Token"] == AUTH["X-Auth-Token"]  # the same origin: its credentials go along
    assert (
        rec.notes and "redirected (308 to http://127.0.0.1:" in rec.notes[0] and "/v2/chat/completions" in rec.notes[0]
    )
    assert refused.error == "redirect" and "/v2/chat/completions" in refused.error_detail


def _gzip_per_event(parts: list[bytes], how: str) -> list[bytes]:
    """The answer compressed as one stream, flushed after each event (as a proxy does)."""
    c = zlib.compressobj(wbits=31 if how == "gzip" else (15 if how == "deflate" else -15))
    out = [c.compress(p) + c.flush(zlib.Z_SYNC_FLUSH) for p in parts]
    return [*out, c.flush()]


@pytest.mark.parametrize("how", ["gzip", "deflate", "raw-deflate"])
def test_identity_is_asked_and_a_stream_compressed_anyway_is_read(how: str) -> None:
    seen: list[dict[str, str]] = []
    encoding = "gzip" if how == "gzip" else "deflate"

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        seen.append(dict(request.headers))
        return await streaming(_gzip_per_event(answer("chat", tokens=12), how), {"Content-Encoding": encoding})(request)

    with threaded_host({PATHS["chat"]: handler}) as url:
        rec = asyncio.run(_call(HostConfig(url, "m")))
    assert seen[0]["Accept-Encoding"] == "identity"
    assert rec.error is None, rec.error_detail
    assert rec.output_events == 12 and rec.output_tokens == 12


def test_a_stream_in_an_encoding_replay_does_not_read_fails_by_name() -> None:
    with threaded_host(
        {PATHS["chat"]: streaming([gzip.compress(b"".join(answer("chat")))], {"Content-Encoding": "br"})}
    ) as url:
        rec = asyncio.run(_call(HostConfig(url, "m")))
    assert rec.error == "malformed_stream" and "'br'" in rec.error_detail


def test_a_decompression_bomb_is_cut_at_the_response_limit() -> None:
    bomb = [gzip.compress(b"data: " + b" " * 5_000_000 + b"\n\n")]
    with threaded_host({PATHS["chat"]: streaming(bomb, {"Content-Encoding": "gzip"})}) as url:
        rec = asyncio.run(_call(HostConfig(url, "m", max_response_bytes=1 << 20)))
    assert rec.error == "malformed_stream" and "passed 1,048,576 bytes" in rec.error_detail


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
HANGS = {
    "malformed chunk after the headers": [HEAD, b'12\r\ndata: {"a":1}\n\n\r\n', b"5\r\ndata:\r\nZZZ\r\n"],
    "status 199 and nothing after": [b"HTTP/1.1 199 Odd\r\nContent-Type: text/event-stream\r\n\r\n"],
    "status 100 and nothing after": [b"HTTP/1.1 100 Continue\r\n\r\n"],
    "headers and then silence": [HEAD],
}


@pytest.mark.parametrize("case", sorted(HANGS))
def test_no_new_bytes_for_the_stall_timeout_ends_the_call_whatever_state_aiohttp_is_in(case: str) -> None:
    """Each case once held the call for the whole request timeout (here 100 s, past the test's own limit)."""

    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        for part in HANGS[case]:
            w.write(part)
            await w.drain()
            await asyncio.sleep(0.05)
        await asyncio.sleep(3600)

    with raw_host(handler) as url:
        rec = asyncio.run(_call(HostConfig(url, "m", request_timeout_s=100, stall_timeout_s=0.5)))
    assert rec.error == "timeout" and "--stall-timeout" in rec.error_detail, rec.error_detail


def test_a_timeout_names_the_option_that_ended_it_whichever_timer_fired() -> None:
    """aiohttp's read timer and the stall watchdog are both set to the stall timeout, and on a busy machine either
    fires first: the call names --stall-timeout either way (it said "no bytes within the stall timeout, or the call
    timed out" when aiohttp's fired), and --request-timeout when the deadline passed."""
    host = HostConfig("http://127.0.0.1:1", "m", request_timeout_s=100, stall_timeout_s=0.5)

    async def both() -> tuple[str, str]:
        now = asyncio.get_running_loop().time()
        return _timeout_detail(host, now + 50), _timeout_detail(host, now - 1)

    stalled, late = asyncio.run(both())
    assert stalled == "no new bytes for 0.5 s (--stall-timeout)"
    assert late == "the call passed its deadline of 100 s (--request-timeout)"


@pytest.mark.parametrize("resend", [False, True])
def test_a_request_the_host_received_is_not_sent_again_without_retries(resend: bool) -> None:
    """The host reads every request whole, then closes without a word: with ``--retries 0`` (resend_stale off)
    it gets the call once; with retries it gets the stale-connection resend, once."""
    received: list[bytes] = []

    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while True:
            received.append(await read_request(r))
            if b"POST" in received[-1][:5]:
                w.close()
                return
            body = b'{"data":[{"id":"m"}]}'
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            await w.drain()

    with raw_host(handler) as url:
        rec = asyncio.run(_call(HostConfig(url, "m", resend_stale=resend), warm=True))
    posts = [r for r in received if r.startswith(b"POST")]
    assert len(posts) == (2 if resend else 1) and rec.error == "connect"


_BODY = b"".join(answer("chat"))
BROKEN_HTTP = {  # the host was reached each time: its answer's head cannot be read (classed connect before)
    "not HTTP": b"SSH-2.0-OpenSSH_9.6\r\n",
    "a bad status line": b"HTTP/1.1 abc OK\r\n\r\n",
    "too many headers": b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(200)) + b"\r\n",
    "an oversized header": b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n",
    "a 204 to a stream": b"HTTP/1.1 204 No Content\r\n\r\n",
}


@pytest.mark.parametrize("case", sorted(BROKEN_HTTP))
def test_broken_http_from_a_host_it_reached_is_a_protocol_error_not_connect(case: str) -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(BROKEN_HTTP[case])
        await w.drain()

    with raw_host(handler) as url:
        rec = asyncio.run(_call(HostConfig(url, "m", request_timeout_s=30, stall_timeout_s=10)))
    assert rec.error == "protocol", (rec.error, rec.error_detail)
    assert rec.error_detail and ("not HTTP" in rec.error_detail or "204" in rec.error_detail), rec.error_detail


def test_an_answer_longer_than_its_content_length_makes_the_next_answer_on_the_connection_a_protocol_error() -> None:
    """A short ``Content-Length``: the rest of the answer is read as the next answer's head, on the kept-alive
    connection."""

    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while True:
            await read_request(r)
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 10\r\n\r\n" + _BODY)
            await w.drain()

    async def two(host: HostConfig) -> list[RequestRecord]:
        recs = [RequestRecord(id=f"req-{i}", session=0, task=0, trajectory="t", turn=i) for i in range(2)]
        async with Transport(host) as transport:
            client = make_client(host, RequestOptions(model="m"), transport)
            for rec in recs:
                await client.call(client.render([MSG], 5, None), rec)
        return recs

    with raw_host(handler) as url:
        first, second = asyncio.run(two(HostConfig(url, "m", request_timeout_s=30, stall_timeout_s=10)))
    assert first.error is not None and first.error != "connect", first.error
    assert second.error == "protocol", (second.error, second.error_detail)
