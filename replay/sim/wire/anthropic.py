"""The bytes of Anthropic Messages answers: ``message_start`` (its usage carries ``input_tokens``,
``cache_read_input_tokens`` and ``cache_creation_input_tokens``), a ``thinking`` content block when the
answer reasons, a ``text`` block, one ``content_block_delta`` per token (a slice of a piece cycle),
``content_block_stop``, ``message_delta`` (stop reason and output usage) and ``message_stop``.
"""

from __future__ import annotations

from typing import Any

from replay.sim.server.dialect_base import Dialect
from replay.sim.server.exchange import Counts, Exchange, Timings
from replay.sim.wire.openai import (
    SLOT,
    answer_text,
    cycle_of,
    dumps,
    malformed_event,
    named,
    pad_text,
    piece_text,
    spoil,
)

STOP_REASONS = {"length": "max_tokens", "stop": "end_turn"}


def anthropic_usage(counts: Counts, output: int) -> dict[str, Any]:
    """Anthropic usage: input_tokens excludes what was read from or written to the cache."""
    return {
        "input_tokens": counts.prompt - counts.cached - counts.created,
        "cache_creation_input_tokens": counts.created,
        "cache_read_input_tokens": counts.cached,
        "output_tokens": output,
    }


class MessagesStream:
    """The SSE events of one streamed Anthropic Messages answer; the first ``reasoning`` tokens go in a
    thinking block, the rest in a text block. ``bad``: the ``bad_usage`` variant spoiling its counts."""

    hides_reasoning = False

    def __init__(
        self,
        message_id: str,
        model: str,
        reasoning: int,
        dialect: Dialect | None = None,
        exchange: Exchange | None = None,
        bad: str | None = None,
    ) -> None:
        self._id, self._model, self._reasoning = message_id, model, reasoning
        self.dialect = dialect or Dialect()
        self.x = exchange or Exchange(message_id, "messages", model, 0)
        self.bad = bad
        self.reported: dict[str, Any] | None = None
        text_index = 1 if reasoning else 0
        self._thinking = cycle_of(self._delta(0, {"type": "thinking_delta", "thinking": SLOT}))
        self._text = cycle_of(self._delta(text_index, {"type": "text_delta", "text": SLOT}))
        self._text_start = named(
            "content_block_start",
            {"type": "content_block_start", "index": text_index, "content_block": {"type": "text", "text": ""}},
        )
        self._text_index = text_index

    @staticmethod
    def _delta(index: int, delta: dict[str, Any] | list[Any]) -> bytes:
        return named("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})

    @staticmethod
    def _stop(index: int) -> bytes:
        return named("content_block_stop", {"type": "content_block_stop", "index": index})

    def usage(self, counts: Counts, output: int) -> dict[str, Any]:
        u = anthropic_usage(counts, output) | self.dialect.messages_usage(self.x)
        return spoil(u, ("input_tokens", "output_tokens"), self.bad)

    def opening(self, counts: Counts) -> bytes:
        message: dict[str, Any] = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self.usage(counts, 1),
        }
        out = named("message_start", {"type": "message_start", "message": message})
        if self._reasoning:
            block = {"type": "thinking", "thinking": ""}
            return out + named(
                "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
            )
        return out + self._text_start

    def _thinking_end(self) -> bytes:
        signature = {"type": "signature_delta", "signature": "replay-sim"}
        return self._delta(0, signature) + self._stop(0) + self._text_start

    def tokens(self, start: int, count: int, reasoning_tokens: int) -> bytes:
        r = self._reasoning
        n_reasoning = min(max(r - start, 0), count)
        out = self._thinking.take(start, n_reasoning) if n_reasoning else b""
        if count > n_reasoning:
            if start + n_reasoning == r and r:  # the thinking block ends here
                out += self._thinking_end()
            out += self._text.take(start + n_reasoning, count - n_reasoning)
        return out

    def closing(self, counts: Counts, finish_reason: str, timings: Timings, *, with_usage: bool = True) -> bytes:
        stop: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": STOP_REASONS.get(finish_reason, finish_reason), "stop_sequence": None},
        }
        if with_usage:
            stop["usage"] = spoil({"output_tokens": counts.output}, ("output_tokens",), self.bad)
        return (
            self._stop(self._text_index)
            + named("message_delta", stop)
            + named("message_stop", {"type": "message_stop"})
        )

    def malformed(self) -> bytes:
        return malformed_event(b'event: content_block_delta\ndata: {"type":"content_block_delta",')

    def odd(self) -> bytes:
        """Valid JSON of an unexpected shape: a ``content_block_delta`` whose ``delta`` is a list."""
        return self._delta(self._text_index, [{"type": "text_delta", "text": piece_text(0, 1)}])

    def huge(self, index: int, nbytes: int) -> bytes:
        """Answer token ``index`` (the first answer token) as one text delta padded to about ``nbytes``."""
        head = self._thinking_end() if index == self._reasoning and self._reasoning else b""
        return head + self._delta(
            self._text_index, {"type": "text_delta", "text": piece_text(index, 1) + pad_text(nbytes)}
        )

    def failure(self) -> bytes:
        """An ``error`` event (overloaded), as Anthropic sends under load; the stream ends after it."""
        return named("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


def anthropic_body(
    message_id: str,
    model: str,
    counts: Counts,
    finish_reason: str,
    usage: dict[str, Any] | None = None,
    pad: int = 0,
) -> bytes:
    """A non-streamed Anthropic message (``usage``: the usage object to send, None for none)."""
    content: list[dict[str, str]] = []
    if counts.reasoning:
        content.append({"type": "thinking", "thinking": piece_text(0, counts.reasoning), "signature": "replay-sim"})
    content.append({"type": "text", "text": answer_text(counts.reasoning, counts.output - counts.reasoning, pad)})
    body: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": STOP_REASONS.get(finish_reason, finish_reason),
        "stop_sequence": None,
    }
    if usage is not None:
        body["usage"] = usage
    return dumps(body)
