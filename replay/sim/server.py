"""HTTP face of the simulated host: OpenAI chat completions over aiohttp, plus the entry points.

``serve()`` runs it as a process (``replay run`` starts one and reads the READY line for the port);
``start_sim()`` runs it inside the caller's event loop for tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from replay.sim.engine import SimEngine, SimRequest
from replay.sim.profiles import SimProfile, get_profile
from replay.sim.prompt import PromptTokenizer
from replay.sim.truth import TruthLog, TruthRecord
from replay.sim.wire import ChatStream, completion_body, error_body, usage

MODEL_ID = "replay-sim"  # listed by /v1/models; any requested model name is accepted and echoed
DEFAULT_MAX_TOKENS = 256
_MAX_BODY_BYTES = 256 * 1024 * 1024  # long agent contexts are megabytes of JSON
_SHUTDOWN_GRACE_S = 0.5  # for requests that slip in on a kept-alive connection while stopping


@dataclass(slots=True)
class _Sim:
    """What the handlers share."""

    engine: SimEngine
    prompts: PromptTokenizer
    truth: TruthLog
    inflight: set[asyncio.Task[Any]] = field(default_factory=set)  # chat handlers, cancelled on stop


_SIM = web.AppKey("sim", _Sim)


class _BadRequest(Exception):
    """The request body is not a chat request the sim can serve."""


@dataclass(slots=True)
class _ChatRequest:
    messages: list[Any]
    model: str
    max_tokens: int
    stream: bool
    include_usage: bool


def _parse(raw: bytes) -> _ChatRequest:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _BadRequest(f"body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise _BadRequest("body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _BadRequest("'messages' must be a non-empty list")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS
    elif not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise _BadRequest("'max_tokens' must be an integer >= 1")
    model = body.get("model")
    stream = body.get("stream") is True
    options = body.get("stream_options")
    return _ChatRequest(
        messages=messages,
        model=model if isinstance(model, str) and model else MODEL_ID,
        max_tokens=max_tokens,
        stream=stream,
        include_usage=stream and isinstance(options, dict) and options.get("include_usage") is True,
    )


async def _chat_completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/chat/completions: plan the request in the engine, then stream or return it."""
    sim = request.app[_SIM]
    record = TruthRecord(request.headers.get("X-Request-Id") or uuid.uuid4().hex, time.perf_counter())
    headers = {"X-Request-Id": record.request_id}
    task = asyncio.current_task()
    assert task is not None
    sim.inflight.add(task)
    try:
        try:
            chat = _parse(await request.read())
            prompt_ids = await sim.prompts.prompt_ids(chat.messages)
        except (_BadRequest, ValueError) as exc:
            record.status = "bad_request"
            record.done = time.perf_counter()
            return web.Response(status=400, body=error_body(str(exc)), content_type="application/json", headers=headers)
        plan = sim.engine.submit(prompt_ids, chat.max_tokens)
        record.prompt_tokens, record.cached_tokens = plan.prompt_tokens, plan.cached_tokens
        record.prefill_start, record.prefill_end = plan.prefill_start, plan.prefill_end
        record.reasoning_tokens = plan.reasoning_tokens  # clamped to what was sent, below
        send = _stream if chat.stream else _complete
        return await send(request, sim.engine, plan, chat, record, headers)
    except asyncio.CancelledError:
        record.status = "cancelled"
        raise
    finally:
        sim.inflight.discard(task)
        record.reasoning_tokens = min(record.reasoning_tokens, record.output_tokens)  # reasoning goes first
        sim.truth.append(record)


async def _stream(
    request: web.Request,
    engine: SimEngine,
    plan: SimRequest,
    chat: _ChatRequest,
    record: TruthRecord,
    headers: dict[str, str],
) -> web.StreamResponse:
    """SSE answer: headers now, tokens as the engine releases them, several due at once in one write."""
    response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    events = ChatStream(f"chatcmpl-{record.request_id}", chat.model, int(time.time()))
    try:
        await response.prepare(request)
        pending = events.role()  # goes out with the first token, as vLLM sends it
        sent = 0
        async with contextlib.aclosing(engine.token_batches(plan)) as batches:
            async for count in batches:
                data = pending + events.tokens(sent, count, plan.reasoning_tokens)
                t = time.perf_counter()
                await response.write(data)
                record.wrote(t, count)
                sent += count
                pending = b""
        final = (
            usage(plan.prompt_tokens, plan.cached_tokens, sent, plan.reasoning_tokens) if chat.include_usage else None
        )
        t = time.perf_counter()
        await response.write(events.finish(final))
        record.done = t
        await response.write_eof()
    except ConnectionResetError:  # the client went away; aiohttp's finish_response tolerates that
        record.status = "disconnected"
    return response


async def _complete(
    request: web.Request,
    engine: SimEngine,
    plan: SimRequest,
    chat: _ChatRequest,
    record: TruthRecord,
    headers: dict[str, str],
) -> web.StreamResponse:
    """Non-streamed answer: the whole body in one write once the last token is due."""
    async with contextlib.aclosing(engine.token_batches(plan)) as batches:
        async for _ in batches:
            pass
    n = plan.output_tokens
    body = completion_body(
        f"chatcmpl-{record.request_id}",
        chat.model,
        int(time.time()),
        n,
        plan.reasoning_tokens,
        usage(plan.prompt_tokens, plan.cached_tokens, n, plan.reasoning_tokens),
    )
    response = web.Response(body=body, content_type="application/json", headers=headers)
    try:
        t = time.perf_counter()
        await response.prepare(request)
        await response.write_eof()
        record.wrote(t, n)
        record.done = t
    except ConnectionResetError:
        record.status = "disconnected"
    return response


async def _models(request: web.Request) -> web.Response:
    """GET /v1/models: one model; chat requests may name any model."""
    model = {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "replay"}
    return web.json_response({"object": "list", "data": [model]})


async def _health(request: web.Request) -> web.Response:
    """GET /health."""
    return web.json_response({"status": "ok", "profile": request.app[_SIM].engine.profile.name})


def make_app(profile: SimProfile, truth: TruthLog, prompts: PromptTokenizer | None = None) -> web.Application:
    """The aiohttp application of the sim with ``profile`` timing, logging to ``truth``."""
    app = web.Application(client_max_size=_MAX_BODY_BYTES)
    app[_SIM] = _Sim(SimEngine(profile), prompts or PromptTokenizer(), truth)
    app.router.add_post("/v1/chat/completions", _chat_completions)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/health", _health)
    return app


@dataclass(slots=True)
class SimHandle:
    """A sim running in the current event loop."""

    host: str
    port: int
    engine: SimEngine
    truth_log: TruthLog
    _sim: _Sim
    _runner: web.AppRunner

    @property
    def base_url(self) -> str:
        """OpenAI base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def truth(self) -> list[dict[str, Any]]:
        """Truth records of the requests finished so far (empty if started with keep_truth=False)."""
        return self.truth_log.records if self.truth_log.records is not None else []

    async def wait_truth(self, count: int) -> list[dict[str, Any]]:
        """The truth records once ``count`` requests have finished on the server side."""
        await self.truth_log.wait_for(count)
        return self.truth

    async def stop(self) -> None:
        """Cut in-flight requests (each logs a ``cancelled`` truth line), stop serving, close the log."""
        inflight = list(self._sim.inflight)
        for task in inflight:
            task.cancel()
        await asyncio.gather(*inflight, return_exceptions=True)
        await self._runner.cleanup()
        self.truth_log.close()

    async def __aenter__(self) -> SimHandle:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def start_sim(
    profile: str | SimProfile = "default",
    truth_log: str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    keep_truth: bool = True,
) -> SimHandle:
    """Start the sim in the running loop (port 0: an ephemeral port) and return once it listens."""
    sim_profile = get_profile(profile) if isinstance(profile, str) else profile
    truth = TruthLog(truth_log, keep=keep_truth)
    app = make_app(sim_profile, truth)  # loads the tokenizer now, not on the first request
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_GRACE_S)
    await runner.setup()
    await web.TCPSite(runner, host, port, backlog=1024).start()
    sim = app[_SIM]
    return SimHandle(host, runner.addresses[0][1], sim.engine, truth, sim, runner)


async def _serve(host: str, port: int, profile: str, truth_log: str | None) -> None:
    handle = await start_sim(profile, truth_log, host=host, port=port, keep_truth=False)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"REPLAY_SIM_READY port={handle.port}", flush=True)
    try:
        await stop.wait()
    finally:
        await handle.stop()


def serve(host: str = "127.0.0.1", port: int = 0, profile: str = "default", truth_log: str | None = None) -> None:
    """Run the sim until SIGTERM or SIGINT; print ``REPLAY_SIM_READY port=<port>`` once listening."""
    asyncio.run(_serve(host, port, profile, truth_log))
