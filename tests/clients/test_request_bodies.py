"""The request bodies each flavour sends, byte for byte, as captured by a local server.

``request_bodies.json`` holds the bodies the client sent before issue 14 (when every body was one joined bytes
object): in full when short, else their SHA-256 and length. Bodies are now sent as their fragments, and each flavour
shares the text of long messages with their chat bytes: the host must see exactly the same bytes. The conversation
has what rendering treats apart: several system messages, tool calls (with arguments that are not JSON), tool
results, content parts, an empty answer, escapes and non-ASCII text, long messages (shared fragments, and pieces
longer than the transport's write batches), the per-task tag, templated body fields and each flavour's options.

Regenerate only from a commit whose bodies are known good: ``python tests/clients/test_request_bodies.py --write``.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import sys
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from replay.clients.client import make_client
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.clients.transport import Transport
from replay.records.run_file import RequestRecord
from replay.sessions.agent import _salted
from replay.workload.history import HistoryPolicy
from replay.workload.tokens import get_tokenizer
from replay.workload.trajectory import Message, MessageBuilder

GOLDEN = Path(__file__).with_name("request_bodies.json")
SHORT = 4096  # bodies up to this long are kept in full
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "Run a command",
          "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}]  # fmt: skip
CALL = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd":"cat parser.py"}'}}
ODD_CALL = {"id": "call_2", "type": "function", "function": {"name": "edit", "arguments": "not json"}}


def long_text(seed: int, n: int) -> str:
    """Text with everything JSON escapes differently: quotes, backslashes, controls, non-ASCII, U+2028."""
    alphabet = ["word ", '"q" ', "\\", "\n", "\t", "\x01", "é", "中文", "😀", "\u2028", '"content":"', "</s>", "{}"]
    rng = random.Random(seed)
    return "".join(rng.choices(alphabet, k=n))


def conversation(long: bool) -> list[dict[str, Any]]:
    big = (lambda seed: long_text(seed, 40_000)) if long else (lambda seed: "")
    return [
        {"role": "system", "content": 'You are a coding agent. "quotes" and \\ backslash' + big(1)},
        {"role": "system", "content": "Second system é ü 中文 \u2028 end"},
        {"role": "user", "content": "Fix the bug in parser.py\n\ttab \x01 control 😀" + big(2)},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [CALL, ODD_CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": '<output "content":"x">' + big(3)},
        {"role": "tool", "content": "edited" + big(4), "tool_call_id": "call_2"},
        {"role": "assistant", "content": None, "tool_calls": [ODD_CALL]},
        {"role": "user", "content": [{"type": "text", "text": "part one "}, {"type": "text", "text": "part two"}]},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "last words" + big(5)},
    ]


def messages(long: bool, salt: bool) -> list[Message]:
    builder = MessageBuilder(get_tokenizer(), HistoryPolicy())
    msgs = [builder.message(m) for m in conversation(long)]
    return _salted(msgs, "[replay 0123abcd task 7]\n", builder) if salt else msgs


AFFINITY = {"extra_body": {"prompt_cache_key": "replay-{task}", "user": "fixed"}}  # filled per call
# name: (api, options, tools, salted, Responses state: how many messages the host holds)
CASES: dict[str, tuple[str, dict[str, Any], bool, bool, int | None]] = {
    "chat": ("chat", {}, False, False, None),
    "chat-tools-forced-salted": ("chat", {"force_output_length": True}, True, True, None),
    "chat-affinity": ("chat", AFFINITY, False, False, None),
    "completions": ("completions", {}, False, False, None),
    "completions-forced-salted": ("completions", {"force_output_length": True}, True, True, None),
    "responses": ("responses", {}, True, False, None),
    "responses-previous-affinity": ("responses", {"responses_state": "previous", **AFFINITY}, True, True, 6),
    "anthropic": ("anthropic", {}, False, False, None),
    "anthropic-cache-tools-salted": ("anthropic", {"cache_control": "auto"}, True, True, None),
}


async def _send(url: str, long: bool) -> None:
    """Every case's call, sent as a session sends it."""
    for name, (api, opts, tools, salt, held) in CASES.items():
        host = HostConfig(url, "m", api=api)
        context = messages(long, salt)
        async with Transport(host) as transport:
            client = make_client(host, RequestOptions(model="m", **opts), transport)
            conv = client.new_conversation()
            if held is not None and conv is not None:
                conv.previous_id, conv.sent = "resp_1", context[:held]
            body = client.render(context, 64, TOOLS if tools else None, conv)
            rec = RequestRecord(id=f"{name}-{int(long)}", session=3, task=17, trajectory="t", turn=0)
            await client.call(body, rec, conv, context)


async def captured_bodies() -> dict[str, bytes]:
    """Each case's body (short and long conversations), captured at a local aiohttp server."""
    seen: dict[str, bytes] = {}

    async def handler(request: web.Request) -> web.Response:
        body = await request.read()
        length = request.headers.get("Content-Length")  # as a bytes body had: a length, not chunked
        seen[request.headers["X-Request-Id"]] = body if length == str(len(body)) else b"no Content-Length"
        return web.Response(status=400, text='{"error":"captured"}')

    app = web.Application(client_max_size=1 << 30)
    app.router.add_post("/v1/{path:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        for long in (False, True):
            await _send(f"http://127.0.0.1:{port}/v1", long)
    finally:
        await runner.cleanup()
    return seen


def describe(body: bytes) -> dict[str, Any]:
    entry: dict[str, Any] = {"sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body)}
    if len(body) <= SHORT:
        entry["body"] = body.decode()
    return entry


async def test_every_flavour_sends_the_bodies_it_sent_before() -> None:
    golden = orjson.loads(GOLDEN.read_bytes())
    seen = await captured_bodies()
    assert sorted(seen) == sorted(golden)
    for name, body in seen.items():
        want = golden[name]
        if "body" in want:
            assert body.decode() == want["body"], name
        assert describe(body) == want, name


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    bodies = asyncio.run(captured_bodies())
    GOLDEN.write_bytes(orjson.dumps({k: describe(v) for k, v in sorted(bodies.items())}, option=orjson.OPT_INDENT_2))
