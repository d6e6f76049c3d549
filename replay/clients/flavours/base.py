"""What an API flavour is: how a turn's context becomes a request body, and how its stream is read.

A flavour renders each message once into a fragment of its own wire format (kept on the message, so a context that
grows every turn is never re-serialised) and builds a body as the list of those fragments and the fields that never
change within a run (serialised once), never joined (``replay.clients.body``). A long text the format carries in a
JSON string is not copied either: the fragment points into the message's chat bytes. It reads its stream through
``replay.clients.stream``. Sessions, the closed loop and the run never see a wire format: they hand a flavour
messages and get back a record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from replay import compact_json
from replay.clients.affinity import split_body
from replay.clients.body import Body, Piece
from replay.clients.stream import StreamReader, StreamState
from replay.clients.usage import excerpt
from replay.workload.spans import content_view
from replay.workload.trajectory import Message

API_FLAVOURS = ("chat", "completions", "responses", "anthropic")
Fragment = bytes | tuple[Piece, ...]  # one message in a flavour's format: its bytes, or pieces around a shared text
SHARED_TEXT = 1024  # a text at least this long is shared with the message's chat bytes, not copied (>= body.SHARED)


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """What every request of a run carries besides the conversation."""

    model: str
    # Engine extensions (vLLM, SGLang, llama.cpp) that make the host produce exactly max_tokens.
    force_output_length: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)  # fields holding {session} or {task}: filled per call
    cache_control: str = "none"  # anthropic: none | auto (breakpoints on system, tools and the last message)
    responses_state: str = "none"  # responses: none (full context every call) | previous (previous_response_id)
    # Answer checks (replay.clients.answer_check): "free" (the length, tool calls and empty answers, from what the
    # flavour reads anyway), "all" (also the text: every event decoded) or "off".
    check_answers: str = "free"
    keep_answers: bool = False  # the answer text on each record, to compare hosts' answers
    transport: str = "http"  # http | websocket (Responses: a response.create message, no stream/store transport)


class Conversation:
    """Per-session state a flavour keeps between calls (only stateful flavours use it)."""

    __slots__ = ("previous_id", "sent")

    def __init__(self) -> None:
        self.previous_id: str | None = None
        self.sent: list[Message] = []  # what the host already holds of this conversation


def image_parts(content: Any) -> list[dict[str, Any]] | None:
    """The text and image parts of a message whose content holds images (chat's ``{"type": "text", "text"}`` and
    ``{"type": "image_url", "image_url": {"url", "detail"}}``, as the loader renders canonical image parts), or None
    when it holds none: a flavour then sends the text alone, as before images existed."""
    if not isinstance(content, list) or not any(isinstance(p, dict) and p.get("type") == "image_url" for p in content):
        return None
    return [p for p in content if isinstance(p, dict) and p.get("type") in ("text", "image_url")]


def image_url(part: dict[str, Any]) -> tuple[str, str | None]:
    """(url, detail) of a chat ``image_url`` part."""
    inner = part.get("image_url")
    if isinstance(inner, dict):
        return str(inner.get("url", "")), inner.get("detail")
    return str(inner or ""), None


class Flavour(StreamReader):
    """One API flavour. Subclasses set ``name`` and ``path`` and implement rendering and reading."""

    name = ""
    path = ""  # appended to the host's base URL
    takes_images = True  # image parts go out as this API's own image parts (completions: text prompts only)

    def __init__(self, options: RequestOptions) -> None:
        fixed, self.session_body = split_body(options.extra_body)  # templated fields: filled per call (affinity)
        self.options = dataclasses.replace(options, extra_body=fixed) if self.session_body else options
        self._tools: dict[int, tuple[Any, bytes]] = {}  # id(tool list) -> (the list, kept alive; its bytes)
        self._model = orjson.dumps(options.model)
        self._fixed = self.fixed_fields()

    # --- requests ------------------------------------------------------------------------------------------------
    def headers(self, key: str | None) -> dict[str, str]:
        """Request headers besides the request id; ``key`` is the API key (or None)."""
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def fixed_fields(self) -> bytes:
        """The body fields that never change within a run, as ``"a":1,"b":2`` (no braces)."""
        return body_fields({"stream": True, **self.options.extra_body})

    def fragment(self, message: Message) -> Fragment:
        """``message`` in this flavour's wire format, rendered once and kept on the message."""
        cache = message.rendered
        if cache is None:
            cache = message.rendered = {}
        frag = cache.get(self.name)
        if frag is None:
            frag = cache[self.name] = self.render_fragment(message)
        return frag

    def render_fragment(self, message: Message, marked: bool = False) -> Fragment:
        """``message`` rendered; a long text shared with its chat bytes when the format allows (``around_text``).
        ``marked``: with the flavour's cache breakpoint (Anthropic)."""
        raw = message.raw
        text = raw.get("content")
        if isinstance(text, str) and len(text) >= SHARED_TEXT and not raw.get("tool_calls"):
            around = self.around_text(raw, marked)
            view = content_view(message.wire, text) if around is not None else None
            if around is not None and view is not None:
                return around[0], view, around[1]
        return self.render_marked(raw) if marked else self.render_message(raw)

    def render_message(self, raw: dict[str, Any]) -> bytes:
        """One canonical (OpenAI chat shaped) message in this flavour's format."""
        raise NotImplementedError

    def render_marked(self, raw: dict[str, Any]) -> bytes:
        """The message with a cache breakpoint (flavours that have them)."""
        raise NotImplementedError

    def around_text(self, raw: dict[str, Any], marked: bool = False) -> tuple[bytes, bytes] | None:
        """The bytes before and after the message's JSON-escaped text in its fragment, for a message whose content is
        a string and that has no tool calls; None when the format does not carry the text as one JSON string."""
        return None

    def tools_wire(self, tools: list[dict[str, Any]] | None) -> bytes | None:
        """The trajectory's tool schemas in this flavour's format, rendered once per trajectory."""
        if not tools:
            return None
        hit = self._tools.get(id(tools))
        if hit is None:
            hit = self._tools[id(tools)] = (tools, self.render_tools(tools))
        return hit[1]

    def render_tools(self, tools: list[dict[str, Any]]) -> bytes:
        return compact_json.dumps(tools)

    def body(
        self,
        context: Sequence[Message],
        max_tokens: int,
        tools: list[dict[str, Any]] | None,
        conversation: Conversation | None,
    ) -> Body:
        """The JSON body of one request for ``context``, as its pieces."""
        raise NotImplementedError

    def length_fields(self, max_tokens: int) -> bytes:
        """``ignore_eos``/``min_tokens`` when asked (engine extensions), else nothing."""
        if not self.options.force_output_length:
            return b""
        return b',"ignore_eos":true,"min_tokens":' + str(max_tokens).encode()

    def new_conversation(self) -> Conversation | None:
        """State for one session's conversation, or None when the flavour keeps none."""
        return None

    def after_call(self, conversation: Conversation | None, st: StreamState | None, context: Sequence[Message]) -> None:
        """Note what the host now holds after a call (stateful flavours)."""

    # --- reading -----------------------------------------------------------------------------------------------
    def outcome(self, st: StreamState, tail: bytes) -> tuple[str, str] | None:
        """(error class, detail) of a stream that did not succeed, or None when it did."""
        if st.error is not None:
            return "stream_error", st.error
        if st.malformed is not None:
            return "malformed_stream", st.malformed
        if st.usage is not None and st.usage.problem:
            return "bad_usage", st.usage.problem
        if not st.ended:
            detail = f"the stream ended without {self.end_marker}"
            return "incomplete", detail + (f" (trailing bytes: {excerpt(tail, 80)})" if tail else "")
        if st.events == 0 and not (st.usage is not None and st.usage.output):
            return "empty", "no output tokens in the stream, and the host counted none"
        return None

    end_marker = "its final event"


def body_fields(obj: dict[str, Any]) -> bytes:
    """``{"a":1}`` as ``"a":1`` for splicing into a body."""
    return orjson.dumps(obj)[1:-1]
