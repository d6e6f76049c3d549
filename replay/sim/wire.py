"""The bytes the sim sends, built so a token costs a slice, not a JSON dump.

Three APIs, one streaming shape each, all with one event per token as vLLM and SGLang send them:

- OpenAI chat completions: a role chunk, token chunks (reasoning tokens in ``delta.reasoning_content``,
  answer tokens in ``delta.content``), a chunk with ``finish_reason``, an optional usage chunk with empty
  ``choices``, then ``data: [DONE]``.
- OpenAI completions: ``text_completion`` chunks with ``choices[0].text``, the finish chunk, the optional
  usage chunk, ``[DONE]``.
- Anthropic Messages: ``message_start`` (its usage carries ``input_tokens``, ``cache_read_input_tokens``
  and ``cache_creation_input_tokens``), a ``thinking`` content block when the answer reasons, a ``text``
  block, one ``content_block_delta`` per token, ``content_block_stop``, ``message_delta`` (stop reason and
  output usage) and ``message_stop``.

Token pieces cycle through common words, each a single cl100k token that stays one token when joined,
so a client counting tokens in the text gets the same count the sim reports.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import orjson

PIECES = tuple(b" " + w for w in b"the of and to in is that for it with as on was be by at".split())
DONE = b"data: [DONE]\n\n"
_SLOT = "@@piece@@"


class _PieceCycle:
    """The events of one piece cycle laid end to end, twice, so any run of tokens is slices of it."""

    def __init__(self, head: bytes, tail: bytes) -> None:
        items = [head + p + tail for p in PIECES]
        self._period = b"".join(items)
        self._twice = self._period * 2
        self._offsets = list(itertools.accumulate((len(i) for i in items * 2), initial=0))

    def take(self, start: int, count: int) -> bytes:
        """Bytes of tokens ``start`` .. ``start + count - 1``."""
        first = start % len(PIECES)
        rounds, rest = divmod(count, len(PIECES))
        a = self._offsets[first]
        tail = self._twice[a : self._offsets[first + rest]]
        if not rounds:
            return tail
        return self._twice[a : a + len(self._period)] * rounds + tail


_TEXT = _PieceCycle(b"", b"")


def piece_text(start: int, count: int) -> str:
    """The text of tokens ``start`` .. ``start + count - 1``."""
    return _TEXT.take(start, count).decode() if count > 0 else ""


def usage(prompt: int, cached: int, output: int, reasoning: int) -> dict[str, Any]:
    """OpenAI usage object."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _named(name: str, obj: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\n" + _event(obj)


def _cycle_of(event: bytes) -> _PieceCycle:
    # The slot sits after every caller-supplied string (id, model), so rpartition finds it.
    head, _, tail = event.rpartition(_SLOT.encode())
    return _PieceCycle(head, tail)


@dataclass(frozen=True, slots=True)
class Counts:
    """What a usage report says: prompt, cached and output tokens (``created``: newly cached, Anthropic)."""

    prompt: int
    cached: int
    output: int
    reasoning: int
    created: int = 0


# A chunk cut short, as a broken proxy or a crashed worker leaves it: valid SSE framing, invalid JSON
# that carries no token key, so any client has to decode it to classify it.
def _malformed(head: bytes) -> bytes:
    return head + b'"choices":[{"index":0,"delta":{\n\n'


class ChatStream:
    """The SSE events of one streamed chat completion."""

    def __init__(self, completion_id: str, model: str, created: int) -> None:
        self._base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}
        self._content = self._cycle("content")
        self._reasoning = self._cycle("reasoning_content")

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return _event({**self._base, "choices": [choice]})

    def _cycle(self, field: str) -> _PieceCycle:
        return _cycle_of(self._chunk({field: _SLOT}))

    def opening(self, counts: Counts) -> bytes:
        return self.role()

    def closing(self, counts: Counts | None, finish_reason: str) -> bytes:
        return self.finish(usage(counts.prompt, counts.cached, counts.output, counts.reasoning) if counts else None,
                           finish_reason)  # fmt: skip

    def malformed(self) -> bytes:
        return _malformed(b'data: {"id":' + orjson.dumps(self._base["id"]) + b',"object":"chat.completion.chunk",')

    def role(self) -> bytes:
        """The opening chunk: the assistant role and empty content, no token."""
        return self._chunk({"role": "assistant", "content": ""})

    def tokens(self, start: int, count: int, reasoning_tokens: int) -> bytes:
        """One event per token for tokens ``start`` .. ``start + count - 1``; the first
        ``reasoning_tokens`` of the answer are reasoning."""
        n_reasoning = min(max(reasoning_tokens - start, 0), count)
        out = self._reasoning.take(start, n_reasoning) if n_reasoning else b""
        if count > n_reasoning:
            out += self._content.take(start + n_reasoning, count - n_reasoning)
        return out

    def finish(self, usage_obj: dict[str, Any] | None, finish_reason: str = "length") -> bytes:
        """The closing events: finish_reason, the usage chunk if asked for, ``[DONE]``."""
        out = self._chunk({}, finish_reason)
        if usage_obj is not None:
            out += _event({**self._base, "choices": [], "usage": usage_obj})
        return out + DONE


def completion_body(
    completion_id: str,
    model: str,
    created: int,
    output: int,
    reasoning: int,
    usage_obj: dict[str, Any],
    finish_reason: str = "length",
) -> bytes:
    """A non-streamed chat completion carrying ``output`` tokens, the first ``reasoning`` as reasoning."""
    message: dict[str, Any] = {"role": "assistant", "content": piece_text(reasoning, output - reasoning)}
    if reasoning:
        message["reasoning_content"] = piece_text(0, reasoning)
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
    return orjson.dumps(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [choice],
            "usage": usage_obj,
        }
    )


def error_body(message: str, kind: str = "invalid_request_error", param: str | None = None) -> bytes:
    """OpenAI-style error object."""
    return orjson.dumps({"error": {"message": message, "type": kind, "param": param, "code": None}})


class CompletionStream:
    """The SSE events of one streamed OpenAI (legacy) completion."""

    def __init__(self, completion_id: str, model: str, created: int) -> None:
        self._base = {"id": completion_id, "object": "text_completion", "created": created, "model": model}
        self._text = _cycle_of(self._chunk(_SLOT))

    def _chunk(self, text: str, finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        return _event({**self._base, "choices": [choice]})

    def opening(self, counts: Counts) -> bytes:
        return b""

    def tokens(self, start: int, count: int, reasoning_tokens: int) -> bytes:
        return self._text.take(start, count)

    def closing(self, counts: Counts | None, finish_reason: str) -> bytes:
        out = self._chunk("", finish_reason)
        if counts is not None:
            out += _event({**self._base, "choices": [], "usage": usage(counts.prompt, counts.cached, counts.output, 0)})
        return out + DONE

    def malformed(self) -> bytes:
        return _malformed(b'data: {"id":' + orjson.dumps(self._base["id"]) + b',"object":"text_completion",')


def text_completion_body(
    completion_id: str, model: str, created: int, output: int, usage_obj: dict[str, Any], finish_reason: str
) -> bytes:
    """A non-streamed completion carrying ``output`` tokens."""
    choice = {"index": 0, "text": piece_text(0, output), "logprobs": None, "finish_reason": finish_reason}
    body = {"id": completion_id, "object": "text_completion", "created": created, "model": model}
    return orjson.dumps({**body, "choices": [choice], "usage": usage_obj})


_STOP_REASONS = {"length": "max_tokens", "stop": "end_turn"}


def anthropic_usage(counts: Counts, output: int) -> dict[str, int]:
    """Anthropic usage: input_tokens excludes what was read from or written to the cache."""
    return {
        "input_tokens": counts.prompt - counts.cached - counts.created,
        "cache_creation_input_tokens": counts.created,
        "cache_read_input_tokens": counts.cached,
        "output_tokens": output,
    }


class MessagesStream:
    """The SSE events of one streamed Anthropic Messages answer; the first ``reasoning`` tokens go in a
    thinking block, the rest in a text block."""

    def __init__(self, message_id: str, model: str, reasoning: int) -> None:
        self._id, self._model, self._reasoning = message_id, model, reasoning
        text_index = 1 if reasoning else 0
        self._thinking = _cycle_of(self._delta(0, {"type": "thinking_delta", "thinking": _SLOT}))
        self._text = _cycle_of(self._delta(text_index, {"type": "text_delta", "text": _SLOT}))
        self._text_start = _named(
            "content_block_start",
            {"type": "content_block_start", "index": text_index, "content_block": {"type": "text", "text": ""}},
        )
        self._text_index = text_index

    @staticmethod
    def _delta(index: int, delta: dict[str, str]) -> bytes:
        return _named("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})

    @staticmethod
    def _stop(index: int) -> bytes:
        return _named("content_block_stop", {"type": "content_block_stop", "index": index})

    def opening(self, counts: Counts) -> bytes:
        message = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": anthropic_usage(counts, 1),
        }
        out = _named("message_start", {"type": "message_start", "message": message})
        if self._reasoning:
            block = {"type": "thinking", "thinking": ""}
            return out + _named(
                "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
            )
        return out + self._text_start

    def tokens(self, start: int, count: int, reasoning_tokens: int) -> bytes:
        r = self._reasoning
        n_reasoning = min(max(r - start, 0), count)
        out = self._thinking.take(start, n_reasoning) if n_reasoning else b""
        if count > n_reasoning:
            if start + n_reasoning == r and r:  # the thinking block ends here
                signature = {"type": "signature_delta", "signature": "replay-sim"}
                out += self._delta(0, signature) + self._stop(0) + self._text_start
            out += self._text.take(start + n_reasoning, count - n_reasoning)
        return out

    def closing(self, counts: Counts | None, finish_reason: str) -> bytes:
        output = counts.output if counts is not None else 0
        stop = {"type": "message_delta", "delta": {"stop_reason": _STOP_REASONS.get(finish_reason, finish_reason),
                                                   "stop_sequence": None}}  # fmt: skip
        if counts is not None:
            stop["usage"] = {"output_tokens": output}
        return (
            self._stop(self._text_index)
            + _named("message_delta", stop)
            + _named("message_stop", {"type": "message_stop"})
        )

    def malformed(self) -> bytes:
        return _malformed(b'event: content_block_delta\ndata: {"type":"content_block_delta",')


def anthropic_body(message_id: str, model: str, counts: Counts, finish_reason: str) -> bytes:
    """A non-streamed Anthropic message."""
    content: list[dict[str, str]] = []
    if counts.reasoning:
        content.append({"type": "thinking", "thinking": piece_text(0, counts.reasoning), "signature": "replay-sim"})
    content.append({"type": "text", "text": piece_text(counts.reasoning, counts.output - counts.reasoning)})
    return orjson.dumps(
        {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": _STOP_REASONS.get(finish_reason, finish_reason),
            "stop_sequence": None,
            "usage": anthropic_usage(counts, counts.output),
        }
    )


def anthropic_error_body(message: str, kind: str = "invalid_request_error") -> bytes:
    """Anthropic-style error object."""
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
