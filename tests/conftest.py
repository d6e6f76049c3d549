"""Shared fixtures. Helpers the tests import live in tests/support/, not here."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable

import orjson
import pytest
from aiohttp import web

from tests.support.servers import serve_chat


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


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto`` (pyproject's addopts): two per core, as most tests wait on real time (runs against a
    simulated host, pauses, subprocesses) rather than compute; none for the real-engine tests, which time a shared
    engine and are few."""
    marks = config.getoption("markexpr") or ""
    if "engine" in marks and "not engine" not in marks:
        return 0
    return 2 * (os.cpu_count() or 1)
