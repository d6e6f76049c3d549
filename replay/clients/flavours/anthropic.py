"""Anthropic Messages (``/messages``): content blocks, a top-level system prompt, typed stream events.

System messages become the top-level ``system`` blocks; an assistant's tool calls become ``tool_use`` blocks (input
parsed from the recorded arguments) and tool results ``tool_result`` blocks in a user message (consecutive user
messages are allowed: the API joins them). Earlier thinking is not sent back (it would need the signatures only the
host can make). Headers: ``x-api-key`` and ``anthropic-version``. ``--cache-control auto`` puts an ephemeral cache
breakpoint on the last system block, the last tool and the last message of every call, so the host caches the
growing prefix the way agents use it (3 of the 4 breakpoints a request may carry).

The stream: ``message_start`` (initial usage), ``content_block_start/delta/stop`` (``text_delta``,
``thinking_delta``, ``input_json_delta``, ``signature_delta``), ``message_delta`` (stop reason, cumulative usage),
``message_stop``; ``ping`` and unknown events are ignored; ``error`` events fail the call. The prompt total is
``input_tokens + cache_read_input_tokens + cache_creation_input_tokens`` (``../shared/PROVIDERS.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from replay import compact_json
from replay.clients import provider_fields
from replay.clients import usage as usage_mod
from replay.clients.body import Body, Piece, joined
from replay.clients.flavours.base import Conversation, Flavour, Fragment, body_fields, image_parts, image_url
from replay.clients.flavours.chat import decode_object
from replay.clients.stream import ANSWER, NONE, REASONING, StreamState
from replay.clients.usage import excerpt, safe_dumps
from replay.workload.history import content_text
from replay.workload.trajectory import Message

VERSION = "2023-06-01"
EMPTY = "(empty)"  # the API refuses empty text blocks; a recorded empty answer is sent as this
_CACHE = {"type": "ephemeral"}
_DELTAS = {"text_delta": ANSWER, "input_json_delta": ANSWER, "thinking_delta": REASONING}
_DELTA_TEXT = {"text_delta": "text", "input_json_delta": "partial_json", "thinking_delta": "thinking"}


def _tool_input(arguments: Any) -> dict[str, Any]:
    try:
        value = orjson.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except orjson.JSONDecodeError:
        value = None
    return value if isinstance(value, dict) else {"arguments": arguments}


def _image_block(part: dict[str, Any]) -> dict[str, Any]:
    """A chat ``image_url`` part as an Anthropic ``image`` block: base64 for a data URL, else by URL."""
    url, _ = image_url(part)
    head, sep, data = url.partition(",")
    if url.startswith("data:") and sep and head.endswith(";base64"):
        return {"type": "image", "source": {"type": "base64", "media_type": head[5:-7], "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _blocks(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        _image_block(p) if p.get("type") == "image_url" else {"type": "text", "text": p["text"]}
        for p in parts
        if p.get("type") == "image_url" or p.get("text")
    ]


def message_blocks(raw: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """(role, content blocks) of one canonical message; role ``system`` for the top-level system prompt. Image parts
    become ``image`` blocks (in a tool result too: ``tool_result`` content may hold them)."""
    role = raw.get("role")
    text = content_text(raw.get("content"))
    parts = image_parts(raw.get("content")) if role != "system" else None  # the system prompt takes text only
    if role == "tool":
        content: Any = text if parts is None else _blocks(parts)
        block = {"type": "tool_result", "tool_use_id": str(raw.get("tool_call_id") or "toolu_0"), "content": content}
        return "user", [block]
    blocks: list[dict[str, Any]] = (
        _blocks(parts) if parts is not None else [{"type": "text", "text": text}] if text else []
    )
    for i, call in enumerate(raw.get("tool_calls") or ()):
        fn = call.get("function") or {}
        blocks.append({"type": "tool_use", "id": str(call.get("id") or f"toolu_{i}"), "name": fn.get("name", ""),
                       "input": _tool_input(fn.get("arguments"))})  # fmt: skip
    if not blocks:
        blocks = [{"type": "text", "text": EMPTY}]
    return ("system" if role == "system" else "assistant" if role == "assistant" else "user"), blocks


def _marked(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [*blocks[:-1], {**blocks[-1], "cache_control": _CACHE}]


class AnthropicFlavour(Flavour):
    name = "anthropic"
    path = "/messages"
    end_marker = "message_stop"

    def headers(self, key: str | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream", "anthropic-version": VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def fixed_fields(self) -> bytes:
        return body_fields({"stream": True, **self.options.extra_body})

    def render_message(self, raw: dict[str, Any]) -> bytes:
        role, blocks = message_blocks(raw)
        if role == "system":  # the blocks alone: they go into the top-level system list
            return b",".join(orjson.dumps(b) for b in blocks)
        return compact_json.dumps({"role": role, "content": blocks})

    def render_marked(self, raw: dict[str, Any]) -> bytes:
        role, blocks = message_blocks(raw)
        marked = _marked(blocks)
        if role == "system":
            return b",".join(map(orjson.dumps, marked))
        return compact_json.dumps({"role": role, "content": marked})

    def _marked_fragment(self, message: Message) -> Fragment:
        """The message with a cache breakpoint on its last block (rendered once, like ``fragment``)."""
        cache = message.rendered
        if cache is None:
            cache = message.rendered = {}
        frag = cache.get("anthropic+cache")
        if frag is None:
            frag = cache["anthropic+cache"] = self.render_fragment(message, marked=True)
        return frag

    def around_text(self, raw: dict[str, Any], marked: bool = False) -> tuple[bytes, bytes] | None:
        role = raw.get("role")
        end = b'","cache_control":{"type":"ephemeral"}}' if marked else b'"}'
        if role == "system":
            return b'{"type":"text","text":"', end
        if role == "tool":
            use_id = orjson.dumps(str(raw.get("tool_call_id") or "toolu_0"))
            head = b'{"role":"user","content":[{"type":"tool_result","tool_use_id":' + use_id + b',"content":"'
            return head, end + b"]}"
        who = b"assistant" if role == "assistant" else b"user"
        return b'{"role":"' + who + b'","content":[{"type":"text","text":"', end + b"]}"

    def render_tools(self, tools: list[dict[str, Any]]) -> bytes:
        out = []
        for tool in tools:
            function = tool.get("function")
            fn: dict[str, Any] = function if isinstance(function, dict) else tool
            spec = {"name": fn.get("name", ""), "input_schema": fn.get("parameters") or {"type": "object"}}
            if fn.get("description"):
                spec["description"] = fn["description"]
            out.append(spec)
        if out and self.options.cache_control == "auto":
            out[-1] = {**out[-1], "cache_control": _CACHE}
        return compact_json.dumps(out)

    def body(
        self,
        context: Sequence[Message],
        max_tokens: int,
        tools: list[dict[str, Any]] | None,
        conversation: Conversation | None,
    ) -> Body:
        auto = self.options.cache_control == "auto"
        system = [m for m in context if m.role == "system"]
        turns = [m for m in context if m.role != "system"]
        parts: list[Piece] = [b'{"model":', self._model, b',"max_tokens":' + str(max_tokens).encode()]
        if system:
            frags = [self.fragment(m) for m in system]
            if auto:
                frags[-1] = self._marked_fragment(system[-1])
            parts.append(b',"system":[')
            joined(parts, frags)
            parts.append(b"]")
        frags = [self.fragment(m) for m in turns]
        if auto and turns:
            frags[-1] = self._marked_fragment(turns[-1])
        parts.append(b',"messages":[')
        joined(parts, frags)
        parts.append(b"]" + self.length_fields(max_tokens))
        tools_wire = self.tools_wire(tools)
        if tools_wire:
            parts += [b',"tools":', tools_wire]
        parts.append(b"," + self._fixed + b"}")
        return Body(parts)

    # --- reading -------------------------------------------------------------------------------------------------
    EMPTY_DELTA = b'"text":""'

    def plain_tokens(self, region: bytes) -> int | None:
        """Every event a text delta: two ``type`` keys each (the event's and the delta's), and a delta object whose
        keys are ``type`` then ``text`` (as the API writes them; any other order is decoded)."""
        if b'"type":"text_delta"' not in region or b'"error"' in region or b"[{" in region:
            return None
        events = region.count(b"\n\n") + 1
        if not (
            region.count(b'"type":"content_block_delta"')
            == region.count(b'"delta":{"type":"text_delta","text":"')
            == region.count(b"data: ")
            == region.count(b'":{')  # one object per event, its delta: no other value to read (or be fooled by)
            == events
            and region.count(b'"type":"') == 2 * events
        ):
            return None
        return events - region.count(self.EMPTY_DELTA)

    def decode(self, st: StreamState, name: bytes | None, data: bytes) -> int:
        obj = decode_object(st, data)
        if obj is None:
            return NONE
        kind = obj.get("type")
        if not isinstance(kind, str):
            st.bad("an event without a string 'type'", data)
            return NONE
        if kind == "content_block_delta":
            return self._delta(st, obj.get("delta"), data, obj.get("index"))
        if kind == "content_block_start":  # live history: a tool_use block's id and name
            block = obj.get("content_block")
            if isinstance(block, dict) and block.get("type") == "tool_use":
                st.call_part(obj.get("index"), block.get("id"), block.get("name"))
            return NONE
        if kind == "message_start":
            message = obj.get("message")
            if not isinstance(message, dict):
                st.bad("'message' is not an object", data)
                return NONE
            if isinstance(message.get("id"), str):
                st.response_id = message["id"][:200]
            if isinstance(message.get("model"), str):
                st.served["model"] = message["model"][:200]
            self._usage(st, message.get("usage"))
        elif kind == "message_delta":
            delta = obj.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                st.finish_reason = {"max_tokens": "length", "end_turn": "stop"}.get(delta["stop_reason"],
                                                                                   delta["stop_reason"])  # fmt: skip
            self._usage(st, obj.get("usage"))
        elif kind == "message_stop":
            st.ended = True
        elif kind == "error":
            st.error = excerpt(safe_dumps(obj.get("error") or obj))
        return NONE  # ping, content_block_start/stop and unknown events carry no tokens

    def _delta(self, st: StreamState, delta: Any, data: bytes, index: Any = None) -> int:
        if not isinstance(delta, dict) or not isinstance(delta.get("type"), str):
            st.bad("'delta' is not an object with a string 'type'", data)
            return NONE
        kind = _DELTAS.get(delta["type"])
        if kind is None:
            return NONE  # signature_delta, citations_delta
        value = delta.get(_DELTA_TEXT[delta["type"]])
        if not isinstance(value, str):
            st.bad(f"'{delta['type']}' without a string '{_DELTA_TEXT[delta['type']]}'", data)
            return NONE
        if not value:
            return NONE
        if delta["type"] == "input_json_delta":
            st.call_part(index, arguments=value)
        else:
            st.collect(kind == ANSWER, value)
        return kind

    def _usage(self, st: StreamState, usage: Any) -> None:
        if usage is None:
            return
        st.usage_parts.append(usage)
        if isinstance(usage, dict) and isinstance(usage.get("service_tier"), str):
            st.served["service_tier"] = usage["service_tier"][:200]
        provider_fields.note_usage(st, usage)

    def finish(self, st: StreamState, tail: bytes) -> None:
        """Later fields override earlier ones: ``message_delta`` usage is cumulative."""
        merged: dict[str, Any] = {}
        try:
            for part in st.usage_parts:
                if not isinstance(part, dict):
                    raise usage_mod.UsageError("usage is not an object")
                merged.update({k: v for k, v in part.items() if v is not None})
            if not merged:
                st.usage = usage_mod.Usage()
                return
            read, write = merged.get("cache_read_input_tokens"), merged.get("cache_creation_input_tokens")
            fresh = usage_mod.count(merged.get("input_tokens"), "input_tokens")
            read_n = usage_mod.count(read, "cache_read_input_tokens") or 0
            write_n = usage_mod.count(write, "cache_creation_input_tokens") or 0
            st.usage = usage_mod.build(
                st.usage_parts,
                prompt=None if fresh is None else fresh + read_n + write_n,
                cached=read_n if read is not None or fresh is not None else None,
                cache_write=write_n if write is not None or fresh is not None else None,
                output=merged.get("output_tokens"),
                reasoning=usage_mod.sub(merged, "output_tokens_details").get("thinking_tokens"),
            )
        except usage_mod.UsageError as exc:
            st.usage = usage_mod.rejected(str(exc), st.usage_parts)
