"""The OpenAI chat flavour over real HTTP, against a server that sends crafted SSE bytes."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import orjson
from aiohttp import web

from replay.clients.client import make_client
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.clients.transport import Transport
from replay.records.run_file import RequestRecord
from replay.workload.trajectory import Message
from tests.support.servers import serve_chat

MSG = Message(raw={"role": "user", "content": "hi"}, wire=b'{"role":"user","content":"hi"}', tokens=5)


def chunk(delta: dict | None = None, finish: str | None = None, **extra) -> bytes:
    obj = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    obj.update(extra)
    return b"data: " + orjson.dumps(obj) + b"\n\n"


USAGE = (
    b"data: "
    + orjson.dumps(
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 120,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 96},
                "completion_tokens_details": {"reasoning_tokens": 2},
            },
        }
    )
    + b"\n\n"
)


async def call(
    base_url: str, options: RequestOptions | None = None, host: HostConfig | None = None, max_tokens: int = 5
) -> RequestRecord:
    options = options or RequestOptions(model="m")
    host = host or HostConfig(base_url, "m")
    rec = RequestRecord(id="req-1", session=0, task=0, trajectory="t", turn=0)
    async with Transport(host) as transport:
        client = make_client(host, options, transport)
        await client.call(client.render([MSG], max_tokens, None), rec)
    return rec


async def test_reasoning_then_answer_with_keepalives_and_usage_only_chunk(crafted_server) -> None:
    parts = [
        b": keep-alive\n\n",
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "think"}),
        b": OPENROUTER PROCESSING\n\n",
        chunk({"reasoning": "more"}),
        chunk({"content": "ans"}),
        chunk({"content": "wer"}) + chunk({"content": "!"}),  # two events in one write
        chunk({}, finish="stop"),
        USAGE,
        b"data: [DONE]\n\n",
    ]
    url, runner = await crafted_server(parts)
    try:
        rec = await call(url)
    finally:
        await runner.cleanup()
    assert rec.error is None, rec.error_detail
    assert rec.status == 200
    assert rec.output_events == 5  # 2 reasoning + 3 answer; role-only and finish chunks carry no tokens
    assert (rec.prompt_tokens, rec.cached_tokens, rec.output_tokens, rec.reasoning_tokens) == (120, 96, 5, 2)
    assert rec.finish_reason == "stop"
    assert rec.t_sent <= rec.t_headers <= rec.t_first_token <= rec.t_first_answer <= rec.t_last_token <= rec.t_done
    assert sum(rec.chunks[1::2]) == 5


async def test_tool_call_argument_deltas_count_as_answer_tokens(crafted_server) -> None:
    tc = [{"index": 0, "id": "c1", "type": "function", "function": {"name": "bash", "arguments": ""}}]
    parts = [
        chunk({"role": "assistant", "content": None, "tool_calls": tc}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"cmd":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"ls"}'}}]}),
        chunk({}, finish="tool_calls"),
        b"data: [DONE]\n\n",
    ]
    url, runner = await crafted_server(parts)
    try:
        rec = await call(url)
    finally:
        await runner.cleanup()
    assert rec.error is None
    assert rec.output_events == 3
    assert rec.t_first_answer == rec.t_first_token
    assert rec.output_tokens is None  # no usage sent: absent, not zero
    assert rec.finish_reason == "tool_calls"


async def test_error_frame_mid_stream_is_a_stream_error(crafted_server) -> None:
    parts = [chunk({"content": "a"}), b'data: {"error": {"message": "overloaded", "type": "server_error"}}\n\n']
    url, runner = await crafted_server(parts)
    try:
        rec = await call(url)
    finally:
        await runner.cleanup()
    assert rec.error == "stream_error"
    assert "overloaded" in rec.error_detail
    assert rec.output_events == 1


async def test_stream_cut_without_usage_or_done_is_incomplete(crafted_server) -> None:
    url, runner = await crafted_server([chunk({"content": "a"}), b'data: {"choices": [{"delta": {"con'])
    try:
        rec = await call(url)
    finally:
        await runner.cleanup()
    assert rec.error == "incomplete"
    assert "trailing bytes" in rec.error_detail


async def test_http_429_is_classified(crafted_server) -> None:
    url, runner = await crafted_server([b'{"error": {"message": "rate limited"}}'], status=429)
    try:
        rec = await call(url)
    finally:
        await runner.cleanup()
    assert rec.error == "http_429"
    assert rec.status == 429
    assert "rate limited" in rec.error_detail


async def test_request_carries_id_usage_option_max_tokens_and_forced_length(crafted_server, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    seen: list = []
    url, runner = await crafted_server([chunk({"content": "a"}), USAGE], seen=seen)
    try:
        await call(url, RequestOptions(model="m", force_output_length=True, extra_body={"temperature": 0}))
    finally:
        await runner.cleanup()
    headers, body = seen[0]
    assert headers["X-Request-Id"] == "req-1"
    assert headers["Authorization"] == "Bearer sk-test-secret"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 5 and body["min_tokens"] == 5 and body["ignore_eos"] is True
    assert body["temperature"] == 0
    assert body["messages"] == [{"role": "user", "content": "hi"}]


async def test_connection_refused_is_a_connect_error() -> None:
    rec = await call("http://127.0.0.1:9/v1")
    assert rec.error == "connect"


def test_read_by_read_summary_equals_the_event_by_event_one() -> None:
    """The byte-count fast paths must give exactly what decoding every event gives, for any read boundaries."""
    import random

    from replay.clients.flavours.chat import ChatFlavour
    from replay.clients.stream import interpret

    flavour = ChatFlavour(RequestOptions(model="m"))
    stream = b"".join(
        [
            b": keep-alive\n\n",
            chunk({"role": "assistant", "content": ""}),
            *(chunk({"reasoning_content": f"r{i}"}) for i in range(5)),
            *(chunk({"content": f" tok{i}: x"}) for i in range(40)),  # ': ' inside values
            b"data:" + chunk({"content": "no-space"})[6:],  # valid SSE without the space
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
            *(chunk({"content": f"data: {i}"}) for i in range(5)),  # 'data: ' inside values
            chunk({}, finish="stop"),
            USAGE,
            b"data: [DONE]\n\n",
        ]
    )
    rng = random.Random(1)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 60)))
        reads = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        times = [float(i) for i in range(len(reads))]
        fast = interpret(flavour, reads, times, 0.0)
        slow = interpret(flavour, reads, times, 0.0, collect=True)  # every event decoded
        assert (fast.events, fast.first_token, fast.first_answer, fast.last_token) == (
            slow.events, slow.first_token, slow.first_answer, slow.last_token
        )  # fmt: skip
        assert fast.chunks == slow.chunks and fast.usage == slow.usage and fast.ended == slow.ended
        assert fast.finish_reason == slow.finish_reason and fast.malformed is None is slow.malformed
        assert fast.events == 5 + 40 + 1 + 1 + 5


async def test_a_long_stream_of_small_writes_is_read_to_the_end(crafted_server) -> None:
    # The client reads a body only when it ends (wire_stamps keeps the pieces as they come); aiohttp would
    # pause reading an unread body past 4,096 HTTP chunks or 128 KiB, and the call would hang until the whole
    # call's timeout (a paused read has no stall timeout). 6,000 one-token writes of about 80 bytes cross both.
    n = 6000
    parts = [chunk({"content": "x"}) for _ in range(n)] + [chunk({}, finish="length"), b"data: [DONE]\n\n"]
    url, runner = await crafted_server(parts)
    try:
        rec = await call(url, host=HostConfig(url, "m", request_timeout_s=20.0, stall_timeout_s=5.0), max_tokens=n)
    finally:
        await runner.cleanup()
    assert rec.error is None, rec.error_detail
    assert rec.output_events == n and sum(rec.chunks[1::2]) == n


async def test_without_the_capture_hook_the_stream_is_still_read_whole(crafted_server, monkeypatch) -> None:
    # If aiohttp stops passing bytes through StreamReader.feed_data (a future version), the capture does not
    # account for the body: the call keeps what arrived and the client reads piece by piece from then on.
    from replay.clients import wire_stamps

    parts = [chunk({"role": "assistant", "content": ""}), *(chunk({"content": "t"}) for _ in range(5))]
    parts += [chunk({}, finish="stop"), USAGE, b"data: [DONE]\n\n"]
    url, runner = await crafted_server(parts)
    monkeypatch.setattr(wire_stamps, "take", lambda reader: None)
    host = HostConfig(url, "m")
    recs = [RequestRecord(id=f"r{i}", session=0, task=0, trajectory="t", turn=i) for i in range(2)]
    try:
        async with Transport(host) as transport:
            client = make_client(host, RequestOptions(model="m"), transport)
            body = client.render([MSG], 5, None)
            await client.call(body, recs[0])
            assert transport._captured is False
            await client.call(body, recs[1])
    finally:
        await runner.cleanup()
    for rec in recs:
        assert rec.error is None, rec.error_detail
        assert rec.output_events == 5 and rec.output_tokens == 5 and rec.cached_tokens == 96


async def test_the_clock_starts_when_the_request_bytes_leave(crafted_server) -> None:

    url, runner = await crafted_server([chunk({"content": "a"}), chunk({}, finish="stop"), b"data: [DONE]\n\n"])
    host = HostConfig(url, "m")
    traced = RequestRecord(id="traced", session=0, task=0, trajectory="t", turn=0)
    plain = RequestRecord(id="plain", session=0, task=0, trajectory="t", turn=0)
    try:
        async with Transport(host) as transport:
            client = make_client(host, RequestOptions(model="m"), transport)
            body = client.render([MSG], 1, None)
            await client.call(body, traced)
            await transport.http.close()
            transport.http = aiohttp.ClientSession()  # no trace: the clock starts just before the call is made
            await client.call(body, plain)
    finally:
        await runner.cleanup()
    # With the trace, t_sent comes after opening the connection (this session had none open) and before the
    # answer; without it, t_sent is taken right after t_call.
    assert traced.t_call < traced.t_sent < traced.t_headers <= traced.t_first_token
    assert plain.t_call <= plain.t_sent < plain.t_headers
    assert traced.error is None and plain.error is None


async def test_a_stream_that_never_ends_times_out_with_what_came_kept() -> None:
    # aiohttp's total timeout does not cover waiting for the end of the body; the client's own deadline does.
    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(chunk({"content": "a"}) + chunk({"content": "b"}))
        with contextlib.suppress(ConnectionError):
            while True:  # keep-alive comments: never silent long enough for the stall timeout
                await asyncio.sleep(0.05)
                await resp.write(b": ping\n\n")
        return resp

    url, runner = await serve_chat(handler)
    try:
        rec = await call(url, host=HostConfig(url, "m", request_timeout_s=0.5, stall_timeout_s=5.0))
    finally:
        await runner.cleanup()
    assert rec.error == "timeout"
    assert rec.output_events == 2 and rec.t_first_token is not None
    assert 0.5 <= rec.t_done - rec.t_call < 2.0


async def test_an_answer_past_the_limit_is_cut_classified_and_its_connection_closed() -> None:
    """The body is cut where it enters the client: the call fails as response_too_large with what came kept, and
    the host sees the connection close long before it has written its 64 MB."""
    piece = chunk({"content": "x" * 60_000})
    written: list[int] = []
    closed = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        try:
            for _ in range(1000):
                await resp.write(piece)
                written.append(len(piece))
        except (ConnectionError, RuntimeError):
            closed.set()
        return resp

    url, runner = await serve_chat(handler)
    try:
        rec = await call(url, host=HostConfig(url, "m", max_response_bytes=1_000_000))
        await asyncio.wait_for(closed.wait(), 10)
    finally:
        await runner.cleanup()
    assert rec.error == "response_too_large" and "1,000,000" in rec.error_detail
    assert 1 <= rec.output_events <= 1_000_000 // len(piece)  # what came before the limit was read
    assert sum(written) < 20_000_000  # the host stopped: the client closed the connection at the cut


def vllm_usage(prompt: int, cached: int, created: int, output: int) -> bytes:
    """vLLM 0.32's last chunk with --enable-prompt-tokens-details (as it streamed here)."""
    usage = {"prompt_tokens": prompt, "total_tokens": prompt + output, "completion_tokens": output,
             "prompt_tokens_details": {"cached_tokens": cached, "created_cache_tokens": created}}  # fmt: skip
    return b"data: " + orjson.dumps({"object": "chat.completion.chunk", "choices": [], "usage": usage}) + b"\n\n"


async def test_vllms_created_cache_tokens_are_cache_write_tokens(crafted_server) -> None:
    parts = [chunk({"role": "assistant", "content": ""}), chunk({"content": " a"}), chunk({"content": " b"}, "length"),
             vllm_usage(1661, 0, 1536, 2), b"data: [DONE]\n\n"]  # fmt: skip
    url, runner = await crafted_server(parts)
    try:
        rec = await call(url, max_tokens=2)
    finally:
        await runner.cleanup()
    assert rec.error is None
    assert (rec.prompt_tokens, rec.cached_tokens, rec.cache_write_tokens, rec.output_tokens) == (1661, 0, 1536, 2)


async def test_an_answer_the_host_counts_but_sends_no_text_of_is_no_error(crafted_server) -> None:
    """Only empty-text chunks, while the host reports 2 output tokens (llama-server holds back an unfinished UTF-8
    character; vLLM was seen doing the same): the call succeeded, its answer is empty (answer checks say so)."""
    parts = [chunk({"role": "assistant", "content": ""}), chunk({"content": ""}), chunk({"content": ""}, "length"),
             vllm_usage(40, 0, 0, 2), b"data: [DONE]\n\n"]  # fmt: skip
    url, runner = await crafted_server(parts)
    try:
        rec = await call(url, max_tokens=2)
    finally:
        await runner.cleanup()
    assert rec.error is None, (rec.error, rec.error_detail)
    assert rec.output_tokens == 2 and rec.output_events == 0 and rec.t_first_token is None


async def test_a_stream_without_tokens_or_a_count_of_them_is_empty(crafted_server) -> None:
    parts = [
        chunk({"role": "assistant", "content": ""}),
        chunk({}, "stop"),
        vllm_usage(40, 0, 0, 0),
        b"data: [DONE]\n\n",
    ]
    url, runner = await crafted_server(parts)
    try:
        rec = await call(url, max_tokens=2)
    finally:
        await runner.cleanup()
    assert rec.error == "empty"
