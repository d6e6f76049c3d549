"""OpenAI completions (``/completions``): the conversation as one prompt text.

Each message becomes ``### ROLE\\nCONTENT\\n\\n`` and the prompt ends with ``### assistant\\n``. In cl100k that framing
is exactly 4 tokens per message and 3 to prime the reply, as the chat count assumes (``replay.workload.tokens``), so
the same workload has the same prompt size in both flavours. Tool calls are written inline as
``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` after the message's text. A message's fragment is its text
JSON-escaped without the quotes: escaped strings join into the escaped string of their concatenation, so the body is
still a sequence of fragments (a long text is the message's own escaped content, shared with its chat bytes). The
stream is OpenAI's: ``choices[].text`` chunks, a finish chunk, usage, ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from replay.clients.body import Body, Piece, joined
from replay.clients.flavours.base import Conversation, Flavour, body_fields
from replay.clients.flavours.chat import (
    decode_object,
    ended_without_done,
    has_error,
    note_common,
    only_plain_fields,
    openai_usage,
)
from replay.clients.stream import ANSWER, NONE, REASONING, StreamState
from replay.clients.usage import excerpt, safe_dumps
from replay.workload.history import content_text
from replay.workload.trajectory import Message

PRIMING = b"### assistant\\n"


def message_text(raw: dict[str, Any]) -> str:
    """One canonical message as prompt text."""
    text = content_text(raw.get("content"))
    for call in raw.get("tool_calls") or ():
        fn = call.get("function") or {}
        inline = orjson.dumps({"name": fn.get("name", ""), "arguments": fn.get("arguments", "")}).decode()
        text += f"\n<tool_call>{inline}</tool_call>"
    return f"### {raw.get('role', 'user')}\n{text}\n\n"


class CompletionsFlavour(Flavour):
    name = "completions"
    path = "/completions"
    takes_images = False  # a text prompt: a workload with image parts is refused at the start
    end_marker = "[DONE] or a usage chunk"

    def fixed_fields(self) -> bytes:
        return body_fields({"stream": True, "stream_options": {"include_usage": True}, **self.options.extra_body})

    def render_message(self, raw: dict[str, Any]) -> bytes:
        return orjson.dumps(message_text(raw))[1:-1]

    def around_text(self, raw: dict[str, Any], marked: bool = False) -> tuple[bytes, bytes] | None:
        return orjson.dumps(f"### {raw.get('role', 'user')}\n")[1:-1], b"\\n\\n"

    def body(
        self,
        context: Sequence[Message],
        max_tokens: int,
        tools: list[dict[str, Any]] | None,
        conversation: Conversation | None,
    ) -> Body:
        parts: list[Piece] = [b'{"model":', self._model, b',"prompt":"']
        joined(parts, [self.fragment(m) for m in context], b"")
        parts.append(PRIMING + b'","max_tokens":' + str(max_tokens).encode() + self.length_fields(max_tokens))
        parts.append(b"," + self._fixed + b"}")
        return Body(parts)

    # --- reading -------------------------------------------------------------------------------------------------
    EMPTY_DELTA = b'"text":""'

    def plain_tokens(self, region: bytes) -> int | None:
        """As chat's: every event a ``data:`` chunk with one choice and one ``text`` key, nothing else to read."""
        if b'"text":"' not in region or region[:6] != b"data: " or not only_plain_fields(region, REASONING):
            return None
        events = region.count(b"\n\n") + 1
        texts = region.count(b'"text":"')
        if not (
            region.count(b"\n\ndata: ") + 1
            == texts
            == region.count(b'"choices":[{')
            == region.count(b"[{")
            == region.count(b"}]")
            == region.count(b'":[')  # no array but the choices
            == events
        ):
            return None
        return events - region.count(self.EMPTY_DELTA)

    def scan(self, name: bytes | None, data: bytes) -> int | None:
        if (
            b": " in data
            or data.count(b'"choices":[{') != 1
            or data.count(b'"text":"') != 1
            or data.count(b"[{") != 1
            or data.count(b"}]") != 1
            or data.count(b'":[') != 1
        ):
            return None
        if b'"text":""' not in data and only_plain_fields(data, REASONING):
            return ANSWER
        return None

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
        kind = NONE
        choices = obj.get("choices")
        if choices is not None and not isinstance(choices, list):
            st.bad("'choices' is not a list", data)
            choices = None
        for choice in choices or ():
            if not isinstance(choice, dict):
                st.bad("a choice is not an object", data)
                continue
            finish = choice.get("finish_reason")
            if finish is not None:
                if isinstance(finish, str):
                    st.finish_reason = finish
                else:
                    st.bad("'finish_reason' is not a string", data)
            text = choice.get("text")
            if text is not None and not isinstance(text, str):
                st.bad("'text' is not a string", data)
            elif text:
                kind = ANSWER
                st.collect(True, text)
        note_common(st, obj)
        return kind

    def finish(self, st: StreamState, tail: bytes) -> None:
        st.usage = openai_usage(st)
        ended_without_done(st)
