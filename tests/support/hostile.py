"""A host on 127.0.0.1 that answers as a test tells it to, in a thread of its own (so the client under test may be
this process's ``replay.run`` or another process), and streams in each API flavour's shape."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import orjson
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions", "responses": "/v1/responses",
         "anthropic": "/v1/messages"}  # fmt: skip


@contextlib.contextmanager
def threaded_host(routes: dict[str, Handler], models: bool = True) -> Iterator[str]:
    """Serve ``routes`` (POST paths, or ``GET /path`` keys) in a thread; yields the base URL (``.../v1``); the
    server is stopped on every way out."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    state: dict[str, Any] = {}

    async def listed(request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    async def start() -> None:
        app = web.Application()
        for path, handler in routes.items():
            if path.startswith("GET "):
                app.router.add_get(path[4:], handler)
            else:
                app.router.add_post(path, handler)
        if models and "GET /v1/models" not in routes:
            app.router.add_get("/v1/models", listed)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["runner"], state["port"] = runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        started.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    thread.start()
    try:
        assert started.wait(10), "the test host did not start"
        yield f"http://127.0.0.1:{state['port']}/v1"
    finally:
        if "runner" in state:
            asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def streaming(parts: Callable[[web.Request], list[bytes]] | list[bytes], headers: dict[str, str] | None = None
              ) -> Handler:  # fmt: skip
    """A handler that streams ``parts`` (or what ``parts(request)`` gives) as one SSE answer."""

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", **(headers or {})})
        await resp.prepare(request)
        for part in parts(request) if callable(parts) else parts:
            await resp.write(part)
        await resp.write_eof()
        return resp

    return handler


def sse(obj: Any, name: str | None = None) -> bytes:
    head = f"event: {name}\n".encode() if name else b""
    return head + b"data: " + (obj if isinstance(obj, bytes) else orjson.dumps(obj)) + b"\n\n"


def answer(api: str, tokens: int = 3, usage: dict[str, Any] | None = None, extra: dict[str, Any] | None = None
           ) -> list[bytes]:  # fmt: skip
    """A whole, ordinary answer in ``api``'s shape: ``tokens`` text deltas, the finish, the usage (``usage``'s fields
    over plausible ones) and the end; ``extra``: top-level fields of the finish chunk (chat and completions)."""
    if api in ("chat", "completions"):
        key = {"delta": {"content": "x"}} if api == "chat" else {"text": "x"}
        done = {"delta": {}} if api == "chat" else {"text": ""}
        u = {"prompt_tokens": 9, "completion_tokens": tokens, **(usage or {})}
        return [*(sse({"choices": [{"index": 0, **key, "finish_reason": None}]}) for _ in range(tokens)),
                sse({"choices": [{"index": 0, **done, "finish_reason": "stop"}], **(extra or {})}),
                sse({"choices": [], "usage": u}), b"data: [DONE]\n\n"]  # fmt: skip
    if api == "responses":
        delta = {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "delta": "x"}
        u = {"input_tokens": 9, "output_tokens": tokens, **(usage or {})}
        done = {"type": "response.completed", "response": {"id": "r", "usage": u}}
        return [*(sse(delta, delta["type"]) for _ in range(tokens)), sse(done, done["type"])]
    start = {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 9, "output_tokens": 1}}}
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}
    end = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": tokens,
                                                                                     **(usage or {})}}  # fmt: skip
    return [sse(start, start["type"]), *(sse(delta, delta["type"]) for _ in range(tokens)), sse(end, end["type"]),
            sse({"type": "message_stop"}, "message_stop")]  # fmt: skip


RawHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.contextmanager
def raw_host(handler: RawHandler) -> Iterator[str]:
    """A TCP server that speaks whatever bytes ``handler`` writes (malformed HTTP included), in a thread of its own;
    yields its base URL (``.../v1``); stopped on every way out."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    state: dict[str, Any] = {}

    async def guarded(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await handler(r, w)
        with contextlib.suppress(Exception):
            w.close()

    async def start() -> None:
        server = await asyncio.start_server(guarded, "127.0.0.1", 0)
        state["server"], state["port"] = server, server.sockets[0].getsockname()[1]
        started.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    thread.start()
    try:
        assert started.wait(10), "the test host did not start"
        yield f"http://127.0.0.1:{state['port']}/v1"
    finally:
        if "server" in state:
            loop.call_soon_threadsafe(state["server"].close)

            async def cancel_all() -> None:
                for task in asyncio.all_tasks():
                    if task is not asyncio.current_task():
                        task.cancel()

            asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


async def read_request(r: asyncio.StreamReader) -> bytes:
    """One HTTP request's head and body (by its Content-Length), as a raw handler reads it."""
    head = await r.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + await r.readexactly(length)
