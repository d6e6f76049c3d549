"""Every request's way through the simulated host: parse (``requests``), tokenise the prompt, draw its route
(``routes``) and its fault (``faults``), hand it to that route's engine (or turn it away), then answer (``answer``)
in the API's shape and the dialect's, and log the truth whatever happens (``serve_request``); and what the
handlers share (``SimState``). The HTTP face and the entry points that serve it: ``app``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import web

from replay.sim.core.engine import FINISHED, RUNNING, WAITING, Seq, SimEngine
from replay.sim.core.prompt import PromptTokenizer, count_images
from replay.sim.server.answer import Job, complete, speculation_of, stream
from replay.sim.server.arrivals import ARRIVALS
from replay.sim.server.dialect_base import Dialect
from replay.sim.server.dialects import ROUTER_METADATA_HEADERS
from replay.sim.server.errors import error_body, fault_body, overflow_body, previous_not_found
from replay.sim.server.exchange import PRIMARY, Exchange
from replay.sim.server.faults import FaultPlan, http_status
from replay.sim.server.ratelimits import RateLimits
from replay.sim.server.requests import PARSERS, BadRequest, SimRequest, affinity_headers
from replay.sim.server.response_store import ResponseStore, keep_response, prompt_messages, shell
from replay.sim.server.routes import RoutePlan
from replay.sim.server.truth import TruthLog, TruthRecord
from replay.sim.server.websocket import WsTurn


@dataclass(slots=True)
class SimState:
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


SIM_STATE = web.AppKey("sim", SimState)


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
    sim = request.app[SIM_STATE]
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
    sim: SimState, request: web.Request, api: str, record: TruthRecord, headers: dict[str, str], turn: WsTurn | None
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


def _fault_answer(sim: SimState, req: SimRequest, record: TruthRecord, headers: dict[str, str]) -> web.Response | None:
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
