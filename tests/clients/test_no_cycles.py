"""A call leaves nothing for the cyclic collector, on every path: a complete stream in each API flavour and over
WebSocket, every error class, a timeout (no new bytes, or the call's deadline), a cancel, a retry and a session's
end, and a worker's records on their way to the parent.

Each test runs a few calls first (lazy imports, pools, caches), then its calls with the collector off and
``gc.DEBUG_SAVEALL`` on: what ``gc.collect()`` then finds unreachable is what only the cyclic collector could have
freed, and a failure names its types. The host is the simulated one in a process of its own, so its objects are
never counted here.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import socket
import types
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from replay import event_loop
from replay.cli import main
from replay.clients.client import HostClient, make_client
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.clients.transport import Transport
from replay.records.run_file import RequestRecord
from replay.scale.channel import Outbox, open_channel
from replay.workload.trajectory import Message
from tests.support.sim_process import sim_process

MSG = Message(raw={"role": "user", "content": "hi"}, wire=b'{"role":"user","content":"hi"}', tokens=5)
FAULTS = "429:0.15,500:0.1,drop:0.15,midstream:0.15,malformed:0.1,odd_chunk:0.05,bad_usage:0.1,overflow:0.05"
CALLS = 24


def _name(o: object) -> str:
    if isinstance(o, types.FrameType):
        return f"frame {o.f_code.co_name} ({'/'.join(o.f_code.co_filename.split('/')[-3:])})"
    if isinstance(o, types.FunctionType | types.CoroutineType):
        return f"{type(o).__name__} {o.__qualname__}"
    return f"{type(o).__module__}.{type(o).__qualname__}"


class Leftovers:
    """What ``gc.collect()`` found unreachable after the calls, by type (empty: the calls left no cycle)."""

    def __init__(self) -> None:
        self.found: collections.Counter[str] = collections.Counter()

    def __enter__(self) -> Leftovers:
        gc.collect()
        self._was = gc.isenabled()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            gc.collect()
            self.found.update(_name(o) for o in gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            if self._was:
                gc.enable()

    def __str__(self) -> str:
        return f"{sum(self.found.values())} objects only the cyclic collector frees: {self.found.most_common(12)}"


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    with sim_process("--profile", "instant") as (url, _):
        yield url


@pytest.fixture(scope="module")
def faulty() -> Iterator[str]:
    with sim_process("--profile", "instant", "--faults", FAULTS, "--fault-seed", "5") as (url, _):
        yield url


@pytest.fixture(scope="module")
def stalling() -> Iterator[str]:
    with sim_process("--profile", "instant", "--faults", "stall:1@5") as (url, _):
        yield url


def _host(url: str, api: str, transport: str = "http", **limits: Any) -> HostConfig:
    return HostConfig(url, "m", api=api, transport=transport, **limits)


def _call(client: HostClient, i: int) -> tuple[RequestRecord, Awaitable[Any]]:
    rec = RequestRecord(id=f"req-{i}", session=i, task=0, trajectory="t", turn=0)
    rec.max_tokens = 20
    conversation = client.new_conversation()
    body = client.render([MSG], 20, None, conversation)
    return rec, client.call(body, rec, conversation, [MSG])


async def _calls(client: HostClient, first: int, n: int) -> list[RequestRecord]:
    pairs = [_call(client, first + i) for i in range(n)]
    await asyncio.gather(*(call for _, call in pairs))
    return [rec for rec, _ in pairs]


async def _cancelled(client: HostClient, first: int, n: int) -> list[RequestRecord]:
    """Calls cancelled (as Ctrl-C stops a run) once each has its headers: the host holds every answer mid-way."""
    pairs = [_call(client, first + i) for i in range(n)]
    tasks = [asyncio.ensure_future(call) for _, call in pairs]
    while not all(rec.t_headers is not None or task.done() for (rec, _), task in zip(pairs, tasks, strict=True)):
        await asyncio.sleep(0.01)  # polled: the condition is the host's headers, not a time
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return [rec for rec, _ in pairs]


Calls = Callable[[HostClient, int, int], Awaitable[list[RequestRecord]]]


def measured(host: HostConfig, calls: Calls = _calls, n: int = CALLS) -> tuple[list[RequestRecord], Leftovers]:
    """``n`` calls of ``calls`` on the loop replay runs on, after two that warm the client up."""

    async def go() -> tuple[list[RequestRecord], Leftovers]:
        async with Transport(host) as transport:
            client = make_client(host, RequestOptions(model="m", transport=host.transport), transport)
            await calls(client, 1000, 2)
            with Leftovers() as left:
                recs = await calls(client, 0, n)
        return recs, left

    return event_loop.run(go())


@pytest.mark.parametrize("api,transport", [("chat", "http"), ("completions", "http"), ("responses", "http"),
                                           ("anthropic", "http"), ("responses", "websocket")])  # fmt: skip
def test_a_complete_stream_leaves_no_cycle(sim: str, api: str, transport: str) -> None:
    recs, left = measured(_host(sim, api, transport))
    assert [r.error for r in recs] == [None] * CALLS and all(r.output_tokens for r in recs)
    assert not left.found, str(left)


@pytest.mark.parametrize("api,transport", [("chat", "http"), ("anthropic", "http"), ("responses", "websocket")])
def test_every_error_class_leaves_no_cycle(faulty: str, api: str, transport: str) -> None:
    recs, left = measured(_host(faulty, api, transport), n=80)  # each class drawn at 10 % or more: all of them
    seen = {r.error for r in recs}
    assert {"disconnect", "stream_error", "malformed_stream", "bad_usage", "http_5xx"} <= seen, seen
    assert not left.found, str(left)


def test_a_refused_connection_and_a_body_cut_at_its_limit_leave_no_cycle(sim: str) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    recs, left = measured(_host(closed, "chat"))
    assert {r.error for r in recs} == {"connect"} and not left.found, str(left)
    recs, left = measured(_host(sim, "chat", max_response_bytes=300))
    assert {r.error for r in recs} == {"response_too_large"} and not left.found, str(left)


@pytest.mark.parametrize("transport", ["http", "websocket"])
@pytest.mark.parametrize("which", ["stall", "deadline"])
def test_a_timeout_leaves_no_cycle(stalling: str, transport: str, which: str) -> None:
    limits = {"stall_timeout_s": 0.3} if which == "stall" else {"stall_timeout_s": 30.0, "request_timeout_s": 0.3}
    recs, left = measured(_host(stalling, "responses", transport, **limits), n=8)
    assert {r.error for r in recs} == {"timeout"}
    assert all(("--stall-timeout" if which == "stall" else "--request-timeout") in (r.error_detail or "")
               for r in recs)  # fmt: skip
    assert not left.found, str(left)


@pytest.mark.parametrize("api,transport", [("chat", "http"), ("responses", "websocket")])
def test_a_cancelled_call_leaves_no_cycle(stalling: str, api: str, transport: str) -> None:
    recs, left = measured(_host(stalling, api, transport), _cancelled, n=8)
    assert all(r.t_headers is not None and r.t_done is not None for r in recs)  # cancelled mid-answer
    assert not left.found, str(left)


# What a run makes once (its tallies, the live state, the pools, click's context) may be cyclic and freed at its end;
# what a call makes must not be: the kinds a call makes are counted, and must not grow with the run's calls.
_PER_CALL = ("replay.clients.", "replay.sessions.", "replay.records.", "replay.scale.", "aiohttp.", "multidict.",
             "_asyncio.", "uvloop.", "_contextvars.", "coroutine ", "function ", "builtins.traceback")  # fmt: skip
_PER_CALL_CODE = ("replay/clients/", "replay/sessions/", "replay/scale/", "aiohttp/")


def _run(*args: str) -> dict[str, Any]:
    res = CliRunner().invoke(main, ["run", "--tool-time", "none", "--sim-profile", "instant", "-q", "--json", *args])
    assert res.stdout.startswith("{"), res.output  # (a run with failed calls exits 2: its summary is still read)
    return orjson.loads(res.stdout)


def _per_call(left: Leftovers) -> dict[str, int]:
    return {k: v for k, v in left.found.items()
            if k.startswith(_PER_CALL) or (k.startswith("frame ") and any(c in k for c in _PER_CALL_CODE))}  # fmt: skip


def test_retries_and_sessions_ends_leave_no_cycle(tmp_path) -> None:
    def args(tasks: int) -> tuple[str, ...]:
        return ("--tasks", str(tasks), "-c", "4", "--sim-faults", "429:0.2,drop:0.1", "--sim-fault-seed", "3",
                "--retries", "3", "--retry-max-wait", "0", "--out", str(tmp_path / "run.jsonl"))  # fmt: skip

    _run(*args(4))
    left, calls = {}, {}
    for tasks in (4, 12):
        with Leftovers() as left[tasks]:
            summary = _run(*args(tasks))
        assert summary["errors_by_class"].get("http_429") and summary["totals"]["ok"] > 10 * tasks  # retried on
        calls[tasks] = summary["requests"]
    # a cycle per call leaves at least one object per call; what a run makes once varies by a few (a thread's hook)
    more = calls[12] - calls[4]
    small, big = _per_call(left[4]), _per_call(left[12])
    grew = {k: (small.get(k, 0), n) for k, n in big.items() if n - small.get(k, 0) >= more // 4}
    assert more > 100 and not grew, f"grew with {more} more calls: {grew}; with 12 tasks: {left[12]}"


def test_a_workers_records_on_their_way_to_the_parent_leave_no_cycle() -> None:
    """A worker's record lines through its Outbox and the link's two Channels (``replay.scale.channel``), batched
    and framed as a sharded run sends them. (No cycle was found on this path: the test keeps it so.)"""

    async def go() -> tuple[int, Leftovers]:
        got: list[Any] = []
        enough = asyncio.Event()
        want = [10]

        def on_frame(messages: list[Any]) -> None:
            got.extend(messages)
            if len(got) >= want[0]:
                enough.set()

        a, b = socket.socketpair()
        sender = await open_channel(a, lambda _m: None, lambda: None)
        reader = await open_channel(b, on_frame, lambda: None)
        box = Outbox(sender, batch_s=0.001, batch_max=64)
        line = b'{"type":"request","id":"req-1","ttft_s":0.1}'
        try:
            for _ in range(10):
                box.put(("line", 1, line))
            await enough.wait()
            enough.clear()
            with Leftovers() as left:
                want[0] += 3000
                for i in range(3000):
                    box.put(("line", 1, line))
                    if i % 100 == 0:
                        await asyncio.sleep(0)  # a turn of the loop: batches go out as a worker's do
                box.flush()
                await enough.wait()
        finally:
            await sender.close()
            await asyncio.wait_for(reader.closed, 5)
        return len(got), left

    n, left = event_loop.run(go())
    assert n == 3010 and not left.found, str(left)
