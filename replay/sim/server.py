"""HTTP face of the simulated host: OpenAI chat completions and completions, Anthropic Messages,
``/v1/models``, Prometheus ``/metrics``, plus the entry points.

``serve()`` runs it as a process (``replay run`` starts one and reads the READY line for the port);
``start_sim()`` runs it inside the caller's event loop for tests. Every request goes the same way: parse,
tokenise the prompt, draw its fault (``faults``), hand it to the engine, then write tokens as the engine
samples them (all tokens due by the time the handler runs go out in one write), and log the truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
from aiohttp import web, web_protocol

from replay import event_loop
from replay.sim.engine import FINISHED, RUNNING, WAITING, Seq, SimEngine
from replay.sim.faults import HTTP_KINDS, FaultPlan, FaultSpec
from replay.sim.profile_file import resolve_profile
from replay.sim.profiles import SimProfile
from replay.sim.prometheus import exposition
from replay.sim.prompt import PromptTokenizer, anthropic_to_chat
from replay.sim.truth import TruthLog, TruthRecord
from replay.sim.wire import (
    ChatStream,
    CompletionStream,
    Counts,
    MessagesStream,
    anthropic_body,
    anthropic_error_body,
    completion_body,
    error_body,
    text_completion_body,
    usage,
)

MODEL_ID = "replay-sim"  # listed by /v1/models; any requested model name is accepted and echoed
DEFAULT_MAX_TOKENS = 256
_COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # as OpenAI's legacy completions
_MAX_BODY_BYTES = 256 * 1024 * 1024  # long agent contexts are megabytes of JSON
_SHUTDOWN_GRACE_S = 0.5  # for requests that slip in on a kept-alive connection while stopping


@dataclass(slots=True)
class _Sim:
    """What the handlers share."""

    engine: SimEngine
    prompts: PromptTokenizer
    truth: TruthLog
    faults: FaultPlan
    inflight: set[asyncio.Task[Any]] = field(default_factory=set)  # handlers, cancelled on stop
    requests: dict[str, int] = field(default_factory=dict)  # by final status, for /metrics


_SIM = web.AppKey("sim", _Sim)


class _BadRequest(Exception):
    """The request body is not a request the sim can serve."""


@dataclass(slots=True)
class _Req:
    api: str  # chat | completions | messages
    model: str
    max_tokens: int
    stream: bool
    include_usage: bool
    ignore_eos: bool
    min_tokens: int
    prompt: Callable[[PromptTokenizer], Awaitable[np.ndarray]]
    cache_control: bool = False  # Anthropic: the request marks cache breakpoints


def _int_field(body: dict[str, Any], *names: str, default: int | None, minimum: int) -> int | None:
    for name in names:
        if body.get(name) is not None:
            value = body[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise _BadRequest(f"'{name}' must be an integer >= {minimum}")
            return value
    return default


def _common(body: Any, api: str, default_max: int | None) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise _BadRequest("body must be a JSON object")
    max_tokens = _int_field(body, "max_completion_tokens", "max_tokens", default=default_max, minimum=1)
    if max_tokens is None:
        raise _BadRequest("'max_tokens' is required")
    model = body.get("model")
    stream = body.get("stream") is True
    options = body.get("stream_options")
    asked = stream and isinstance(options, dict) and options.get("include_usage") is True
    return {
        "api": api,
        "model": model if isinstance(model, str) and model else MODEL_ID,
        "max_tokens": max_tokens,
        "stream": stream,
        "include_usage": api == "messages" or asked,
        "ignore_eos": body.get("ignore_eos") is True,
        "min_tokens": _int_field(body, "min_tokens", default=0, minimum=0) or 0,
    }  # fmt: skip


def _loads(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _BadRequest(f"body is not valid JSON: {exc}") from None


def _parse_chat(raw: bytes) -> _Req:
    body = _loads(raw)
    common = _common(body, "chat", DEFAULT_MAX_TOKENS)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _BadRequest("'messages' must be a non-empty list")
    return _Req(**common, prompt=lambda p: p.prompt_ids(messages))


def _parse_completions(raw: bytes) -> _Req:
    body = _loads(raw)
    common = _common(body, "completions", _COMPLETIONS_DEFAULT_MAX_TOKENS)
    prompt = body.get("prompt")
    return _Req(**common, prompt=lambda p: p.text_ids(prompt))


def _parse_messages(raw: bytes) -> _Req:
    body = _loads(raw)
    common = _common(body, "messages", None)
    messages = anthropic_to_chat(body.get("system"), body.get("messages"))
    return _Req(**common, prompt=lambda p: p.prompt_ids(messages), cache_control=b'"cache_control"' in raw)


_PARSERS = {"chat": _parse_chat, "completions": _parse_completions, "messages": _parse_messages}
_ANTHROPIC_ERRORS = {400: "invalid_request_error", 429: "rate_limit_error", 500: "api_error", 503: "overloaded_error"}
_OPENAI_ERRORS = {400: "invalid_request_error", 429: "rate_limit_error", 500: "server_error", 503: "server_error"}


def _error(api: str, status: int, message: str, headers: dict[str, str]) -> web.Response:
    if api == "messages":
        body = anthropic_error_body(message, _ANTHROPIC_ERRORS.get(status, "api_error"))
    else:
        body = error_body(message, _OPENAI_ERRORS.get(status, "server_error"))
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


def _handler(api: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await _serve_request(request, api)

    return handle


_ARRIVALS: dict[int, float] = {}  # id(connection protocol) -> when the next request's first bytes came in


def _stamp_arrivals() -> None:
    """Stamp each request where its first bytes enter the server (``RequestHandler.data_received``).

    The handler runs only after the loop has parsed this and other connections' bytes; at 64 simultaneous
    requests that is milliseconds late. A connection carries one request at a time (clients do not pipeline),
    so its first ``data_received`` after the previous request's body was read belongs to the next request.
    """
    cls = web_protocol.RequestHandler
    if getattr(cls.data_received, "_replay_arrivals", False):
        return
    original = cls.data_received

    def data_received(self: web_protocol.RequestHandler, data: bytes) -> None:
        _ARRIVALS.setdefault(id(self), time.perf_counter())
        original(self, data)

    def connection_lost(self: web_protocol.RequestHandler, exc: BaseException | None) -> None:
        _ARRIVALS.pop(id(self), None)
        lost(self, exc)

    lost = cls.connection_lost
    data_received._replay_arrivals = True  # type: ignore[attr-defined]
    cls.data_received = data_received  # type: ignore[method-assign]
    cls.connection_lost = connection_lost  # type: ignore[method-assign]


@web.middleware
async def _forget_arrival(request: web.Request, handler: Any) -> web.StreamResponse:
    """Whatever a handler did, its request's arrival stamp must not be taken for the next request's."""
    try:
        return await handler(request)
    finally:
        _ARRIVALS.pop(id(request.protocol), None)


async def _serve_request(request: web.Request, api: str) -> web.StreamResponse:
    """Parse, tokenise, draw the fault, queue in the engine, answer; log the truth whatever happens."""
    sim = request.app[_SIM]
    engine = sim.engine
    record = TruthRecord(request.headers.get("X-Request-Id") or uuid.uuid4().hex, time.perf_counter(), api=api)
    headers = {"X-Request-Id": record.request_id}
    task = asyncio.current_task()
    assert task is not None
    sim.inflight.add(task)
    seq: Seq | None = None
    try:
        try:
            body = await request.read()
            # The request arrived when its first bytes reached the server, which a burst of requests can put
            # well before this handler ran (see _stamp_arrivals).
            record.arrival = min(record.arrival, _ARRIVALS.pop(id(request.protocol), record.arrival))
            req = _PARSERS[api](body)
            prompt_ids = await req.prompt(sim.prompts)
        except (_BadRequest, ValueError) as exc:
            return _reject(record, api, 400, str(exc), headers, "bad_request")
        record.prompt_tokens = len(prompt_ids)
        record.fault = fault = sim.faults.draw()
        if fault in HTTP_KINDS:
            status = int(fault)
            if status in (429, 503):
                headers["Retry-After"] = f"{sim.faults.param(fault):g}"
            return _reject(record, api, status, f"simulated fault {fault}", headers, "fault")
        profile = engine.profile
        target, finish_reason = engine.core.plan_output(req.max_tokens, req.ignore_eos, req.min_tokens)
        limit = profile.model_len_limit if not profile.instant else 1 << 62
        if len(prompt_ids) + target > limit:
            message = (
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{len(prompt_ids) + target} tokens ({len(prompt_ids)} in the messages, {target} in the completion)."
            )
            return _reject(record, api, 400, message, headers, "rejected")
        if profile.max_waiting and len(engine.core.waiting) >= profile.max_waiting:
            return _reject(record, api, 503, "the waiting queue is full", headers, "rejected")
        seq = engine.core.new_seq(record.request_id, prompt_ids, target, finish_reason)
        if api == "completions":
            seq.reasoning = 0
        engine.submit(seq)
        record.queued = seq.t_queued
        if req.stream:
            return await _stream(request, sim, seq, req, record, headers)
        return await _complete(request, sim, seq, req, record, headers)
    except asyncio.CancelledError:
        record.status = "cancelled"
        raise
    finally:
        if seq is not None:
            if seq.state in (WAITING, RUNNING):
                engine.abort(seq)
            _fill(record, seq)
        sim.inflight.discard(task)
        record.reasoning_tokens = min(record.reasoning_tokens, record.output_tokens)  # reasoning goes first
        sim.requests[record.status] = sim.requests.get(record.status, 0) + 1
        sim.truth.append(record)


def _reject(
    record: TruthRecord, api: str, status: int, message: str, headers: dict[str, str], kind: str
) -> web.Response:
    record.status, record.http_status = kind, status
    record.done = time.perf_counter()
    return _error(api, status, message, headers)


def _fill(record: TruthRecord, seq: Seq) -> None:
    """Copy what the engine knows of a request into its truth record."""
    record.cached_tokens = seq.cached_tokens or 0
    record.reasoning_tokens = seq.reasoning
    record.finish_reason = seq.finish_reason if seq.state == FINISHED else None
    record.prefill_start, record.prefill_end = seq.t_scheduled, seq.t_first_token
    if seq.t_scheduled is not None:
        record.queue_wait = seq.t_scheduled - seq.t_queued
        if seq.t_first_token is not None:
            record.prefill_time = seq.t_first_token - seq.t_scheduled
    record.preemptions = len(seq.preempted_at)
    record.preempted_at = seq.preempted_at
    record.recomputed_tokens = seq.recomputed_tokens


def _wire(req: _Req, record: TruthRecord, seq: Seq) -> ChatStream | CompletionStream | MessagesStream:
    created = int(time.time())
    if req.api == "chat":
        return ChatStream(f"chatcmpl-{record.request_id}", req.model, created)
    if req.api == "completions":
        return CompletionStream(f"cmpl-{record.request_id}", req.model, created)
    return MessagesStream(f"msg_{record.request_id}", req.model, seq.reasoning)


def _counts(sim: _Sim, seq: Seq, req: _Req, output: int, fault: str | None) -> Counts:
    cached = seq.cached_tokens or 0
    created = 0
    if req.cache_control and sim.engine.prefix_cache.caching:  # Anthropic: blocks written to the cache
        created = max(seq.prompt_len // sim.engine.profile.block_size * sim.engine.profile.block_size - cached, 0)
    reasoning = min(seq.reasoning, output)
    if fault == "bad_usage":
        return Counts(seq.prompt_len + 1, cached, output + 1, reasoning, created)
    return Counts(seq.prompt_len, cached, output, reasoning, created)


async def _batches(sim: _Sim, seq: Seq) -> Any:
    """Token counts as the engine samples them: all tokens due when the handler runs, in one batch."""
    if sim.engine.profile.instant:
        async for count in sim.engine.instant_batches(seq):
            yield count
        return
    sent = 0
    while sent < seq.target:
        n = await sim.engine.tokens(seq, sent)
        if n <= sent:
            return  # dropped by the engine
        yield n - sent
        sent = n


async def _stream(
    request: web.Request, sim: _Sim, seq: Seq, req: _Req, record: TruthRecord, headers: dict[str, str]
) -> web.StreamResponse:
    """SSE answer: headers now, tokens as the engine samples them, several at once when several are due."""
    response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    wire = _wire(req, record, seq)
    fault = record.fault
    at = seq.target // 2  # where a drop or a stall happens
    try:
        await response.prepare(request)
        pending: bytes | None = None  # the opening goes out with the first token, as vLLM sends the role
        sent = 0
        if fault == "drop" and at == 0:
            await response.write(wire.opening(_counts(sim, seq, req, 0, None)))
            return _drop(request, record, response)
        if fault == "stall" and at == 0:
            await asyncio.sleep(sim.faults.param("stall"))
        async with contextlib.aclosing(_batches(sim, seq)) as batches:
            async for got in batches:
                count = got
                if pending is None:
                    pending = wire.opening(_counts(sim, seq, req, 0, None))
                if fault in ("drop", "stall") and sent < at < sent + count:
                    count = at - sent  # the part before the fault point goes first
                data = pending + wire.tokens(sent, count, seq.reasoning)
                t = time.perf_counter()
                await response.write(data)
                record.wrote(t, count)
                sent += count
                pending = b""
                if fault == "malformed" and sent == count:
                    await response.write(wire.malformed())
                if sent == at and fault == "drop":
                    return _drop(request, record, response)
                if sent == at and fault == "stall":
                    await asyncio.sleep(sim.faults.param("stall"))
                if count < got:  # the rest of the batch, after the stall
                    rest = got - count
                    data = wire.tokens(sent, rest, seq.reasoning)
                    t = time.perf_counter()
                    await response.write(data)
                    record.wrote(t, rest)
                    sent += rest
        counts = _counts(sim, seq, req, sent, fault) if req.include_usage and fault != "no_usage" else None
        t = time.perf_counter()
        await response.write(wire.closing(counts, seq.finish_reason))
        record.done = t
        record.finish_reason = seq.finish_reason
        await response.write_eof()
    except ConnectionResetError:  # the client went away; aiohttp's finish_response tolerates that
        record.status = "disconnected"
    return response


def _drop(request: web.Request, record: TruthRecord, response: web.StreamResponse) -> web.StreamResponse:
    """Close the connection mid-answer, as a crashed worker or a proxy timeout does. aiohttp's
    finish_response then meets a closed transport, which it takes as a client that went away."""
    record.status, record.done = "fault", time.perf_counter()
    if request.transport is not None:
        request.transport.close()
    return response


async def _complete(
    request: web.Request, sim: _Sim, seq: Seq, req: _Req, record: TruthRecord, headers: dict[str, str]
) -> web.StreamResponse:
    """Non-streamed answer: the whole body in one write once the last token is sampled."""
    async with contextlib.aclosing(_batches(sim, seq)) as batches:
        async for _ in batches:
            pass
    n = seq.num_output
    fault = record.fault
    if fault == "drop":
        return _drop(request, record, web.Response(headers=headers))
    if fault == "stall":
        await asyncio.sleep(sim.faults.param("stall"))
    counts = _counts(sim, seq, req, n, fault)
    u = usage(counts.prompt, counts.cached, counts.output, counts.reasoning)
    rid, model, created = record.request_id, req.model, int(time.time())
    if req.api == "chat":
        body = completion_body(f"chatcmpl-{rid}", model, created, n, counts.reasoning, u, seq.finish_reason)
    elif req.api == "completions":
        body = text_completion_body(f"cmpl-{rid}", model, created, n, u, seq.finish_reason)
    else:
        body = anthropic_body(f"msg_{rid}", model, counts, seq.finish_reason)
    if fault == "no_usage":
        obj = orjson.loads(body)
        obj.pop("usage", None)
        body = orjson.dumps(obj)
    elif fault == "malformed":
        body = body[: len(body) // 2]
    response = web.Response(body=body, content_type="application/json", headers=headers)
    try:
        t = time.perf_counter()
        await response.prepare(request)
        await response.write_eof()
        record.wrote(t, n)
        record.done = t
        record.finish_reason = seq.finish_reason
    except ConnectionResetError:
        record.status = "disconnected"
    return response


async def _models(request: web.Request) -> web.Response:
    """GET /v1/models: one model; requests may name any model."""
    sim = request.app[_SIM]
    model = {
        "id": MODEL_ID,
        "object": "model",
        "created": 0,
        "owned_by": "replay",
        "max_model_len": sim.engine.profile.model_len_limit,
    }
    return web.json_response({"object": "list", "data": [model]})


async def _health(request: web.Request) -> web.Response:
    """GET /health."""
    return web.json_response({"status": "ok", "profile": request.app[_SIM].engine.profile.name})


async def _metrics(request: web.Request) -> web.Response:
    """GET /metrics: Prometheus text, vLLM's metric names."""
    sim = request.app[_SIM]
    text = exposition(sim.engine, sim.faults, sim.requests, MODEL_ID)
    return web.Response(text=text, content_type="text/plain", charset="utf-8")


def make_app(
    profile: SimProfile,
    truth: TruthLog,
    prompts: PromptTokenizer | None = None,
    faults: FaultSpec | None = None,
    seed: int = 0,
) -> web.Application:
    """The aiohttp application of the sim with ``profile`` timing, logging to ``truth``."""
    _stamp_arrivals()
    app = web.Application(client_max_size=_MAX_BODY_BYTES, middlewares=[_forget_arrival])
    app[_SIM] = _Sim(SimEngine(profile, seed), prompts or PromptTokenizer(), truth, FaultPlan(faults or FaultSpec()))
    for path, api in (
        ("/v1/chat/completions", "chat"),
        ("/v1/completions", "completions"),
        ("/v1/messages", "messages"),
    ):
        app.router.add_post(path, _handler(api))
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/health", _health)
    app.router.add_get("/metrics", _metrics)
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
    def faults(self) -> FaultPlan:
        return self._sim.faults

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
        await self.engine.stop()
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
    faults: str | FaultSpec | None = None,
    fault_seed: int = 0,
    seed: int = 0,
    profile_file: str | None = None,
) -> SimHandle:
    """Start the sim in the running loop (port 0: an ephemeral port) and return once it listens;
    ``profile_file``: a profile from a file (replay.sim.profile_file), its base defaulting to ``profile``."""
    sim_profile = resolve_profile(profile, profile_file)
    spec = faults if isinstance(faults, FaultSpec) else FaultSpec.parse(faults, fault_seed)
    truth = TruthLog(truth_log, keep=keep_truth)
    app = make_app(sim_profile, truth, faults=spec, seed=seed)  # loads the tokenizer now, not on the first request
    sim = app[_SIM]
    await sim.prompts.warm_up()
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_GRACE_S)
    await runner.setup()
    await web.TCPSite(runner, host, port, backlog=1024).start()
    return SimHandle(host, runner.addresses[0][1], sim.engine, truth, sim, runner)


async def _serve(
    host: str, port: int, profile: str | SimProfile, truth_log: str | None, faults: str | None, fault_seed: int
) -> None:
    handle = await start_sim(
        profile, truth_log, host=host, port=port, keep_truth=False, faults=faults, fault_seed=fault_seed
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"REPLAY_SIM_READY port={handle.port}", flush=True)
    try:
        await stop.wait()
    finally:
        await handle.stop()


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    profile: str | SimProfile = "default",
    truth_log: str | None = None,
    faults: str | None = None,
    fault_seed: int = 0,
    profile_file: str | None = None,
) -> None:
    """Run the sim until SIGTERM or SIGINT; print ``REPLAY_SIM_READY port=<port>`` once listening."""
    profile = resolve_profile(profile, profile_file)  # a bad file fails here, before the loop starts
    # Prompts are tokenised in a worker thread; with the default 5 ms GIL switch interval the event loop
    # could wait that long to stamp an arrival or write a due token while the worker runs.
    sys.setswitchinterval(0.0002)
    event_loop.run(_serve(host, port, profile, truth_log, faults, fault_seed))
