"""A key a host echoes in part (its first characters ``\\u``-escaped, split over two header values, upper-cased) leaves
no run of 12 of its characters in the run file, in any case, whatever JSON escapes it hides behind."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

import replay
from replay.loops.closed_loop import LoadConfig
from replay.records.scrub import Scrubber
from tests.support.hostile import PATHS, answer, threaded_host
from tests.support.trajectories import simple_turns, write_trajectory

KEY = "sk-proj-Partial0123456789abcdefQRSTuvwx"  # 39 characters


def _escaped(secret: str, n: int) -> str:
    """``secret`` with its first ``n`` characters written as JSON ``\\u`` escapes (as a host's JSON may)."""
    return "".join(f"\\u{ord(c):04x}" for c in secret[:n]) + secret[n:]


def _decode(text: str) -> str:
    """``text`` with its ``\\uXXXX`` and ``\\/`` escapes decoded, however deep (test code of its own)."""
    while True:
        out = re.sub(r"\\+u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text).replace("\\/", "/")
        if out == text:
            return out
        text = out


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def _longest_run(text: str, secret: str = KEY) -> int:
    """The longest run of consecutive characters of ``secret`` in ``text``, in any case, escapes decoded."""
    view, low = _decode(text).lower(), secret.lower()
    best = 0
    for i in range(len(low)):
        for j in range(len(low), i + best, -1):
            if low[i:j] in view:
                best = j - i
                break
    return best


ECHOES = {
    **{f"first {n} escaped": _escaped(KEY, n) for n in (1, 3, 6, 9, 12)},
    "upper-cased": KEY.upper(),
    "case swapped": KEY.swapcase(),
    "split over two JSON values": KEY[:19] + '", "b": "' + KEY[19:],
    "split by a newline": KEY[:12] + "\n" + KEY[12:],
    "escaped and upper-cased": _escaped(KEY.upper(), 4),
    "slashes escaped": KEY.replace("-", "\\/"),
    "a middle run of 25": "x" * 40 + KEY[5:30] + "x" * 40,
}


@pytest.mark.parametrize("echo", list(ECHOES.values()), ids=list(ECHOES))
def test_every_run_of_12_characters_of_the_key_is_scrubbed(echo: str) -> None:
    scrub = Scrubber([KEY])
    text = f"invalid key: {echo} (check it)"
    line = json.dumps({"detail": text, "headers": {"x-ratelimit-a": echo}}).encode()
    for out in (scrub.text(text), scrub.line(line).decode()):
        assert _longest_run(out) < 12, out
        assert "***" in out and "(check it)" in out
    assert json.loads(scrub.line(line))["detail"].endswith("(check it)")  # the line is still JSON


def test_a_run_shorter_than_12_and_innocent_text_are_left_as_they_are() -> None:
    scrub = Scrubber([KEY])
    for text in (f"middle {KEY[8:19]} then more", "sk-proj- is how a project key starts", "\\u0073\\u006b only",
                 "caf\\u00e9 and \\/path\\/ and a tab\\t", "PARTIAL0123 is 11 and stays"):  # fmt: skip
        assert scrub.text(text) == text
        assert scrub.line(json.dumps({"t": text}).encode()) == json.dumps({"t": text}).encode()


@pytest.mark.parametrize("before", ["\n", "\t", "\\", '"', "\\u0041"])
def test_a_line_stays_json_whatever_escape_stands_before_a_run(before: str) -> None:
    for secret in (KEY, "n" + KEY[1:], "t" + KEY[1:], "u" + KEY[1:]):  # a key's first letter may be an escape's
        scrub = Scrubber([secret])
        for text in (before + secret, before + secret[1:], before + secret[3:].upper() + before):
            out = scrub.line(json.dumps({"t": text}).encode())
            assert _longest_run(json.loads(out)["t"], secret) < 12, out


@pytest.mark.parametrize("api", ["chat", "completions", "responses", "anthropic"])
def test_a_host_echoing_the_key_in_part_leaves_no_run_of_it_in_the_run_file(api: str, tmp_path: Path,
                                                                           monkeypatch) -> None:  # fmt: skip
    monkeypatch.setenv("PARTIAL_KEY", KEY)
    parts = {"escaped": _escaped(KEY, 3), "upper": KEY.upper(), "first": KEY[:19], "second": KEY[19:]}
    calls = itertools.count()

    async def echo(request: web.Request) -> web.StreamResponse:
        await request.read()
        if next(calls) % 2 == 0:  # every other call refused, the rest answered
            body = f'{{"error": {{"message": "bad key {parts["escaped"]} ({parts["upper"]})"}}}}'
            return web.Response(status=401, text=body, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        for name, value in [("x-ratelimit-first", parts["first"]), ("x-ratelimit-second", parts["second"]),
                            ("x-ratelimit-split", parts["first"]), ("x-ratelimit-split", parts["second"]),
                            ("x-request-id", parts["escaped"]), ("x-ratelimit-upper", parts["upper"])]:  # fmt: skip
            resp.headers.add(name, value)
        await resp.prepare(request)
        for part in answer(api):
            await resp.write(part)
        await resp.write_eof()
        return resp

    work = write_trajectory(tmp_path / "w.jsonl", "w", simple_turns(6, output_tokens=3))
    with threaded_host({PATHS[api]: echo}) as url:
        spec = replay.RunSpec([str(work)], host=url, model="m", api=api, api_key_env="PARTIAL_KEY", retries=0,
                              out=str(tmp_path / "r.jsonl"), load=LoadConfig(concurrency=1))  # fmt: skip
        result = replay.run(spec)
    lines = result.path.read_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line still JSON
    requests = [r for r in records if r.get("type") == "request"]
    assert {r.get("error") for r in requests} == {None, "http_4xx"}  # both paths were taken
    assert any(r.get("headers") for r in requests)  # the answered calls' headers were kept
    for line, rec in zip(lines, records, strict=True):
        assert _longest_run(line) < 12, line
        assert max((_longest_run(s) for s in _strings(rec)), default=0) < 12, rec
