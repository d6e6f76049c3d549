"""Host client for OpenAI-compatible chat completions, streaming.

The read loop does two things per read: take a timestamp and keep the bytes. Everything else (SSE
framing, JSON, classifying reasoning vs answer tokens, usage) happens once the stream has closed, in
``interpret_chat_stream``, so the client never slows the stream it is measuring.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import aiohttp
import orjson

from replay.clients import wire_stamps
from replay.clients.sse import Event, split_events
from replay.results.records import RequestRecord


@dataclass(frozen=True, slots=True)
class HostConfig:
    """Where requests go. The API key is read from the environment, never stored."""

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    request_timeout_s: float = 600.0  # whole call
    stall_timeout_s: float = 120.0  # longest silence between two reads

    def public(self) -> dict[str, Any]:
        """What may be written to a run file: no secrets, only where the key would come from."""
        return {
            "base_url": self.base_url,
            "api": "openai-chat",
            "model": self.model,
            "api_key_env": self.api_key_env,
            "api_key_set": bool(os.environ.get(self.api_key_env)),
            "request_timeout_s": self.request_timeout_s,
            "stall_timeout_s": self.stall_timeout_s,
        }


# A body read only at its end stays in aiohttp's buffer meanwhile; reading must not pause before it ends (the
# buffer holds what the client keeps anyway). aiohttp pauses at twice this many bytes or 1/16 as many chunks.
_UNREAD_BODY_LIMIT = 1 << 30


def _detail(text: bytes | str, limit: int = 300) -> str:
    s = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return s if len(s) <= limit else s[:limit] + "..."


@dataclass(slots=True)
class _StreamSummary:
    first_token: float | None = None
    first_answer: float | None = None
    last_token: float | None = None
    events: int = 0
    chunks: list[float] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    finish_reason: str | None = None
    done: bool = False
    error: str | None = None


def _token_kind(obj: dict[str, Any]) -> tuple[bool, bool]:
    """(carries tokens, carries answer tokens) for one chat chunk."""
    tokens = answer = False
    for choice in obj.get("choices") or ():
        delta = choice.get("delta") or {}
        if delta.get("content") or delta.get("tool_calls") or delta.get("refusal"):
            tokens = answer = True
        elif delta.get("reasoning_content") or delta.get("reasoning"):
            tokens = True
    return tokens, answer


def _scan(d: bytes) -> tuple[bool, bool] | None:
    """(tokens, answer) of an ordinary chunk from its bytes alone; None when the event must be decoded.

    The patterns can only match JSON keys (a quote inside a string value is escaped), and they are tried
    in a fixed order with plain ``in`` tests: this runs once per streamed event.
    """
    if b'"usage":{' in d or b'"error"' in d or b'"finish_reason":"' in d or b'"timings"' in d or b": " in d:
        return None  # a figure is needed from it, or the server writes JSON with spaces: decode
    if b'"content":"' in d:
        return None if b'"content":""' in d else _ANSWER
    if b'"reasoning_content":"' in d:
        return None if b'"reasoning_content":""' in d else _REASONING
    if b'"reasoning":"' in d:
        return None if b'"reasoning":""' in d else _REASONING
    return None  # tool calls, refusals and anything unusual: decode


_ANSWER = (True, True)
_REASONING = (True, False)


def _add_tokens(s: _StreamSummary, t: float, t_sent: float, n: int, answer: bool) -> None:
    """Account ``n`` token-bearing events that arrived in the read at ``t``."""
    s.events += n
    if s.first_token is None:
        s.first_token = t
    if answer and s.first_answer is None:
        s.first_answer = t
    s.last_token = t
    if s.chunks and s.chunks[-2] == round(t - t_sent, 6):
        s.chunks[-1] += n
    else:
        s.chunks += (round(t - t_sent, 6), n)


def _event(s: _StreamSummary, ev: Event, t_sent: float) -> None:
    kind = _scan(ev.data) or _decode(ev.data, s)
    if kind is not None and kind[0]:
        _add_tokens(s, ev.t, t_sent, 1, kind[1])


def interpret_chat_stream(events: list[Event], t_sent: float) -> _StreamSummary:
    """Classify each event once: token-bearing, answer, usage, error, end of stream."""
    s = _StreamSummary()
    for ev in events:
        _event(s, ev, t_sent)
    return s


def _plain_answer_block(block: bytes) -> int | None:
    """Answer tokens in a run of complete events if every one is a plain one-choice content chunk, else None.

    Counting keys over the whole block replaces a per-event loop. ``"content":"`` can only be a key (quotes in
    values are escaped); events are separated by exactly one blank line; so when every event starts with
    ``data: `` and has exactly one choice, one delta and one content key, and nothing in the block needs
    decoding or is reasoning, each event is a content delta, empty or not. Otherwise: None, and the caller
    classifies event by event.
    """
    if b'"content":"' not in block or b"reasoning" in block or b'"usage":{' in block or b'"error"' in block:
        return None
    if b'"finish_reason":"' in block or b'"timings"' in block or not block.startswith(b"data: "):
        return None
    events = block.count(b"\n\n") + 1
    if not (
        block.count(b"\n\ndata: ") + 1
        == block.count(b'"content":"')
        == block.count(b'"delta":')
        == block.count(b'"choices":[{')
        == events
    ):
        return None
    return events - block.count(b'"content":""')


def summarize_chat_stream(reads: list[bytes], times: list[float], t_sent: float) -> tuple[_StreamSummary, bytes]:
    """The stream's figures, read by read: a read whose events are all plain content chunks costs a few byte
    counts; any other read is split into events and classified one by one (``interpret_chat_stream``)."""
    if any(b"\r" in r for r in reads):  # CR line endings: the general splitter normalises them
        events, leftover = split_events(reads, times)
        return interpret_chat_stream(events, t_sent), leftover
    s = _StreamSummary()
    pending = b""
    for data, t in zip(reads, times, strict=True):
        pending += data
        cut = pending.rfind(b"\n\n")
        if cut < 0:
            continue
        block, pending = pending[:cut], pending[cut + 2 :]
        n = _plain_answer_block(block)
        if n is not None:
            if n:
                _add_tokens(s, t, t_sent, n, True)
            continue
        events, _ = split_events([block + b"\n\n"], [t])
        for ev in events:
            _event(s, ev, t_sent)
    if pending.endswith(b"\n") and times:
        events, _ = split_events([pending], [times[-1]])
        for ev in events:
            _event(s, ev, t_sent)
        pending = b""
    return s, pending


def _decode(data: bytes, s: _StreamSummary) -> tuple[bool, bool] | None:
    """The slow path: decode one event, keep the figures it carries, say whether it carried tokens."""
    if data == b"[DONE]":
        s.done = True
        return None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        s.error = s.error or f"malformed event: {_detail(data, 120)}"
        return None
    if not isinstance(obj, dict):
        return None
    if obj.get("error"):
        s.error = _detail(orjson.dumps(obj["error"]))
        return None
    for choice in obj.get("choices") or ():
        if choice.get("finish_reason"):
            s.finish_reason = choice["finish_reason"]
    if obj.get("usage"):
        s.usage = obj["usage"]
    if obj.get("timings"):
        s.timings = obj["timings"]
    return _token_kind(obj)


def collect_answer(events: list[Event]) -> dict[str, str]:
    """The answer and reasoning text of a chat stream (decodes every event: only for live history)."""
    content: list[str] = []
    reasoning: list[str] = []
    for ev in events:
        if ev.data == b"[DONE]":
            continue
        try:
            obj = orjson.loads(ev.data)
        except orjson.JSONDecodeError:
            continue
        for choice in (obj.get("choices") or ()) if isinstance(obj, dict) else ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                content.append(delta["content"])
            r = delta.get("reasoning_content") or delta.get("reasoning")
            if r:
                reasoning.append(r)
    return {"content": "".join(content), "reasoning": "".join(reasoning)}


def apply_usage(rec: RequestRecord, usage: dict[str, Any] | None, timings: dict[str, Any] | None) -> None:
    """Host-reported counts; absent fields stay None (absent is not zero)."""
    if usage:
        rec.prompt_tokens = usage.get("prompt_tokens")
        rec.output_tokens = usage.get("completion_tokens")
        details = usage.get("prompt_tokens_details") or {}
        rec.cached_tokens = details.get("cached_tokens")
        out_details = usage.get("completion_tokens_details") or {}
        rec.reasoning_tokens = out_details.get("reasoning_tokens")
    if timings:
        rec.server_timings = timings
        if rec.cached_tokens is None and "cache_n" in timings:
            rec.cached_tokens = timings["cache_n"]  # llama.cpp reports the reused prefix here


def _stale_connection(exc: aiohttp.ClientError) -> bool:
    """Errors of writing to, or reading headers from, a pooled connection the server closed (not a refusal)."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        return False
    return isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError)


class OpenAIChatClient:
    """Streams chat completions from one host and fills request records."""

    def __init__(self, host: HostConfig, http: aiohttp.ClientSession) -> None:
        self.host = host
        self.http = http
        self.url = host.base_url.rstrip("/") + "/chat/completions"
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        key = os.environ.get(host.api_key_env)
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._timeout = aiohttp.ClientTimeout(total=host.request_timeout_s, sock_read=host.stall_timeout_s)
        # While aiohttp's feed_data hook captures every body byte with its arrival time, a stream is read
        # by waiting for its end (one wake-up per call); after a capture misses bytes, piece by piece.
        wire_stamps.install()
        self._captured = True

    async def warm(self, connections: int) -> None:
        """Open ``connections`` pooled connections before the run (one per session), so no call's TTFT pays
        for a TCP handshake. A host that refuses or lacks ``/models`` only loses the warm-up."""
        url = self.host.base_url.rstrip("/") + "/models"

        async def one() -> None:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with self.http.get(url, headers=self._headers, timeout=aiohttp.ClientTimeout(total=10)) as r:
                    await r.read()
                    wire_stamps.forget(r.content)

        await asyncio.gather(*(one() for _ in range(connections)))

    async def call(self, body: bytes, rec: RequestRecord, answer: dict[str, Any] | None = None) -> None:
        """Send one request and fill ``rec``; on cancellation ``rec`` still holds what was seen.

        ``t_call`` is when the call began; ``t_sent`` when its bytes were handed to the socket (see
        wire_stamps), and every latency of the call is counted from there. With ``answer`` (a dict to fill),
        the host's answer text is collected too, for live history.
        """
        reads: list[bytes] = []
        times: list[float] = []
        headers = {**self._headers, "X-Request-Id": rec.id}
        rec.t_call = perf_counter()
        deadline = asyncio.get_running_loop().time() + self.host.request_timeout_s
        for attempt in range(2):
            sent: list[float] = []  # filled by wire_stamps' trace when the body goes out
            rec.t_sent = perf_counter()
            try:
                async with self.http.post(
                    self.url,
                    data=body,
                    headers=headers,
                    timeout=self._timeout,
                    trace_request_ctx=sent,
                    read_bufsize=_UNREAD_BODY_LIMIT,
                ) as resp:
                    rec.t_headers = perf_counter()
                    if sent:
                        rec.t_sent = sent[0]
                    rec.status = resp.status
                    if resp.status != 200:
                        text = await resp.read()
                        wire_stamps.forget(resp.content)
                        rec.t_done = perf_counter()
                        rec.error = "http_429" if resp.status == 429 else f"http_{resp.status // 100}xx"
                        rec.error_detail = _detail(text)
                        return
                    await self._receive(resp.content, reads, times, deadline)
                    if times:
                        rec.t_headers = min(rec.t_headers, times[0])  # headers came no later than the body
                rec.t_done = perf_counter()
            except asyncio.CancelledError:
                rec.t_done = perf_counter()
                rec.error, rec.error_detail = "cancelled", "stopped before the host finished"
                self._finish(rec, reads, times, answer)
                raise
            except TimeoutError:
                rec.t_done = perf_counter()
                rec.error = "timeout"
                rec.error_detail = "no bytes within the stall timeout, or the call timed out"
            except aiohttp.ClientError as exc:
                rec.t_done = perf_counter()
                if attempt == 0 and _stale_connection(exc) and rec.t_headers is None:
                    # A kept-alive connection the server had already closed (llama-server closes after every
                    # stream while announcing keep-alive). Nothing reached the host: send again on a fresh one.
                    rec.retries += 1
                    continue
                rec.error = "connect" if rec.t_headers is None else "disconnect"
                rec.error_detail = _detail(f"{type(exc).__name__}: {exc}")
            break
        self._finish(rec, reads, times, answer)

    async def _receive(
        self, content: aiohttp.StreamReader, reads: list[bytes], times: list[float], deadline: float
    ) -> None:
        """Fill ``reads`` and ``times`` with the body as it arrived, also when the stream fails or is
        cancelled half way (what came before stays)."""
        if not self._captured:
            try:
                async for data in content.iter_any():  # the hot path: a timestamp and the bytes
                    times.append(perf_counter())
                    reads.append(data)
            finally:
                wire_stamps.forget(content)
            return
        try:
            async with asyncio.timeout_at(deadline):  # aiohttp's total timeout does not cover wait_eof
                await content.wait_eof()
        finally:
            cap = wire_stamps.take(content)
            if cap is not None:
                reads += cap.reads
                times += cap.times
            elif content.total_bytes:  # the hook missed bytes: keep them with one coarse time, and
                self._captured = False  # read piece by piece from now on
                with contextlib.suppress(Exception):
                    if data := content.read_nowait():
                        reads.append(data)
                        times.append(perf_counter())

    @staticmethod
    def _finish(
        rec: RequestRecord, reads: list[bytes], times: list[float], answer: dict[str, Any] | None = None
    ) -> None:
        if answer is not None:
            answer.update(collect_answer(split_events(reads, times)[0]))
        s, leftover = summarize_chat_stream(reads, times, rec.t_sent)
        rec.t_first_token, rec.t_first_answer, rec.t_last_token = s.first_token, s.first_answer, s.last_token
        rec.output_events, rec.chunks, rec.finish_reason = s.events, s.chunks, s.finish_reason
        apply_usage(rec, s.usage, s.timings)
        if rec.error is not None:
            return
        if s.error:
            rec.error, rec.error_detail = "stream_error", s.error
        elif not s.done and s.usage is None:
            rec.error = "incomplete"
            rec.error_detail = "stream closed without usage or [DONE]" + (
                f" (trailing bytes: {_detail(leftover, 80)})" if leftover else ""
            )
        elif s.events == 0:
            rec.error, rec.error_detail = "empty", "no output tokens in the stream"
