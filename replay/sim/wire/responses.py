"""The bytes of OpenAI Responses API answers (``POST /v1/responses``).

A stream is SSE with ``event: <type>`` and ``data: {"type": <type>, "sequence_number": n, ...}``:
``response.created``, ``response.in_progress``, then per output item ``response.output_item.added``,
(for the message) ``response.content_part.added``, one delta event per token (``response.reasoning_text.delta``
in a reasoning item first, then ``response.output_text.delta``), the matching ``.done`` events and
``response.output_item.done``; it ends with ``response.completed`` (or ``response.incomplete`` when
``max_output_tokens`` cut the answer, or ``response.failed``), whose ``response.usage`` has the counts.
There is no ``[DONE]``. Event types and fields: openai-python ``src/openai/types/responses/``.

Every event carries its own sequence number, so a token's event is not a fixed slice: the piece cycle is
built over a format string (``%d`` where the number goes) and a run of tokens is one slice of it formatted
with one ``%`` over their consecutive numbers, in C.
"""

from __future__ import annotations

from typing import Any

from replay.sim.server.dialect_base import Dialect
from replay.sim.server.exchange import Counts, Exchange, Timings
from replay.sim.wire.openai import SLOT, PieceCycle, answer_text, dumps, named, pad_text, piece_text, spoil

_SEQ = "@@seq@@"


def responses_usage(c: Counts) -> dict[str, Any]:
    """``response.usage``."""
    return {
        "input_tokens": c.prompt,
        "input_tokens_details": {"cached_tokens": c.cached},
        "output_tokens": c.output,
        "output_tokens_details": {"reasoning_tokens": c.reasoning},
        "total_tokens": c.prompt + c.output,
    }


def _format_cycle(kind: str, fields: dict[str, Any]) -> PieceCycle:
    raw = named(kind, {"type": kind, "sequence_number": _SEQ, **fields, "delta": SLOT}).replace(b"%", b"%%")
    raw = raw.replace(b'"' + _SEQ.encode() + b'"', b"%d", 1)  # the second key: before any caller string
    return PieceCycle(raw.rsplit(SLOT.encode(), 1))


def _message(msg_id: str, text: str, status: str) -> dict[str, Any]:
    return {
        "id": msg_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _reasoning(rs_id: str, text: str) -> dict[str, Any]:
    return {"id": rs_id, "type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": text}]}


def response_object(
    x: Exchange,
    dialect: Dialect,
    shell: dict[str, Any],
    status: str,
    output: list[Any],
    usage: Any = None,
    **extra: Any,
) -> dict[str, Any]:
    """The Response object: what the request asked for (``shell``), where it stands, what it produced."""
    return {
        "id": f"resp_{x.request_id}",
        "object": "response",
        "created_at": x.created,
        "status": status,
        "error": None,
        "incomplete_details": None,
        **shell,
        "model": x.model,
        "output": output,
        "parallel_tool_calls": True,
        "service_tier": dialect.response_tier(x),
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "metadata": {},
        **extra,
    }


def output_items(x: Exchange, counts: Counts, finish_reason: str, pad: int = 0) -> list[dict[str, Any]]:
    """The output items of a finished answer: a reasoning item when it reasoned, then the message."""
    r, n = counts.reasoning, counts.output
    items = [_reasoning(f"rs_{x.request_id}", piece_text(0, r))] if r else []
    text = answer_text(r, n - r, pad)
    return [*items, _message(f"msg_{x.request_id}", text, "incomplete" if finish_reason == "length" else "completed")]


def terminal(finish_reason: str) -> tuple[str, str, dict[str, str] | None]:
    """(event type, status, incomplete_details) of an answer that ended by ``finish_reason``."""
    if finish_reason == "length":
        return "response.incomplete", "incomplete", {"reason": "max_output_tokens"}
    return "response.completed", "completed", None


def responses_body(
    x: Exchange,
    dialect: Dialect,
    shell: dict[str, Any],
    counts: Counts,
    finish_reason: str,
    usage: dict[str, Any] | None,
    pad: int = 0,
) -> bytes:
    """A non-streamed Response."""
    _, status, incomplete = terminal(finish_reason)
    items = output_items(x, counts, finish_reason, pad)
    return dumps(response_object(x, dialect, shell, status, items, usage, incomplete_details=incomplete))


class ResponsesStream:
    """The SSE events of one streamed Response; the first ``reasoning`` tokens go in a reasoning item."""

    hides_reasoning = False

    def __init__(
        self, exchange: Exchange, reasoning: int, dialect: Dialect, shell: dict[str, Any], bad: str | None = None
    ) -> None:
        self.x, self.dialect, self.shell, self.bad = exchange, dialect, shell, bad
        self.reported: dict[str, Any] | None = None
        self._r = reasoning
        self._seq = 0
        self._rs, self._msg = f"rs_{exchange.request_id}", f"msg_{exchange.request_id}"
        self._mi = 1 if reasoning else 0  # output_index of the message
        self._think = _format_cycle(
            "response.reasoning_text.delta", {"item_id": self._rs, "output_index": 0, "content_index": 0}
        )
        self._text = _format_cycle(
            "response.output_text.delta", {"item_id": self._msg, "output_index": self._mi, "content_index": 0}
        )
        self._message_open = False
        self._pad = 0

    def _ev(self, kind: str, **fields: Any) -> bytes:
        out = named(kind, {"type": kind, "sequence_number": self._seq, **fields})
        self._seq += 1
        return out

    def _take(self, cycle: PieceCycle, start: int, count: int) -> bytes:
        out = cycle.take(start, count) % tuple(range(self._seq, self._seq + count))
        self._seq += count
        return out

    def _response(self, status: str, output: list[Any], usage: Any = None, **extra: Any) -> dict[str, Any]:
        return response_object(self.x, self.dialect, self.shell, status, output, usage, **extra)

    def _open_message(self) -> bytes:
        self._message_open = True
        part = {"type": "output_text", "text": "", "annotations": []}
        item = {"id": self._msg, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        return self._ev("response.output_item.added", output_index=self._mi, item=item) + self._ev(
            "response.content_part.added", item_id=self._msg, output_index=self._mi, content_index=0, part=part
        )

    def _to_message(self) -> bytes:
        """Close the reasoning item, open the message."""
        text = piece_text(0, self._r)
        out = self._ev("response.reasoning_text.done", item_id=self._rs, output_index=0, content_index=0, text=text)
        out += self._ev("response.output_item.done", output_index=0, item=_reasoning(self._rs, text))
        return out + self._open_message()

    def opening(self, counts: Counts) -> bytes:
        shell = self._response("in_progress", [])
        out = self._ev("response.created", response=shell) + self._ev("response.in_progress", response=shell)
        if self._r:
            item = {"id": self._rs, "type": "reasoning", "summary": [], "content": []}
            return out + self._ev("response.output_item.added", output_index=0, item=item)
        return out + self._open_message()

    def tokens(self, start: int, count: int, reasoning_tokens: int) -> bytes:
        r = self._r
        n_reasoning = min(max(r - start, 0), count)
        out = self._take(self._think, start, n_reasoning) if n_reasoning else b""
        if count > n_reasoning:
            if not self._message_open:
                out += self._to_message()
            out += self._take(self._text, start + n_reasoning, count - n_reasoning)
        return out

    def closing(self, counts: Counts, finish_reason: str, timings: Timings, *, with_usage: bool = True) -> bytes:
        out = b"" if self._message_open else self._to_message() if self._r else self._open_message()
        text = answer_text(self._r, counts.output - self._r, self._pad)
        part = {"type": "output_text", "text": text, "annotations": []}
        kind, status, incomplete = terminal(finish_reason)
        message = _message(self._msg, text, "incomplete" if incomplete else "completed")
        out += self._ev(
            "response.output_text.done", item_id=self._msg, output_index=self._mi, content_index=0, text=text
        )
        out += self._ev(
            "response.content_part.done", item_id=self._msg, output_index=self._mi, content_index=0, part=part
        )
        out += self._ev("response.output_item.done", output_index=self._mi, item=message)
        usage = spoil(responses_usage(counts), ("input_tokens", "output_tokens"), self.bad) if with_usage else None
        items = [_reasoning(self._rs, piece_text(0, self._r)), message] if self._r else [message]
        return out + self._ev(kind, response=self._response(status, items, usage, incomplete_details=incomplete))

    def malformed(self) -> bytes:
        """An event cut short: valid SSE framing, invalid JSON, no token key."""
        out = b'event: response.in_progress\ndata: {"type":"response.in_progress","sequence_number":%d,"response":{\n\n'
        self._seq += 1
        return out % (self._seq - 1)

    def odd(self) -> bytes:
        """Valid JSON of an unexpected shape: an ``output_text.delta`` whose ``delta`` is a number."""
        return self._ev(
            "response.output_text.delta", item_id=self._msg, output_index=self._mi, content_index=0, delta=12345
        )

    def huge(self, index: int, nbytes: int) -> bytes:
        """Answer token ``index`` (the first answer token) as one padded delta. The stream repeats the whole
        text in four ``done`` events, so the delta carries a fifth of ``nbytes`` and the body is ``nbytes``."""
        out = b"" if self._message_open else self._to_message()
        self._pad = nbytes = nbytes // 5
        return out + self._ev(
            "response.output_text.delta",
            item_id=self._msg,
            output_index=self._mi,
            content_index=0,
            delta=piece_text(index, 1) + pad_text(nbytes),
        )

    def failure(self) -> bytes:
        """``response.failed`` with ``response.error``; the stream ends after it."""
        error = {
            "code": "server_error",
            "message": "The server had an error while processing your request (simulated midstream fault)",
        }
        return self._ev("response.failed", response=self._response("failed", [], error=error))
