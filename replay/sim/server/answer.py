"""Writing one answer: tokens as the engine samples them, the faults that strike mid-answer, the truth.

``stream`` sends SSE: all tokens due by the time the handler runs go out in one write (a slice of the
wire's piece cycle, ``wire``), faults happen at their points (``malformed`` / ``odd_chunk`` after the first
token; ``drop`` / ``stall`` / ``midstream`` after n // 2; ``huge`` pads the first answer token). ``complete``
sends the whole body once the last token is sampled.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from replay.sim.core.engine import Seq, SimEngine
from replay.sim.server.dialect_base import Dialect
from replay.sim.server.errors import error_body
from replay.sim.server.exchange import Counts, Exchange, Timings
from replay.sim.server.requests import SimRequest
from replay.sim.server.truth import TruthRecord
from replay.sim.wire.anthropic import MessagesStream, anthropic_body, anthropic_usage
from replay.sim.wire.openai import ChatStream, CompletionStream, completion_body, spoil, text_completion_body
from replay.sim.wire.responses import ResponsesStream, responses_body, responses_usage

_MB = 1_000_000


@dataclass(slots=True)
class Job:
    """One request being answered, with all it needs."""

    request: SimRequest
    record: TruthRecord
    exchange: Exchange
    dialect: Dialect
    engine: SimEngine
    seq: Seq
    headers: dict[str, str]
    fault_param: float = 0.0  # stall seconds, huge megabytes
    bad: str | None = None  # the bad_usage variant
    created_tokens: bool = False  # Anthropic: report newly cached blocks as cache_creation_input_tokens
    shell: dict[str, Any] = field(default_factory=dict)  # Responses: what the response object echoes

    def counts(self, output: int) -> Counts:
        """What the usage report says after ``output`` tokens (one too high with ``usage_off``)."""
        seq, engine = self.seq, self.engine
        cached = seq.cached_tokens or 0
        created = 0
        if self.created_tokens and engine.prefix_cache.caching:
            block = engine.profile.block_size
            created = max(seq.prompt_len // block * block - cached, 0)
        reasoning = min(seq.reasoning, output)
        spec = speculation_of(seq, engine.profile.spec_draft_tokens)
        if self.record.fault == "usage_off":
            return Counts(seq.prompt_len + 1, cached, output + 1, reasoning, created, spec)
        return Counts(seq.prompt_len, cached, output, reasoning, created, spec)


def speculation_of(seq: Seq, draft_tokens: int) -> dict[str, int] | None:
    """What a speculating engine reports of one request (None when it does not speculate)."""
    if not draft_tokens:
        return None
    accepted, drafted, drafts = seq.spec
    return {"accepted": accepted, "drafted": drafted, "drafts": drafts}


def make_wire(job: Job) -> Any:
    """The stream writer of the job's API and dialect."""
    req, x, d = job.request, job.exchange, job.dialect
    rid = job.record.request_id
    if req.api in ("chat", "completions"):
        cls = ChatStream if req.api == "chat" else CompletionStream
        prefix = "chatcmpl" if req.api == "chat" else "cmpl"
        wire = cls(f"{prefix}-{rid}", req.model, x.created, d, x, req.include_usage)
        wire.bad = job.bad
        return wire
    if req.api == "messages":
        return MessagesStream(f"msg_{rid}", req.model, job.seq.reasoning, d, x, job.bad)
    return ResponsesStream(x, job.seq.reasoning, d, job.shell, job.bad)


async def batches(engine: SimEngine, seq: Seq) -> AsyncGenerator[int, None]:
    """Token counts as the engine samples them: all tokens due when the handler runs, in one batch."""
    if engine.profile.instant:
        async for count in engine.instant_batches(seq):
            yield count
        return
    sent = 0
    while sent < seq.target:
        n = await engine.tokens(seq, sent)
        if n <= sent:
            return  # dropped by the engine
        yield n - sent
        sent = n


def _pieces(wire: Any, start: int, count: int, reasoning: int, huge_at: int, nbytes: int, repeat: bool) -> bytes:
    if repeat:  # the ``repeat`` fault: every answer token is the answer's first (a degenerate answer; counts unchanged)
        head = max(0, min(count, reasoning - start))
        out = wire.tokens(start, head, reasoning) if head else b""
        return out + wire.tokens(reasoning, 1, reasoning) * (count - head)
    if start <= huge_at < start + count:
        return (
            wire.tokens(start, huge_at - start, reasoning)
            + wire.huge(huge_at, nbytes)
            + wire.tokens(huge_at + 1, start + count - huge_at - 1, reasoning)
        )
    return wire.tokens(start, count, reasoning)


def drop(request: web.Request, record: TruthRecord, response: web.StreamResponse) -> web.StreamResponse:
    """Close the connection mid-answer, as a crashed worker or a proxy timeout does. aiohttp's
    finish_response then meets a closed transport, which it takes as a client that went away."""
    record.status, record.done = "fault", time.perf_counter()
    if request.transport is not None:
        request.transport.close()
    return response


async def stream(request: web.Request, job: Job, out: Any = None) -> web.StreamResponse:
    """SSE answer: headers now (or with the first token), tokens as the engine samples them. ``out``: where the
    events go instead of an HTTP response (a WebSocket's turn: ``replay.sim.server.websocket.WsOut``)."""
    seq, record, d = job.seq, job.record, job.dialect
    response = out or web.StreamResponse(
        headers={**job.headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    wire = make_wire(job)
    fault = record.fault
    at = seq.target // 2  # where a drop, a stall or a midstream error happens
    # where a batch is split so the fault strikes at its point: after n // 2 tokens, or after the first one
    cut = at if fault in ("drop", "stall", "midstream") else 1 if fault in ("malformed", "odd_chunk") else -1
    r = seq.reasoning
    hidden = wire.hides_reasoning
    huge_at = r if fault == "huge" and r < seq.target else -1
    nbytes = int(job.fault_param * _MB)
    comment_at = at if d.comment else -1

    async def prepare() -> None:
        if not response.prepared:
            if d.headers_at_first_token:
                response.headers.update(d.first_token_headers(job.exchange, job.counts(0), Timings.of(seq)))
            await response.prepare(request)

    try:
        if not d.headers_at_first_token:
            await prepare()
            if d.comment:
                await response.write(d.comment)
        pending: bytes | None = None  # the opening goes out with the first token, as vLLM sends the role
        sent = 0
        if at == 0 and fault in ("drop", "midstream"):
            await prepare()
            await response.write(wire.opening(job.counts(0)) + (wire.failure() if fault == "midstream" else b""))
            return drop(request, record, response) if fault == "drop" else await _end(response, record)
        if fault == "stall" and at == 0:
            await asyncio.sleep(job.fault_param)
        async with contextlib.aclosing(batches(job.engine, seq)) as due:
            async for got in due:
                count = got
                if pending is None:
                    await prepare()
                    pending = wire.opening(job.counts(0))
                if sent < cut < sent + count:
                    count = cut - sent  # the part before the fault point goes first
                while count:
                    n_hidden = min(max(r - sent, 0), count) if hidden else 0
                    data = pending + _pieces(wire, sent, count, r, huge_at, nbytes, fault == "repeat")
                    t = time.perf_counter()
                    if data:
                        await response.write(data)
                    if count > n_hidden:
                        record.wrote(t, count - n_hidden)
                    if n_hidden:
                        record.hidden(n_hidden)
                    sent += count
                    pending = b""
                    if sent == cut == 1:  # malformed, odd_chunk
                        await response.write(wire.malformed() if fault == "malformed" else wire.odd())
                    if sent >= comment_at >= 0:
                        await response.write(d.comment)
                        comment_at = -1
                    if sent == at and fault == "drop":
                        return drop(request, record, response)
                    if sent == at and fault == "midstream":
                        await response.write(wire.failure())
                        return await _end(response, record)
                    if sent == at and fault == "stall":
                        await asyncio.sleep(job.fault_param)
                    count, got = got - count, got - count  # the rest of the batch, after the fault point
        await _close(response, wire, job, sent, with_usage=fault != "no_usage")
    except ConnectionResetError:  # the client went away; aiohttp's finish_response tolerates that
        record.status = "disconnected"
    return response


async def _close(response: web.StreamResponse, wire: Any, job: Job, sent: int, with_usage: bool) -> None:
    """The stream's closing events (the finish, and the usage unless a fault withholds it) after ``sent`` tokens;
    the truth's end: its time, finish reason and the server timings the dialect reported."""
    seq, record = job.seq, job.record
    counts = job.counts(sent)
    closing = wire.closing(counts, seq.finish_reason, Timings.of(seq), with_usage=with_usage)
    record.server_timings = wire.reported
    t = time.perf_counter()
    await response.write(closing)
    record.done = t
    record.finish_reason = seq.finish_reason
    await response.write_eof()


async def _end(response: web.StreamResponse, record: TruthRecord) -> web.StreamResponse:
    """End a stream that failed by a fault (its error event already written)."""
    record.status, record.done = "fault", time.perf_counter()
    await response.write_eof()
    return response


def _body(job: Job, n: int) -> bytes:
    """The non-streamed answer body of ``n`` tokens, in the API's and dialect's shape."""
    req, x, d, seq, fault = job.request, job.exchange, job.dialect, job.seq, job.record.fault
    counts, timings = job.counts(n), Timings.of(seq)
    with_usage = fault != "no_usage"
    pad = int(job.fault_param * _MB) if fault == "huge" else 0
    rid = job.record.request_id
    if req.api == "chat":
        u = spoil(d.usage(counts, timings), ("prompt_tokens", "completion_tokens"), job.bad) if with_usage else None
        extra = d.chunk_fields(x) | d.final_fields(x, counts, timings, u)
        if u is not None or not d.timings_in_usage:
            job.record.server_timings = d.reported_timings(x, counts, timings)
        field_name = d.reasoning_fields[0] if d.reasoning_fields else None
        return completion_body(
            f"chatcmpl-{rid}", req.model, x.created, n, counts.reasoning, u, seq.finish_reason, extra, field_name, pad
        )
    if req.api == "completions":
        u = spoil(d.usage(counts, timings), ("prompt_tokens", "completion_tokens"), job.bad) if with_usage else None
        return text_completion_body(f"cmpl-{rid}", req.model, x.created, n, u, seq.finish_reason, pad)
    if req.api == "messages":
        u = anthropic_usage(counts, counts.output) | d.messages_usage(x)
        u = spoil(u, ("input_tokens", "output_tokens"), job.bad) if with_usage else None
        return anthropic_body(f"msg_{rid}", req.model, counts, seq.finish_reason, u, pad)
    u = spoil(responses_usage(counts), ("input_tokens", "output_tokens"), job.bad) if with_usage else None
    return responses_body(x, d, job.shell, counts, seq.finish_reason, u, pad)


_CONTENT_KEY = {"chat": "choices", "completions": "choices", "messages": "content", "responses": "output"}


async def complete(request: web.Request, job: Job) -> web.StreamResponse:
    """Non-streamed answer: the whole body in one write once the last token is sampled."""
    seq, record = job.seq, job.record
    async with contextlib.aclosing(batches(job.engine, seq)) as due:
        async for _ in due:
            pass
    n = seq.num_output
    fault = record.fault
    if fault == "drop":
        return drop(request, record, web.Response(headers=job.headers))
    if fault == "stall":
        await asyncio.sleep(job.fault_param)
    status = 200
    if fault == "midstream":  # the answer failed on the way: a 500 once it would have been done
        status, body = (
            500,
            error_body(job.request.api, job.dialect, 500, "simulated midstream fault", record.request_id),
        )
    else:
        body = _body(job, n)
    if fault == "malformed":
        body = body[: len(body) // 2]
    elif fault == "odd_chunk":  # the field that carries the answer, of an unexpected type
        obj = orjson.loads(body)
        obj[_CONTENT_KEY[job.request.api]] = "abc"
        body = orjson.dumps(obj)
    headers = job.headers
    if status == 200:  # the figures a dialect sends as headers are all known now (Fireworks)
        headers = headers | job.dialect.first_token_headers(job.exchange, job.counts(n), Timings.of(seq))
    response = web.Response(status=status, body=body, content_type="application/json", headers=headers)
    try:
        t = time.perf_counter()
        await response.prepare(request)
        await response.write_eof()
        record.done = t
        if status == 200:
            record.wrote(t, n)
            record.finish_reason = seq.finish_reason
        else:
            record.status, record.http_status = "fault", status
    except ConnectionResetError:
        record.status = "disconnected"
    return response
