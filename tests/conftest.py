"""Shared test fixtures: small trajectories written to tmp files, and a crafted-SSE HTTP server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

SHARED = Path(__file__).resolve().parents[2] / "shared"


def write_trajectory(path: Path, traj_id: str, turns: list[dict], **header) -> Path:
    lines = [orjson.dumps({"format": "replay.trajectory/1", "id": traj_id, **header})]
    lines += [orjson.dumps(t) for t in turns]
    with open(path, "ab") as f:
        f.write(b"\n".join(lines) + b"\n")
    return path


def simple_turns(n: int, *, output_tokens: int = 20, tool_time_s: float = 0.0, grow: str = "x") -> list[dict]:
    """n turns: a system + user start, then one observation per turn."""
    turns = [
        {
            "append": [
                {"role": "system", "content": "You are a careful coding agent."},
                {"role": "user", "content": "Fix the failing test in parser.py"},
            ],
            "output": {"content": "Let me look.\n```bash\ncat parser.py\n```"},
            "output_tokens": output_tokens,
            "tool_time_s": tool_time_s,
        }
    ]
    for i in range(1, n):
        turns.append(
            {
                "append": [{"role": "user", "content": f"<output>line {i} {grow * (50 * i)}</output>"}],
                "output": {"content": f"step {i}: run the tests\n```bash\npytest -q tests/test_{i}.py\n```"},
                "output_tokens": output_tokens,
                "tool_time_s": tool_time_s,
            }
        )
    return turns


async def serve_chat(handler: Callable[[web.Request], Any]) -> tuple[str, web.AppRunner]:
    """Serve ``handler`` at /v1/chat/completions on 127.0.0.1 (an ephemeral port); the caller cleans up."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return f"http://127.0.0.1:{port}/v1", runner


@pytest.fixture
def crafted_server() -> Callable[[list[bytes], int], AsyncIterator[str]]:
    """Start an HTTP server on 127.0.0.1 that answers every POST with the given byte parts, in order."""

    async def start(parts: list[bytes], status: int = 200, seen: list | None = None) -> tuple[str, web.AppRunner]:
        async def handler(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            if seen is not None:
                seen.append((request.headers.copy(), orjson.loads(body)))
            if status != 200:
                return web.Response(status=status, body=b"".join(parts), headers={"Retry-After": "1"})
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for part in parts:
                await resp.write(part)
            await resp.write_eof()
            return resp

        return await serve_chat(handler)

    return start


def read_sse(raw: bytes) -> list[dict[str, Any]]:
    """A small SSE reader of its own (the tests never use the client's): one dict per event with its
    ``event`` name (or None), ``data`` (decoded JSON, ``"[DONE]"``, or the raw bytes when not JSON) and
    ``comments`` (the ``:`` lines before it). Fails on bytes that are not SSE framing."""
    events: list[dict[str, Any]] = []
    comments: list[str] = []
    assert raw.endswith(b"\n\n") or not raw, raw[-80:]
    for block in raw.split(b"\n\n")[:-1]:
        name, data = None, None
        for line in block.split(b"\n"):
            if line.startswith(b":"):
                comments.append(line[1:].strip().decode())
            elif line.startswith(b"event: "):
                name = line[7:].decode()
            elif line.startswith(b"data: "):
                data = line[6:]
            else:
                raise AssertionError(f"not an SSE line: {line[:80]!r}")
        if data is None:
            continue  # a comment-only block
        if data == b"[DONE]":
            value: Any = "[DONE]"
        else:
            try:
                value = json.loads(data)  # the standard parser: it reads 2**64 too
            except ValueError:
                value = data
        events.append({"event": name, "data": value, "comments": comments})
        comments = []
    return events
