"""A key a host echoes in another form, or cut where an excerpt ends, is scrubbed too; every header whose name says
it holds a secret is redacted (issue 25, item 7)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from pathlib import Path
from urllib.parse import quote, quote_plus

import orjson
import pytest
from aiohttp import web

import replay
from replay.clients.client import make_client
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.clients.transport import Transport
from replay.clients.usage import excerpt
from replay.loops.closed_loop import LoadConfig
from replay.records.run_file import RequestRecord
from replay.records.scrub import Scrubber, redact_headers
from replay.workload.trajectory import Message
from tests.support.hostile import PATHS, answer, streaming, threaded_host
from tests.support.trajectories import simple_turns, write_trajectory

KEY = "sk-live/SECRET+key=0123456789abcdefXYZ"  # with the characters each encoding changes
HEADERS = {"Ocp-Apim-Subscription-Key": "apim-SECRET-0123456789", "X-Auth-Token": "xauth-SECRET-0123456789",
           "x-goog-api-key": "goog-SECRET-0123456789", "X-Session-Id": "{session}"}  # fmt: skip


def _forms(secret: str) -> dict[str, str]:
    """The key as a host may echo it."""
    return {
        "plain": secret,
        "json": json.dumps(secret)[1:-1].replace("/", "\\/"),
        "unicode": "".join(f"\\u{ord(c):04x}" for c in secret),
        "url": quote(secret, safe=""),
        "url-lower": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(secret, safe="")),
        "url-plus": quote_plus(secret),
        **{f"b64-{k}": base64.b64encode(("x" * k + secret + "tail").encode()).decode() for k in range(3)},
        **{f"b64url-{k}": base64.urlsafe_b64encode(("y" * k + secret).encode()).decode() for k in range(3)},
    }


def _leaks(text: str, secret: str) -> list[str]:
    """Whatever of ``secret`` is still readable in ``text``: a prefix of 8+ characters in any form, decoded."""
    found = []
    for k in range(8, len(secret) + 1):
        if secret[:k] in text:
            found.append(secret[:k])
    for word in text.replace("***", " ").split():
        for k in range(4):  # each alignment of a base64 text
            part = word[k:].rstrip("=")
            try:
                decoded = base64.b64decode(part[: len(part) // 4 * 4], altchars=b"-_" if "_" in word else None)
            except ValueError:
                continue
            if secret[:8].encode() in decoded or secret[-8:].encode() in decoded:
                found.append(f"base64 {word[:20]}")
    return found


@pytest.mark.parametrize("form", sorted(_forms(KEY)))
def test_every_encoding_of_the_key_is_scrubbed(form: str) -> None:
    scrub = Scrubber([KEY])
    echoed = f"error: the key {_forms(KEY)[form]} is not valid"
    for out in (scrub.text(echoed), scrub.line(echoed.encode()).decode()):
        assert "***" in out, out
        assert _forms(KEY)[form] not in out
        assert not [leak for leak in _leaks(out, KEY) if form.startswith("b64") or "SECRET" in leak], out


@pytest.mark.parametrize("keep", range(8, len(KEY)))
def test_a_key_cut_by_an_excerpt_leaves_no_start_of_it(keep: int) -> None:
    scrub = Scrubber([KEY])
    text = "x" * (300 - keep) + KEY + " and more"
    for out in (scrub.text(excerpt(text)), scrub.line(orjson.dumps({"detail": excerpt(text)})).decode(),
                scrub.line(orjson.dumps({"h": text[:300]})).decode()):  # fmt: skip
        assert KEY[:8] not in out, out
    assert scrub.text("sk-live/ is a prefix in the middle of a text") == "sk-live/ is a prefix in the middle of a text"


def test_every_header_whose_name_says_secret_is_redacted() -> None:
    redacted = redact_headers({**HEADERS, "Authorization": "Bearer x", "X-Api-Key": "k", "Cookie": "c"})
    assert redacted["X-Session-Id"] == "{session}"
    assert {k for k, v in redacted.items() if v == "***"} == {*HEADERS} - {"X-Session-Id"} | {
        "Authorization", "X-Api-Key", "Cookie"}  # fmt: skip


def test_a_host_echoing_every_secret_in_every_form_leaves_none_in_the_run_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FORMS_KEY", KEY)
    secrets = [KEY, *(v for k, v in HEADERS.items() if k != "X-Session-Id")]

    async def echo(request: web.Request) -> web.StreamResponse:
        await request.read()
        text = " ".join(f for s in secrets for f in _forms(s).values())
        if request.headers.get("X-Request-Id", "")[-1] in "0123":  # some calls refused, the rest answered
            return web.Response(status=400, text="x" * 280 + KEY + " " + text, headers={"x-request-id": KEY})
        extra = {"model": "y" * 190 + KEY, "system_fingerprint": text}
        return await streaming(answer("chat", extra=extra), {"x-ratelimit-remaining-tokens": text})(request)

    work = write_trajectory(tmp_path / "w.jsonl", "w", simple_turns(6, output_tokens=3))
    with threaded_host({PATHS["chat"]: echo}) as url:
        spec = replay.RunSpec([str(work)], host=url, model="m", api_key_env="FORMS_KEY", headers=HEADERS, retries=0,
                              out=str(tmp_path / "r.jsonl"), load=LoadConfig(concurrency=1))  # fmt: skip
        result = replay.run(spec)
    written = result.path.read_text()
    header = orjson.loads(written.splitlines()[0])
    assert {k for k, v in header["host"]["headers"].items() if v == "***"} == {*HEADERS} - {"X-Session-Id"}
    for secret in secrets:
        assert not _leaks(written, secret), (secret, _leaks(written, secret)[:3])
    assert "***" in written


def test_the_client_scrubs_a_refusal_before_cutting_it() -> None:
    async def refuse(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=401, text="y" * 290 + KEY)

    async def call(url: str) -> RequestRecord:
        rec = RequestRecord(id="r1", session=0, task=0, trajectory="t", turn=0)
        host = HostConfig(url, "m", api_key_env="FORMS_KEY")
        async with Transport(host) as transport:
            client = make_client(host, RequestOptions(model="m"), transport)
            msg = Message(raw={"role": "user", "content": "hi"}, wire=b'{"role":"user","content":"hi"}', tokens=5)
            await client.call(client.render([msg], 5, None), rec)
        return rec

    with pytest.MonkeyPatch.context() as mp, threaded_host({PATHS["chat"]: refuse}) as url:
        mp.setenv("FORMS_KEY", KEY)
        rec = asyncio.run(call(url))
    assert rec.error == "http_4xx" and KEY[:8] not in rec.error_detail and "***" in rec.error_detail
