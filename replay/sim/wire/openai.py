"""The bytes the sim sends, built so a token costs a slice, not a JSON dump.

One streaming shape per API, all with one event per token as vLLM and SGLang send them. This module has
the shared pieces and the two OpenAI shapes; ``wire_messages`` has Anthropic's and ``wire_responses`` the
Responses API's.

- OpenAI chat completions: a role chunk, token chunks (reasoning tokens in the dialect's reasoning field,
  answer tokens in ``delta.content``), a chunk with ``finish_reason``, an optional usage chunk with empty
  ``choices``, then ``data: [DONE]``. A dialect (``dialects``) adds its fields to the chunks' templates, so
  they cost nothing per token.
- OpenAI completions: ``text_completion`` chunks with ``choices[0].text``, the finish chunk, the optional
  usage chunk, ``[DONE]``.

Token pieces cycle through common words, each a single cl100k token that stays one token when joined,
so a client counting tokens in the text gets the same count the sim reports.
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson

from replay.sim.server.dialect_base import Dialect, openai_usage
from replay.sim.server.errors import stream_error
from replay.sim.server.exchange import Counts, Exchange, Timings

__all__ = ["DONE", "PIECES", "ChatStream", "CompletionStream", "Counts", "completion_body", "piece_text", "usage"]

# 44 words: one cycle is 183 characters, longer than the answer checks' repeated unit (replay.clients.answer_check
# MAX_PERIOD), so an ordinary simulated answer is not degenerate; the ``repeat`` fault makes one that is.
PIECES = tuple(
    b" " + w
    for w in b"the of and to in is that for it with as on was be by at this from or have an they which one you were "
    b"all there would their we been has when who will more if out so what up about".split()
)
DONE = b"data: [DONE]\n\n"
SLOT = "@@piece@@"
_BIG = "@@2**64@@"  # stands for 2**64 in a spoiled usage report (orjson encodes at most 64-bit integers)


class PieceCycle:
    """The events of one piece cycle laid end to end, twice, so any run of tokens is slices of it."""

    def __init__(self, parts: list[bytes]) -> None:
        items = [p.join(parts) for p in PIECES]
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


_TEXT = PieceCycle([b"", b""])


def piece_text(start: int, count: int) -> str:
    """The text of tokens ``start`` .. ``start + count - 1``."""
    return _TEXT.take(start, count).decode() if count > 0 else ""


def pad_text(nbytes: int) -> str:
    """About ``nbytes`` bytes of piece text (the ``huge`` fault's padding)."""
    period = len(_TEXT.take(0, len(PIECES)))
    return piece_text(0, len(PIECES) * (nbytes // period + 1))[:nbytes]


def answer_text(start: int, count: int, pad: int = 0) -> str:
    """The answer's text from token ``start``; with ``pad``, its first token padded as the ``huge`` fault does."""
    if not pad or count <= 0:
        return piece_text(start, count)
    return piece_text(start, 1) + pad_text(pad) + piece_text(start + 1, count - 1)


def usage(prompt: int, cached: int, output: int, reasoning: int) -> dict[str, Any]:
    """OpenAI usage object."""
    return openai_usage(Counts(prompt, cached, output, reasoning))


def spoil(obj: dict[str, Any], keys: tuple[str, ...], variant: str | None) -> dict[str, Any]:
    """``obj`` with the counts under ``keys`` of the wrong type or an absurd size (``bad_usage``)."""
    if variant is None:
        return obj
    out = dict(obj)
    for key in keys:
        v = out[key]
        out[key] = {"string": str(v), "negative": -v - 1, "float": v + 0.5, "huge": _BIG}[variant]
    return out


def dumps(obj: Any) -> bytes:
    out = orjson.dumps(obj)
    return out.replace(b'"' + _BIG.encode() + b'"', str(2**64).encode()) if _BIG.encode() in out else out


def event(obj: dict[str, Any]) -> bytes:
    return b"data: " + dumps(obj) + b"\n\n"


def named(name: str, obj: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\n" + event(obj)


def cycle_of(raw: bytes, slots: int = 1) -> PieceCycle:
    # The slots sit after every caller-supplied string (id, model), so splitting from the right finds them.
    return PieceCycle(raw.rsplit(SLOT.encode(), slots))


# A chunk cut short, as a broken proxy or a crashed worker leaves it: valid SSE framing, invalid JSON
# that carries no token key, so any client has to decode it to classify it.
def malformed_event(head: bytes) -> bytes:
    return head + b'"choices":[{"index":0,"delta":{\n\n'


class ChatStream:
    """The SSE events of one streamed chat completion, in ``dialect``'s shape."""

    def __init__(
        self,
        completion_id: str,
        model: str,
        created: int,
        dialect: Dialect | None = None,
        exchange: Exchange | None = None,
        include_usage: bool = False,
    ) -> None:
        self.dialect = d = dialect or Dialect()
        self.x = x = exchange or Exchange(completion_id, "chat", model, created)
        self.include_usage = include_usage
        self.bad: str | None = None  # the bad_usage variant spoiling the usage report
        self._base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            **d.chunk_fields(x),
        }
        self._content = cycle_of(self._chunk({"content": SLOT}))
        fields = d.reasoning_fields
        self.hides_reasoning = not fields  # reasoning tokens are computed but not sent (OpenAI)
        self._reasoning = cycle_of(self._chunk(dict.fromkeys(fields, SLOT)), len(fields)) if fields else None
        self.reported: dict[str, Any] | None = None  # the server timings the closing reported

    def _chunk(
        self, delta: dict[str, Any], finish_reason: str | None = None, meta: dict[str, int] | None = None, **extra: Any
    ) -> bytes:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        if meta is not None:
            choice["meta_info"] = meta
        return event({**self._base, "choices": [choice], **extra})

    def opening(self, counts: Counts) -> bytes:
        """The role chunk: the assistant role and empty content, no token."""
        return self._chunk({"role": "assistant", "content": ""}, **self.dialect.first_fields(self.x))

    def tokens(self, start: int, count: int, reasoning_tokens: int) -> bytes:
        """One event per token for tokens ``start`` .. ``start + count - 1``; the first
        ``reasoning_tokens`` of the answer are reasoning (nothing, when the dialect hides them)."""
        n_reasoning = min(max(reasoning_tokens - start, 0), count)
        out = self._reasoning.take(start, n_reasoning) if n_reasoning and self._reasoning else b""
        if count > n_reasoning:
            out += self._content.take(start + n_reasoning, count - n_reasoning)
        return out

    def closing(self, counts: Counts, finish_reason: str, timings: Timings, *, with_usage: bool = True) -> bytes:
        """The finish chunk (with the dialect's final fields), the usage chunk if it goes out, ``[DONE]``."""
        d, x = self.dialect, self.x
        reported = (
            spoil(d.usage(counts, timings), ("prompt_tokens", "completion_tokens"), self.bad) if with_usage else None
        )
        top = reported if self.include_usage or d.usage_always else None
        extra = d.final_fields(x, counts, timings, reported)
        if top is not None and d.usage_on_finish:
            extra["usage"], top = top, None
        if reported is not None or not d.timings_in_usage:
            self.reported = d.reported_timings(x, counts, timings)
        out = self._chunk({}, finish_reason, d.spec_meta(counts), **extra)
        if top is not None:
            out += event({**self._base, "choices": [], "usage": top})
        return out + DONE

    def malformed(self) -> bytes:
        return malformed_event(b'data: {"id":' + orjson.dumps(self._base["id"]) + b',"object":"chat.completion.chunk",')

    def odd(self) -> bytes:
        """Valid JSON of an unexpected shape: ``choices`` a string."""
        return event({**self._base, "choices": "abc"})

    def huge(self, index: int, nbytes: int) -> bytes:
        """Answer token ``index`` as one content delta padded to about ``nbytes`` bytes."""
        return self._chunk({"content": piece_text(index, 1) + pad_text(nbytes)})

    def failure(self) -> bytes:
        """A mid-stream error in the dialect's shape; the stream ends after it."""
        error = stream_error("chat", self.dialect)
        if self.dialect.errors == "openrouter":
            out = self._chunk({"content": ""}, "error", error=error)
        else:
            out = event({"error": error})
        return out + DONE if self.dialect.done_after_error else out


def completion_body(
    completion_id: str,
    model: str,
    created: int,
    output: int,
    reasoning: int,
    usage_obj: dict[str, Any] | None,
    finish_reason: str = "length",
    extra: dict[str, Any] | None = None,
    reasoning_field: str | None = "reasoning_content",
    pad: int = 0,
) -> bytes:
    """A non-streamed chat completion carrying ``output`` tokens, the first ``reasoning`` as reasoning."""
    message: dict[str, Any] = {"role": "assistant", "content": answer_text(reasoning, output - reasoning, pad)}
    if reasoning and reasoning_field:
        message[reasoning_field] = piece_text(0, reasoning)
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
    body = {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        **(extra or {}),
        "choices": [choice],
    }
    if usage_obj is not None:
        body["usage"] = usage_obj
    return dumps(body)


class CompletionStream:
    """The SSE events of one streamed OpenAI (legacy) completion."""

    hides_reasoning = False

    def __init__(
        self,
        completion_id: str,
        model: str,
        created: int,
        dialect: Dialect | None = None,
        exchange: Exchange | None = None,
        include_usage: bool = False,
    ) -> None:
        self.dialect = dialect or Dialect()
        self.include_usage = include_usage
        self.bad: str | None = None
        self.reported: dict[str, Any] | None = None
        self._base = {"id": completion_id, "object": "text_completion", "created": created, "model": model}
        self._text = cycle_of(self._chunk(SLOT))

    def _chunk(self, text: str, finish_reason: str | None = None, meta: dict[str, int] | None = None) -> bytes:
        choice: dict[str, Any] = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        if meta is not None:
            choice["meta_info"] = meta
        return event({**self._base, "choices": [choice]})

    def opening(self, counts: Counts) -> bytes:
        return b""

    def tokens(self, start: int, count: int, reasoning_tokens: int) -> bytes:
        return self._text.take(start, count)

    def closing(self, counts: Counts, finish_reason: str, timings: Timings, *, with_usage: bool = True) -> bytes:
        out = self._chunk("", finish_reason, self.dialect.spec_meta(counts))
        if with_usage and (self.include_usage or self.dialect.usage_always):
            u = spoil(
                usage(counts.prompt, counts.cached, counts.output, 0), ("prompt_tokens", "completion_tokens"), self.bad
            )
            out += event({**self._base, "choices": [], "usage": u})
        return out + DONE

    def malformed(self) -> bytes:
        return malformed_event(b'data: {"id":' + orjson.dumps(self._base["id"]) + b',"object":"text_completion",')

    def odd(self) -> bytes:
        return event({**self._base, "choices": "abc"})

    def huge(self, index: int, nbytes: int) -> bytes:
        return self._chunk(piece_text(index, 1) + pad_text(nbytes))

    def failure(self) -> bytes:
        return event({"error": stream_error("completions", self.dialect)}) + DONE


def text_completion_body(
    completion_id: str,
    model: str,
    created: int,
    output: int,
    usage_obj: dict[str, Any] | None,
    finish_reason: str,
    pad: int = 0,
) -> bytes:
    """A non-streamed completion carrying ``output`` tokens."""
    choice = {"index": 0, "text": answer_text(0, output, pad), "logprobs": None, "finish_reason": finish_reason}
    body = {"id": completion_id, "object": "text_completion", "created": created, "model": model, "choices": [choice]}
    if usage_obj is not None:
        body["usage"] = usage_obj
    return dumps(body)
