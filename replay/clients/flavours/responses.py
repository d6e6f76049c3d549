"""OpenAI Responses (``/responses``): the conversation as input items, streamed as typed events.

Messages become ``{"role", "content"}`` items; an assistant's tool calls become ``function_call`` items and tool
results ``function_call_output`` items (earlier reasoning is never sent back: Responses reasoning items carry state a
replay cannot have). The stream is ``event: TYPE`` / ``data: {"type": TYPE, ...}`` events: answer text in
``response.output_text.delta``, reasoning in ``response.reasoning_text.delta`` or
``response.reasoning_summary_text.delta``, tool arguments in ``response.function_call_arguments.delta``; it ends
with ``response.completed`` or ``response.incomplete`` (usage in ``response.usage``), or fails with
``response.failed`` or ``error``; no ``[DONE]``.

``--responses-state previous`` sends only the items the host has not seen, with ``previous_response_id``: the host
then holds its own answers in the context, not the recorded ones (a stateful run, recorded as such in the header).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from replay import compact_json
from replay.clients import usage as usage_mod
from replay.clients.body import Body, Piece, joined
from replay.clients.flavours.base import Conversation, Flavour, body_fields, image_parts, image_url
from replay.clients.flavours.chat import decode_object
from replay.clients.stream import ANSWER, NONE, REASONING, StreamState
from replay.clients.usage import excerpt, safe_dumps
from replay.workload.history import content_text
from replay.workload.trajectory import Message

_ANSWER_DELTAS = {
    "response.output_text.delta",
    "response.refusal.delta",
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
}
_REASONING_DELTAS = {"response.reasoning_text.delta", "response.reasoning_summary_text.delta"}
_TERMINAL = {"response.completed", "response.incomplete", "response.done"}  # WebSocket mode may end with .done
_TEXT = b'"type":"response.output_text.delta"'


def chained_state_warning(state: str | None, dialect: str | None, simulated: bool = False) -> str | None:
    """The warning for ``--responses-state previous`` against vLLM (a real one: the simulated host keeps the whole
    context): it leaves the system message out of the calls it continues, so they carry less than the workload's
    context; None elsewhere (a host named only by URL cannot be told to be vLLM: ``--dialect vllm`` says it)."""
    if state != "previous" or dialect != "vllm" or simulated:
        return None
    return ("warning: --responses-state previous against vLLM: vLLM leaves the system message out of each call it"
            " continues (previous_response_id), so those calls are lighter than the workload's; --responses-state"
            " none sends the whole context every call")  # fmt: skip


def _input_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat text and image parts as Responses ``input_text`` and ``input_image`` parts."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if part.get("type") == "image_url":
            url, detail = image_url(part)
            out.append({"type": "input_image", "image_url": url, "detail": detail or "auto"})
        elif part.get("text"):
            out.append({"type": "input_text", "text": part["text"]})
    return out


def message_items(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """One canonical message as Responses input items (image parts as ``input_image``; a tool result with images
    as a list of parts, which ``function_call_output`` takes)."""
    role = raw.get("role")
    text = content_text(raw.get("content"))
    parts = image_parts(raw.get("content"))
    if role == "tool":
        output: Any = text if parts is None else _input_parts(parts)
        return [{"type": "function_call_output", "call_id": str(raw.get("tool_call_id") or ""), "output": output}]
    items: list[dict[str, Any]] = []
    calls = raw.get("tool_calls") or ()
    if parts is not None:
        items.append({"role": role, "content": _input_parts(parts)})
    elif text or not calls:
        items.append({"role": role, "content": text})
    for i, call in enumerate(calls):
        fn = call.get("function") or {}
        call_id = str(call.get("id") or f"call_{i}")
        items.append({"type": "function_call", "call_id": call_id, "name": fn.get("name", ""),
                      "arguments": fn.get("arguments", "")})  # fmt: skip
    return items


class ResponsesFlavour(Flavour):
    name = "responses"
    path = "/responses"
    end_marker = "response.completed or response.incomplete"

    def fixed_fields(self) -> bytes:
        if self.options.transport == "websocket":  # a socket streams; its connection-local state needs no store
            return body_fields({"store": False, **self.options.extra_body})
        stateful = self.options.responses_state == "previous"
        return body_fields({"stream": True, "store": stateful, **self.options.extra_body})

    def render_message(self, raw: dict[str, Any]) -> bytes:
        return b",".join(orjson.dumps(item) for item in message_items(raw))

    def around_text(self, raw: dict[str, Any], marked: bool = False) -> tuple[bytes, bytes] | None:
        role = raw.get("role")
        if role == "tool":
            call_id = orjson.dumps(str(raw.get("tool_call_id") or ""))
            return b'{"type":"function_call_output","call_id":' + call_id + b',"output":"', b'"}'
        return b'{"role":' + orjson.dumps(role) + b',"content":"', b'"}'

    def render_tools(self, tools: list[dict[str, Any]]) -> bytes:
        flat = []
        for tool in tools:
            function = tool.get("function")
            fn: dict[str, Any] = function if isinstance(function, dict) else tool
            flat.append({"type": "function", **{k: v for k, v in fn.items() if k != "type"}})
        return compact_json.dumps(flat)

    def new_conversation(self) -> Conversation | None:
        return Conversation() if self.options.responses_state == "previous" else None

    def body(
        self,
        context: Sequence[Message],
        max_tokens: int,
        tools: list[dict[str, Any]] | None,
        conversation: Conversation | None,
    ) -> Body:
        items: Sequence[Message] = context
        previous = b""
        if conversation is not None and conversation.previous_id is not None:
            held = conversation.sent
            n = len(held)
            # The host holds the previous request and its own answer; continue only if nothing before was cut.
            if len(context) > n + 1 and all(a is b for a, b in zip(context[:n], held, strict=False)):
                items = context[n + 1 :]
                previous = b',"previous_response_id":' + orjson.dumps(conversation.previous_id)
        parts: list[Piece] = [b'{"model":', self._model, b',"input":[']
        joined(parts, [self.fragment(m) for m in items])
        parts.append(b'],"max_output_tokens":' + str(max_tokens).encode() + previous + self.length_fields(max_tokens))
        tools_wire = self.tools_wire(tools)
        if tools_wire:
            parts += [b',"tools":', tools_wire]
        parts.append(b"," + self._fixed + b"}")
        return Body(parts)

    def after_call(self, conversation: Conversation | None, st: StreamState | None, context: Sequence[Message]) -> None:
        if conversation is None:
            return
        ok = st is not None and st.ended and st.error is None and st.malformed is None and st.response_id
        conversation.previous_id = st.response_id if ok and st is not None else None
        conversation.sent = list(context) if ok else []

    # --- reading -------------------------------------------------------------------------------------------------
    EMPTY_DELTA = b'"delta":""'

    def plain_tokens(self, region: bytes) -> int | None:
        """Every event an output-text delta: one ``type`` key each (whatever its value: a list may hide another),
        that type, one string ``delta``."""
        if _TEXT not in region or b'"error"' in region or b'":{' in region or b"[{" in region:  # objects: decode
            return None
        events = region.count(b"\n\n") + 1
        if not (
            region.count(_TEXT) == region.count(b'"type":"') == region.count(b'"delta":"') == events
            and region.count(b'"delta":') == region.count(b'"type":') == region.count(b"data: ") == events
        ):
            return None
        return events - region.count(self.EMPTY_DELTA)

    def scan(self, name: bytes | None, data: bytes) -> int | None:
        if b'"error"' in data or b": " in data or b'":{' in data or b"[{" in data:  # objects (a nested type?)
            return None
        if data.count(b'"type":"') != 1 or data.count(b'"type":') != 1 or data.count(b'"delta":') != 1:
            return None
        if b'"delta":"' not in data:
            return None
        if _TEXT in data:
            return None if b'"delta":""' in data else ANSWER
        return None

    def decode(self, st: StreamState, name: bytes | None, data: bytes) -> int:
        obj = decode_object(st, data)
        if obj is None:
            return NONE
        kind = obj.get("type")
        if not isinstance(kind, str):
            st.bad("an event without a string 'type'", data)
            return NONE
        if kind in _ANSWER_DELTAS or kind in _REASONING_DELTAS:
            delta = obj.get("delta")
            if not isinstance(delta, str):
                st.bad(f"'{kind}' whose delta is not a string", data)
                return NONE
            if not delta:
                return NONE
            answer = kind in _ANSWER_DELTAS
            if kind == "response.function_call_arguments.delta":
                st.call_part(obj.get("output_index"), arguments=delta)
            else:
                st.collect(answer, delta)
            return ANSWER if answer else REASONING
        if kind in ("response.output_item.added", "response.output_item.done"):  # live history: a function call
            item = obj.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                index = obj.get("output_index")
                streamed = st.call_streamed(index)  # the deltas, if they came: the whole otherwise
                st.call_part(index, item.get("call_id"), item.get("name"), None if streamed else item.get("arguments"))
            return NONE
        if kind == "error":
            st.error = excerpt(safe_dumps({k: obj.get(k) for k in ("code", "message") if k in obj}) or data)
            return NONE
        response = obj.get("response")
        if response is not None and not isinstance(response, dict):
            st.bad("'response' is not an object", data)
            return NONE
        if isinstance(response, dict):
            self._response(st, kind, response)
        return NONE

    def _response(self, st: StreamState, kind: str, response: dict[str, Any]) -> None:
        if isinstance(response.get("id"), str):
            st.response_id = response["id"][:200]
        for key in ("model", "service_tier"):
            if isinstance(response.get(key), str) and response[key]:
                st.served[key] = response[key][:200]
        if kind == "response.failed":
            st.error = excerpt(safe_dumps(response.get("error") or "response.failed"))
        if (kind in _TERMINAL or kind == "response.failed") and response.get("usage") is not None:
            st.usage_parts.append(response["usage"])
        if kind in _TERMINAL:
            st.ended = True
            reason = usage_mod.get(response, "incomplete_details", "reason")
            st.finish_reason = "length" if reason == "max_output_tokens" else (reason or "stop")

    def finish(self, st: StreamState, tail: bytes) -> None:
        if not st.usage_parts:
            st.usage = usage_mod.Usage()
            return
        last = st.usage_parts[-1]
        try:
            if not isinstance(last, dict):
                raise usage_mod.UsageError("usage is not an object")
            details = usage_mod.sub(last, "input_tokens_details")
            out_details = usage_mod.sub(last, "output_tokens_details")
            st.usage = usage_mod.build(
                last,
                prompt=last.get("input_tokens"),
                cached=details.get("cached_tokens"),
                cache_write=details.get("cache_write_tokens"),
                output=last.get("output_tokens"),
                reasoning=out_details.get("reasoning_tokens"),
            )
        except usage_mod.UsageError as exc:
            st.usage = usage_mod.rejected(str(exc), last)
