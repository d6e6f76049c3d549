"""HTTP face of the simulated host: OpenAI chat completions, completions and Responses, Anthropic Messages,
``/v1/models``, Prometheus ``/metrics``, plus the entry points.

``serve()`` runs it as a process (``replay run`` starts one and reads the READY line for the port);
``start_sim()`` runs it inside the caller's event loop for tests. Every request goes the same way: parse
(``requests``), tokenise the prompt, draw its route (``routes``) and its fault (``faults``), hand it to
that route's engine, then answer (``answer``) in the API's shape and the dialect's (``dialects``), and log
the truth.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import web

from replay import event_loop
from replay.sim.core.engine import FINISHED, RUNNING, WAITING, Seq, SimEngine
from replay.sim.core.profile_file import resolve_profile
from replay.sim.core.profiles import SimProfile, get_profile
from replay.sim.core.prompt import PromptTokenizer, count_images
from replay.sim.server.answer import Job, complete, speculation_of, stream
from replay.sim.server.arrivals import ARRIVALS, forget_arrival, stamp_arrivals
from replay.sim.server.dialect_base import Dialect
from replay.sim.server.dialects import ROUTER_METADATA_HEADERS, get_dialect
from replay.sim.server.errors import error_body, fault_body, overflow_body, previous_not_found
from replay.sim.server.exchange import PRIMARY, Exchange
from replay.sim.server.faults import FaultPlan, FaultSpec, http_status
from replay.sim.server.prometheus import exposition
from replay.sim.server.ratelimits import RateLimits
from replay.sim.server.requests import MODEL_ID, PARSERS, BadRequest, SimRequest, affinity_headers
from replay.sim.server.response_store import ResponseStore, keep_response, prompt_messages, shell
from replay.sim.server.routes import FallbackSpec, RoutePlan
from replay.sim.server.tls import TlsFiles
from replay.sim.server.truth import TruthLog, TruthRecord
from replay.sim.server.websocket import WS_LIMIT_S, WsTurn, websocket_handler

_MAX_BODY_BYTES = 256 * 1024 * 1024  # long agent contexts are megabytes of JSON
_SHUTDOWN_GRACE_S = 0.5  # for requests that slip in on a kept-alive connection while stopping


@dataclass(slots=True)
class _Sim:
    """What the handlers share."""

    engine: SimEngine  # the primary route's
    prompts: PromptTokenizer
    truth: TruthLog
    faults: FaultPlan
    dialect: Dialect
    routes: RoutePlan
    engines: dict[str, SimEngine]  # by route
    limits: RateLimits = field(default_factory=RateLimits)
    responses: ResponseStore = field(default_factory=ResponseStore)
    inflight: set[asyncio.Task[Any]] = field(default_factory=set)  # handlers, cancelled on stop
    requests: dict[str, int] = field(default_factory=dict)  # by final status, for /metrics


_SIM = web.AppKey("sim", _Sim)


def _handler(api: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await serve_request(request, api)

    return handle


def _exchange(req: SimRequest, record: TruthRecord, route: str, headers: Mapping[str, str]) -> Exchange:
    tier = req.body.get("service_tier")
    return Exchange(
        record.request_id,
        req.api,
        req.model,
        int(time.time()),
        route,
        tier if isinstance(tier, str) else None,
        req.body.get("perf_metrics_in_response") is True,
        any(headers.get(h, "").lower() == "enabled" for h in ROUTER_METADATA_HEADERS),
    )


async def serve_request(request: web.Request, api: str, turn: WsTurn | None = None) -> web.StreamResponse:
    """Parse, tokenise, draw route and fault, queue in the engine, answer; log the truth whatever happens. A turn of
    a WebSocket (``turn``: Responses' WebSocket mode, ``replay.sim.server.websocket``) brings its own message, id,
    connection-local state and where its events go."""
    sim = request.app[_SIM]
    rid = (turn.request_id if turn else None) or request.headers.get("X-Request-Id") or uuid.uuid4().hex
    record = TruthRecord(rid, time.perf_counter(), api=api, request_headers=affinity_headers(request.headers),
                         transport="websocket" if turn else "http")  # fmt: skip
    headers = {"X-Request-Id": rid, "x-replay-route": PRIMARY}
    task = asyncio.current_task()
    assert task is not None
    sim.inflight.add(task)
    engine, seq = sim.engine, None
    try:
        read = await _read(sim, request, api, record, headers, turn)
        if isinstance(read, web.Response):
            return read
        req, previous, prompt_ids = read
        record.route = route = sim.routes.draw()
        headers["x-replay-route"] = route
        engine = sim.engines[route]
        x = _exchange(req, record, route, request.headers)
        sim.limits.note(len(prompt_ids))
        record.fault = fault = sim.faults.draw()
        headers.update(sim.dialect.headers(x, sim.limits, exhausted=fault == "429"))
        turned = _fault_answer(sim, req, record, headers)
        admitted = turned or _admit(engine, req, record, prompt_ids, sim.dialect, headers)
        if isinstance(admitted, web.Response):
            return admitted
        seq = admitted
        job = Job(req, record, x, sim.dialect, engine, seq, headers, sim.faults.param(fault) if fault else 0.0,
                  created_tokens=req.cache_control, shell=shell(req))  # fmt: skip
        if fault == "bad_usage":
            job.bad = record.fault_detail = sim.faults.bad_usage_variant()
        answer = await (stream(request, job, turn.out if turn else None) if req.stream else complete(request, job))
        if api == "responses" and record.status == "ok" and record.finish_reason:
            if req.store:
                keep_response(sim.responses, req, previous, seq, rid)
            if turn is not None:  # the connection-local state: its last response
                keep_response(turn.local, req, previous, seq, rid, only=True)
        return answer
    except asyncio.CancelledError:
        record.status = "cancelled"
        raise
    finally:
        if seq is not None:
            if seq.state in (WAITING, RUNNING):
                engine.abort(seq)
            _fill(record, seq, engine.profile.spec_draft_tokens)
        sim.inflight.discard(task)
        record.reasoning_tokens = min(record.reasoning_tokens, record.output_tokens)  # reasoning goes first
        sim.requests[record.status] = sim.requests.get(record.status, 0) + 1
        sim.truth.append(record)


async def _read(
    sim: _Sim, request: web.Request, api: str, record: TruthRecord, headers: dict[str, str], turn: WsTurn | None
) -> tuple[SimRequest, list[dict[str, Any]] | None, np.ndarray] | web.Response:
    """The parsed request, the context it continues (Responses) and its prompt ids; or the 400 it gets."""
    rid = record.request_id
    try:
        body = turn.message if turn is not None else await request.read()
        # The request arrived when its first bytes reached the server, which a burst of requests can put
        # well before this handler ran (see arrivals.stamp_arrivals).
        record.arrival = min(record.arrival, ARRIVALS.pop(id(request.protocol), record.arrival))
        req = PARSERS[api](body)
        req.stream = req.stream or turn is not None  # a socket always streams (its message has no 'stream')
        record.request_fields = req.fields
        previous = None
        if req.previous_response_id is not None:
            local = turn.local.get(req.previous_response_id) if turn is not None else None
            previous = local if local is not None else sim.responses.get(req.previous_response_id)
            record.continued = previous is not None
            if previous is None:
                body = previous_not_found(sim.dialect, req.previous_response_id, rid)
                return _reject(record, 400, body, headers, "bad_request")
        messages = prompt_messages(req, previous)
        if messages is None:
            prompt_ids = await sim.prompts.text_ids(req.text_prompt)
        else:
            record.images = count_images(messages)
            if record.images and not sim.engine.profile.accepts_images:  # a text-only model, as vLLM answers it
                refusal = f"this model does not support image input ({record.images} image parts in the request)"
                return _reject(record, 400, error_body(api, sim.dialect, 400, refusal, rid), headers, "bad_request")
            prompt_ids = await sim.prompts.prompt_ids(messages)
    except (BadRequest, ValueError) as exc:
        return _reject(record, 400, error_body(api, sim.dialect, 400, str(exc), rid), headers, "bad_request")
    record.prompt_tokens = len(prompt_ids)
    return req, previous, prompt_ids


def _fault_answer(sim: _Sim, req: SimRequest, record: TruthRecord, headers: dict[str, str]) -> web.Response | None:
    """The answer to a fault that is answered at once (an HTTP status, a context overflow), else None."""
    fault, rid, d = record.fault, record.request_id, sim.dialect
    status = http_status(fault)
    if status is not None and fault is not None:
        retry, record.retry_after = sim.faults.retry_headers(fault)
        return _reject(record, status, fault_body(req.api, d, status, rid), headers | retry, "fault")
    if fault == "overflow":  # claims a context one token too short for the prompt
        n = record.prompt_tokens
        return _reject(record, 400, overflow_body(req.api, d, max(n - 1, 1), n, req.max_tokens, rid), headers, "fault")
    return None


def _admit(
    engine: SimEngine, req: SimRequest, record: TruthRecord, prompt_ids: np.ndarray, d: Dialect, headers: dict[str, str]
) -> Seq | web.Response:
    """The request as a sequence in the engine's queue, or the answer that turns it away (too long, queue full)."""
    profile = engine.profile
    target, finish_reason = engine.core.plan_output(req.max_tokens, req.ignore_eos, req.min_tokens)
    limit = profile.model_len_limit if not profile.instant else 1 << 62
    rid = record.request_id
    if len(prompt_ids) + target > limit:
        body = overflow_body(req.api, d, limit, len(prompt_ids), target, rid)
        return _reject(record, 400, body, headers, "rejected")
    if profile.max_waiting and len(engine.core.waiting) >= profile.max_waiting:
        body = error_body(req.api, d, 503, "the waiting queue is full", rid)
        return _reject(record, 503, body, headers, "rejected")
    seq = engine.core.new_seq(record.request_id, prompt_ids, target, finish_reason)
    if req.api == "completions":
        seq.reasoning = 0
    engine.submit(seq)
    record.queued = seq.t_queued
    return seq


def _reject(record: TruthRecord, status: int, body: bytes, headers: dict[str, str], kind: str) -> web.Response:
    record.status, record.http_status = kind, status
    record.done = time.perf_counter()
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


def _fill(record: TruthRecord, seq: Seq, draft_tokens: int = 0) -> None:
    """Copy what the engine knows of a request into its truth record."""
    record.cached_tokens = seq.cached_tokens or 0
    record.reasoning_tokens = seq.reasoning
    record.finish_reason = seq.finish_reason if seq.state == FINISHED else None
    record.prefill_start, record.prefill_end = seq.t_scheduled, seq.t_first_token
    if seq.t_scheduled is not None:
        record.queue_wait = seq.t_scheduled - seq.t_queued
        if seq.t_first_token is not None:
            record.prefill_time = seq.t_first_token - seq.t_scheduled
    if seq.t_first_token is not None and seq.t_last_token is not None:
        record.decode_time = seq.t_last_token - seq.t_first_token
    record.preemptions = len(seq.preempted_at)
    record.preempted_at = seq.preempted_at
    record.recomputed_tokens = seq.recomputed_tokens
    record.speculation = speculation_of(seq, draft_tokens)


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
    text = exposition(sim.engine, sim.faults, sim.requests, MODEL_ID, sim.routes.counts)
    return web.Response(text=text, content_type="text/plain", charset="utf-8")


def make_app(
    profile: SimProfile,
    truth: TruthLog,
    prompts: PromptTokenizer | None = None,
    faults: FaultSpec | None = None,
    seed: int = 0,
    dialect: str | Dialect | None = None,
    fallback: FallbackSpec | None = None,
    ws_limit_s: float = WS_LIMIT_S,
) -> web.Application:
    """The aiohttp application of the sim with ``profile`` timing (``fallback``: a share served by a second
    engine), answering in ``dialect``, logging to ``truth``; a WebSocket lasts ``ws_limit_s`` (OpenAI's 60
    minutes)."""
    stamp_arrivals()
    spec = faults or FaultSpec()
    routes = RoutePlan(fallback, spec.seed)
    engine = SimEngine(profile, seed)
    engines = {PRIMARY: engine}
    if fallback is not None:
        engines[fallback.route] = SimEngine(get_profile(fallback.profile), seed + 1)
    d = dialect if isinstance(dialect, Dialect) else get_dialect(dialect, routes.routes)
    app = web.Application(client_max_size=_MAX_BODY_BYTES, middlewares=[forget_arrival])
    app[_SIM] = _Sim(engine, prompts or PromptTokenizer(), truth, FaultPlan(spec), d, routes, engines)
    for path, api in (
        ("/v1/chat/completions", "chat"),
        ("/v1/completions", "completions"),
        ("/v1/messages", "messages"),
        ("/v1/responses", "responses"),
    ):
        app.router.add_post(path, _handler(api))
    app.router.add_get("/v1/responses", websocket_handler(serve_request, ws_limit_s))  # WebSocket mode
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
    tls: TlsFiles | None = None  # served over HTTPS with this certificate (``replay sim --tls``)

    @property
    def base_url(self) -> str:
        """OpenAI base URL, e.g. ``http://127.0.0.1:PORT/v1`` (``https://`` with TLS)."""
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}/v1"

    @property
    def faults(self) -> FaultPlan:
        return self._sim.faults

    @property
    def routes(self) -> RoutePlan:
        return self._sim.routes

    @property
    def engines(self) -> dict[str, SimEngine]:
        """The engine of each route (``primary``, ``fallback:PROFILE``)."""
        return self._sim.engines

    @property
    def responses(self) -> ResponseStore:
        return self._sim.responses

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
        for engine in self._sim.engines.values():
            await engine.stop()
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
    dialect: str | None = None,
    fallback: str | FallbackSpec | None = None,
    profile_file: str | None = None,
    tls: TlsFiles | None = None,
    ws_limit_s: float = WS_LIMIT_S,
) -> SimHandle:
    """Start the sim in the running loop (port 0: an ephemeral port) and return once it listens (over HTTPS with
    ``tls``: ``replay.sim.server.tls``).
    ``dialect``: a provider's stream shape (``dialects.DIALECTS``); ``fallback``: ``SHARE:PROFILE``;
    ``profile_file``: a profile from a file (replay.sim.core.profile_file), its base defaulting to ``profile``."""
    sim_profile = resolve_profile(profile, profile_file)
    spec = faults if isinstance(faults, FaultSpec) else FaultSpec.parse(faults, fault_seed)
    route = fallback if isinstance(fallback, FallbackSpec) or fallback is None else FallbackSpec.parse(fallback)
    truth = TruthLog(truth_log, keep=keep_truth)
    # the tokenizer loads now, not on the first request
    app = make_app(sim_profile, truth, faults=spec, seed=seed, dialect=dialect, fallback=route, ws_limit_s=ws_limit_s)
    sim = app[_SIM]
    await sim.prompts.warm_up()
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_GRACE_S)
    await runner.setup()
    await web.TCPSite(runner, host, port, backlog=1024, ssl_context=tls.context() if tls else None).start()
    return SimHandle(host, runner.addresses[0][1], sim.engine, truth, sim, runner, tls)


async def _serve(
    host: str, port: int, profile: str | SimProfile, truth_log: str | None, watch_stdin: bool, **options: Any
) -> None:
    handle = await start_sim(profile, truth_log, host=host, port=port, keep_truth=False, **options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    if watch_stdin:  # the parent holds the other end: when it dies (kill -9 included) the pipe closes

        def stdin_readable() -> None:
            if not os.read(sys.stdin.fileno(), 4096):  # end of file: the parent is gone
                stop.set()

        loop.add_reader(sys.stdin.fileno(), stdin_readable)
    # What start-up made (modules, profiles, the tokenizer's tables) lives as long as the process: out of the
    # collector's sight, so a full collection during a burst of arrivals walks only what requests made.
    gc.collect()
    gc.freeze()
    if handle.tls is not None:  # before READY: a parent that reads READY has the certificate's path already
        print(f"REPLAY_SIM_TLS cert={handle.tls.cert} (trust it with --ca-bundle; {handle.base_url})", flush=True)
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
    dialect: str | None = None,
    fallback: str | None = None,
    watch_stdin: bool = False,
    profile_file: str | None = None,
    tls: TlsFiles | None = None,
    ws_limit_s: float = WS_LIMIT_S,
) -> None:
    """Run the sim until SIGTERM, SIGINT or SIGHUP (or, with ``watch_stdin``, until its stdin closes: the embedded
    host's parent died); print ``REPLAY_SIM_READY port=<port>`` once listening."""
    profile = resolve_profile(profile, profile_file)  # a bad file fails here, before the loop starts
    # Prompts are tokenised in a worker thread; with the default 5 ms GIL switch interval the event loop
    # could wait that long to stamp an arrival or write a due token while the worker runs.
    sys.setswitchinterval(0.0002)
    options = {"faults": faults, "fault_seed": fault_seed, "dialect": dialect, "fallback": fallback, "tls": tls,
               "ws_limit_s": ws_limit_s}  # fmt: skip
    event_loop.run(_serve(host, port, profile, truth_log, watch_stdin, **options))
