"""A crafted-SSE HTTP server on 127.0.0.1, and an SSE reader of the tests' own."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web


async def serve_route(method: str, path: str, handler: Callable[[web.Request], Any]) -> tuple[str, web.AppRunner]:
    """Serve ``handler`` for ``method path`` on 127.0.0.1 (an ephemeral port): its origin and the runner, which the
    caller cleans up."""
    app = web.Application()
    app.router.add_route(method, path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return f"http://127.0.0.1:{port}", runner


async def serve_chat(handler: Callable[[web.Request], Any]) -> tuple[str, web.AppRunner]:
    """Serve ``handler`` at /v1/chat/completions on 127.0.0.1 (an ephemeral port); the caller cleans up."""
    origin, runner = await serve_route("POST", "/v1/chat/completions", handler)
    return origin + "/v1", runner


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
