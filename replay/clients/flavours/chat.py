"""OpenAI chat completions (``/chat/completions``), as OpenAI and every OpenAI-compatible host stream it.

A body is the canonical messages as they were serialised at load (``Message.wire``), in order, never joined. A stream
is ``data:`` chunks with ``choices[].delta`` (``content``, ``tool_calls``, ``refusal``; reasoning in
``reasoning_content`` or ``reasoning``), a chunk with ``finish_reason``, a usage chunk
(``stream_options.include_usage``) and ``[DONE]``.
An error mid-stream is a chunk with a top-level ``error`` (``../shared/PROVIDERS.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from replay.clients import provider_fields
from replay.clients import usage as usage_mod
from replay.clients.body import Body, Piece, joined
from replay.clients.flavours.base import Conversation, Flavour, body_fields
from replay.clients.stream import ANSWER, NONE, REASONING, StreamState
from replay.clients.usage import excerpt, get, safe_dumps
from replay.workload.trajectory import Message

_SERVED = ("model", "system_fingerprint", "service_tier", "provider")  # what a chunk says about who served it


class ChatFlavour(Flavour):
    name = "chat"
    path = "/chat/completions"
    end_marker = "[DONE] or a usage chunk"

    def fixed_fields(self) -> bytes:
        return body_fields({"stream": True, "stream_options": {"include_usage": True}, **self.options.extra_body})

    def fragment(self, message: Message) -> bytes:
        return message.wire  # the canonical format is this one

    def body(
        self,
        context: Sequence[Message],
        max_tokens: int,
        tools: list[dict[str, Any]] | None,
        conversation: Conversation | None,
    ) -> Body:
        parts: list[Piece] = [b'{"model":', self._model, b',"messages":[']
        joined(parts, [m.wire for m in context])
        parts.append(b'],"max_tokens":' + str(max_tokens).encode() + self.length_fields(max_tokens))
        tools_wire = self.tools_wire(tools)
        if tools_wire:
            parts += [b',"tools":', tools_wire]
        parts.append(b"," + self._fixed + b"}")
        return Body(parts)

    # --- reading -------------------------------------------------------------------------------------------------
    EMPTY_DELTA = b'"content":""'

    def plain_tokens(self, region: bytes) -> int | None:
        """Counting keys over the whole region replaces a per-event loop. ``"content":"`` can only be a key (quotes in
        values are escaped) and events are separated by exactly one blank line, so when every event starts with
        ``data: `` and has exactly one choice and one delta object whose first key is its content (as OpenAI, vLLM
        and SGLang write them; anything else is decoded), and nothing in the region needs decoding or is reasoning,
        each event is a content delta, empty or not."""
        if b'"content":"' not in region or region[:6] != b"data: ":
            return None
        events = region.count(b"\n\n") + 1
        if not only_plain_fields(region, objects=events):  # one object per event: its delta
            return None
        if not (
            region.count(b"\n\ndata: ") + 1
            == region.count(b'"content":"')
            == region.count(b'"delta":{"content":"')
            == region.count(b'"choices":[{')
            == region.count(b"}]")  # each event's one choice, closed: no other element after it
            == region.count(b'":[')  # and no other array
            == events
        ):
            return None
        return events - region.count(self.EMPTY_DELTA)

    def scan(self, name: bytes | None, data: bytes) -> int | None:
        if (
            b": " in data
            or data.count(b'"choices":[{') != 1
            or data.count(b'"delta":{') != 1
            or data.count(b"}]") != 1
            or data.count(b'":[') != 1
        ):
            return None  # the server writes JSON with spaces, or the event is of an unusual shape: decode
        for key, kind in ((b'"delta":{"content":"', ANSWER), (b'"delta":{"reasoning_content":"', REASONING),
                          (b'"delta":{"reasoning":"', REASONING)):  # fmt: skip
            if key in data:
                if (
                    data.count(key[9:]) != 1
                    or key[9:-1] + b'""' in data
                    or not only_plain_fields(data, kind, objects=1)
                ):
                    return None
                return kind
        return None  # tool calls, refusals and anything unusual: decode

    def decode(self, st: StreamState, name: bytes | None, data: bytes) -> int:
        if data == b"[DONE]":
            st.ended = True
            return NONE
        obj = decode_object(st, data)
        if obj is None:
            return NONE
        if has_error(obj.get("error")):
            st.error = excerpt(safe_dumps(obj["error"])) or "error"
            return NONE
        if "x_groq" in obj and has_error(groq_error := get(obj, "x_groq", "error")):  # (Groq's own error member)
            st.error = excerpt(safe_dumps(groq_error))
            return NONE
        kind = self._choices(st, obj, data, "delta")
        note_common(st, obj)
        return kind

    def _choices(self, st: StreamState, obj: dict[str, Any], data: bytes, key: str) -> int:
        choices = obj.get("choices")
        if choices is None:
            return NONE
        if not isinstance(choices, list):
            st.bad("'choices' is not a list", data)
            return NONE
        kind = NONE
        for choice in choices:
            if not isinstance(choice, dict):
                st.bad("a choice is not an object", data)
                continue
            finish = choice.get("finish_reason")
            if finish is not None:
                if not isinstance(finish, str):
                    st.bad("'finish_reason' is not a string", data)
                else:
                    st.finish_reason = finish
                    if finish == "error":  # OpenRouter: an upstream failure after the stream began
                        st.error = st.error or "finish_reason error"
            kind = max(kind, self.delta_kind(st, choice.get(key), data))
        return kind

    def delta_kind(self, st: StreamState, delta: Any, data: bytes) -> int:
        """What one choice's delta carries."""
        if delta is None:
            return NONE
        if not isinstance(delta, dict):
            st.bad("'delta' is not an object", data)
            return NONE
        kind = NONE
        for key in ("content", "refusal"):
            value = delta.get(key)
            if value is None:
                continue
            if not isinstance(value, str):
                st.bad(f"'{key}' is not a string", data)
            elif value:
                kind = ANSWER
                st.collect(True, value)
        calls = delta.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
                st.bad("'tool_calls' is not a list of objects", data)
            elif calls:
                kind = ANSWER
                for i, c in enumerate(calls):  # the calls themselves (live history, answer checks), by their index
                    fn = c.get("function") if isinstance(c.get("function"), dict) else {}
                    st.call_part(c.get("index", i), c.get("id"), fn.get("name"), fn.get("arguments"))
        for key in ("reasoning_content", "reasoning"):
            value = delta.get(key)
            if value is None:
                continue
            if not isinstance(value, str):
                st.bad(f"'{key}' is not a string", data)
            elif value:
                kind = max(kind, REASONING)
                st.collect(False, value)
                break
        return kind

    def finish(self, st: StreamState, tail: bytes) -> None:
        st.usage = openai_usage(st)
        ended_without_done(st)


def ended_without_done(st: StreamState) -> None:
    """Some servers close right after the usage chunk, without ``[DONE]``: the stream ended if it said how it
    finished and carried usage. Usage alone is no end: vLLM's ``continuous_usage_stats`` and some gateways put it
    on every chunk, so a stream cut in the middle carries it too."""
    if not st.ended and st.usage_parts and st.finish_reason is not None:
        st.ended = True


def only_plain_fields(buf: bytes, kind: int = ANSWER, objects: int = 0) -> bool:
    """Nothing in ``buf`` that a full decode would read as a figure or find malformed: no error; no object-valued
    field but the ``objects`` the caller expects (each chat event's delta), so no usage, timings, ``x_groq``,
    ``time_info``, ``perf_metrics`` or ``provider_metadata`` (one count for all of them); no finish reason,
    refusal or tool calls (``null`` values aside); and no reasoning in an answer (``kind`` REASONING: reasoning
    allowed, as in an event the scan already knows to be one). The fast paths take only compact JSON
    (``"key":"``), so an object value is always written ``":{``; a ``\\":{`` inside a string only adds to the
    count and sends the buffer to a full decode."""
    if kind == ANSWER and b"reasoning" in buf:
        return False
    if b'"error"' in buf or buf.count(b'":{') != objects:
        return False
    # Null is fine: OpenAI sends "refusal":null and "finish_reason":null, vLLM "usage":null, on token chunks.
    for key in (b'"usage":', b'"finish_reason":', b'"refusal":', b'"tool_calls":'):
        if key in buf and buf.count(key) != buf.count(key + b"null"):
            return False
    return True


def has_error(value: Any) -> bool:
    """Whether an ``error`` member says the call failed: any value but null and false (an empty object or string
    too: the host sent an error and said nothing about it)."""
    return value is not None and value is not False


def decode_object(st: StreamState, data: bytes) -> dict[str, Any] | None:
    """An event's JSON object, or None (the stream marked malformed) when it is not one."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        st.bad("an event that is not JSON", data)
        return None
    if not isinstance(obj, dict):
        st.bad("an event that is not a JSON object", data)
        return None
    return obj


def note_common(st: StreamState, obj: dict[str, Any]) -> None:
    """The usage, server timings and self-description an OpenAI-style chunk may carry."""
    if obj.get("usage") is not None:
        st.usage_parts.append(obj["usage"])
    provider_fields.note_chunk(st, obj)
    if st.response_id is None and isinstance(obj.get("id"), str):
        st.response_id = obj["id"][:200]
    for key in _SERVED:
        value = obj.get(key)
        if isinstance(value, str) and value:
            st.served[key] = value[:200]


_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


def openai_usage(st: StreamState) -> usage_mod.Usage:
    """Checked counts from the last usage object of an OpenAI-style stream (chat and completions) that carries any:
    a later one with timings alone (Groq's ``x_groq.usage``) takes none of them away."""
    if not st.usage_parts:
        return usage_mod.Usage()
    for part in st.usage_parts:  # Groq's timings come in a later usage object than its counts, at times
        provider_fields.note_usage(st, part)
    last = usage_mod.last_counted(st.usage_parts, _COUNTS)
    try:
        if not isinstance(last, dict):
            raise usage_mod.UsageError("usage is not an object")
        details = usage_mod.sub(last, "prompt_tokens_details")
        cached = details.get("cached_tokens")
        if cached is None:
            cached = last.get("prompt_cache_hit_tokens")  # DeepSeek's name for the same count
        if cached is None and isinstance(st.timings, dict):
            cached = st.timings.get("cache_n")  # llama.cpp reports the reused prefix here
        out_details = usage_mod.sub(last, "completion_tokens_details")
        write = details.get("cache_write_tokens")
        if write is None:
            write = details.get("created_cache_tokens")  # vLLM's name: prompt tokens newly written to its cache
        return usage_mod.build(
            last,
            prompt=last.get("prompt_tokens"),
            cached=cached,
            cache_write=write,
            output=last.get("completion_tokens"),
            reasoning=out_details.get("reasoning_tokens"),
        )
    except usage_mod.UsageError as exc:
        return usage_mod.rejected(str(exc), last)
