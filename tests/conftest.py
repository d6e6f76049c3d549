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
    engine and are few. ``-m vllm`` (CI's vLLM step) is such a run too: it ran on four workers, each starting a vLLM
    of its own beside the others' calls, and the twin test, which times its engine, found it too uneven to fit."""
    return 0 if engine_run(config.getoption("markexpr") or "") else 2 * (os.cpu_count() or 1)


def engine_run(marks: str) -> bool:
    """Whether ``-m MARKS`` selects real-engine tests (``engine``, or ``vllm``, whose tests are all engine tests)."""
    return any(name in marks and f"not {name}" not in marks for name in ("engine", "vllm"))
