"""HTTP face of the simulated host: OpenAI chat completions, completions and Responses, Anthropic Messages,
``/v1/models``, Prometheus ``/metrics``, plus the entry points.

``serve()`` runs it as a process (``replay run`` starts one and reads the READY line for the port);
``start_sim()`` runs it inside the caller's event loop for tests. Every request goes the same way
(``pipeline.serve_request``): parse (``requests``), tokenise the prompt, draw its route (``routes``) and its fault
(``faults``), hand it to that route's engine, then answer (``answer``) in the API's shape and the dialect's
(``dialects``), and log the truth.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from replay import event_loop
from replay.sim.core.engine import SimEngine
from replay.sim.core.profile_file import resolve_profile
from replay.sim.core.profiles import SimProfile, get_profile
from replay.sim.core.prompt import PromptTokenizer
from replay.sim.server.arrivals import forget_arrival, stamp_arrivals
from replay.sim.server.dialect_base import Dialect
from replay.sim.server.dialects import get_dialect
from replay.sim.server.exchange import PRIMARY
from replay.sim.server.faults import FaultPlan, FaultSpec
from replay.sim.server.pipeline import SIM_STATE, SimState, serve_request
from replay.sim.server.prometheus import exposition
from replay.sim.server.requests import MODEL_ID
from replay.sim.server.response_store import ResponseStore
from replay.sim.server.routes import FallbackSpec, RoutePlan
from replay.sim.server.tls import TlsFiles
from replay.sim.server.truth import TruthLog
from replay.sim.server.websocket import WS_LIMIT_S, websocket_handler

_MAX_BODY_BYTES = 256 * 1024 * 1024  # long agent contexts are megabytes of JSON
_SHUTDOWN_GRACE_S = 0.5  # for requests that slip in on a kept-alive connection while stopping


def _handler(api: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await serve_request(request, api)

    return handle


async def _models(request: web.Request) -> web.Response:
    """GET /v1/models: one model; requests may name any model."""
    sim = request.app[SIM_STATE]
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
    return web.json_response({"status": "ok", "profile": request.app[SIM_STATE].engine.profile.name})


async def _metrics(request: web.Request) -> web.Response:
    """GET /metrics: Prometheus text, vLLM's metric names."""
    sim = request.app[SIM_STATE]
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
    app[SIM_STATE] = SimState(engine, prompts or PromptTokenizer(), truth, FaultPlan(spec), d, routes, engines)
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
    _sim: SimState
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
    sim = app[SIM_STATE]
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
