"""OpenAI chat-completions bytes the sim sends, built so a token costs a slice, not a JSON dump.

Streaming follows OpenAI and vLLM: a role chunk, one ``data:`` event per token (reasoning tokens in
``delta.reasoning_content``, answer tokens in ``delta.content``), a chunk with ``finish_reason``, an
optional usage chunk with empty ``choices``, then ``data: [DONE]``. Token pieces cycle through common
words, each a single cl100k token that stays one token when joined, so a client counting tokens in the
text gets the same count the sim reports.
"""

from __future__ import annotations

import itertools
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
        # The slot sits after every caller-supplied string (id, model), so rpartition finds it.
        head, _, tail = self._chunk({field: _SLOT}).rpartition(_SLOT.encode())
        return _PieceCycle(head, tail)

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

    def finish(self, usage_obj: dict[str, Any] | None) -> bytes:
        """The closing events: finish_reason, the usage chunk if asked for, ``[DONE]``."""
        out = self._chunk({}, "length")
        if usage_obj is not None:
            out += _event({**self._base, "choices": [], "usage": usage_obj})
        return out + DONE


def completion_body(
    completion_id: str, model: str, created: int, output: int, reasoning: int, usage_obj: dict[str, Any]
) -> bytes:
    """A non-streamed chat completion carrying ``output`` tokens, the first ``reasoning`` as reasoning."""
    message: dict[str, Any] = {"role": "assistant", "content": piece_text(reasoning, output - reasoning)}
    if reasoning:
        message["reasoning_content"] = piece_text(0, reasoning)
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "length"}
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
