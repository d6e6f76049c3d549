"""Messages serialised and counted once: what the replay sends is joins of these bytes.

``Message`` keeps one chat message's wire bytes and its token count; ``MessageBuilder`` renders a message under a
history policy, serialises and counts it; ``message_tokens`` is the count (content, images by their estimate,
reasoning sent back, tool calls, framing); ``CountedContext`` keeps a conversation's running sums, so a request's
prompt size and reusable prefix need no re-tokenising (the loader and the sessions both count with it).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from replay import compact_json
from replay.workload.history import HistoryPolicy, content_text
from replay.workload.images import chat_images, content_image_tokens, with_image_sizes
from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, Tokenizer


class Message:
    """One chat message, pre-serialised for the wire and pre-counted.

    Only the bytes are kept (a long trajectory holds millions of messages): ``raw``, the message as a dict, is
    decoded from them when asked for, which happens once per message and flavour (its fragment is then kept in
    ``rendered``), never per request.
    """

    __slots__ = ("rendered", "role", "tokens", "wire")

    def __init__(self, wire: bytes, tokens: int, raw: dict[str, Any] | None = None, role: str | None = None) -> None:
        self.wire = wire  # orjson bytes of the message (OpenAI chat shaped): chat bodies are joins of these
        self.tokens = tokens  # content + tool-call tokens + per-message framing
        self.role = sys.intern(role if role is not None else str((raw or {}).get("role", "")))
        # This message in other API flavours, rendered when first sent: bytes, or pieces sharing a long text with wire.
        self.rendered: dict[str, bytes | tuple[bytes | memoryview, ...]] | None = None

    @property
    def raw(self) -> dict[str, Any]:
        return orjson.loads(self.wire)

    def __repr__(self) -> str:
        return f"Message({self.wire[:60]!r}..., tokens={self.tokens})"


def message_tokens(msg: dict[str, Any], tokenizer: Tokenizer) -> int:
    """Tokens one message adds to a prompt: content (images by their estimate, docs/trajectory-format.md), reasoning
    sent back, tool calls and framing."""
    content = msg.get("content")
    n = len(tokenizer.encode(content_text(content))) + content_image_tokens(content)
    if msg.get("reasoning_content"):
        n += len(tokenizer.encode(msg["reasoning_content"]))
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") or {}
        n += len(tokenizer.encode(fn.get("name", "") + fn.get("arguments", "")))
    return n + MESSAGE_OVERHEAD_TOKENS


@dataclass(frozen=True, slots=True)
class MessageBuilder:
    """Renders messages under a history policy, then serialises and counts them once."""

    tokenizer: Tokenizer
    policy: HistoryPolicy = field(default_factory=HistoryPolicy)

    def message(self, raw: dict[str, Any]) -> Message:
        wire = self.policy.render(with_image_sizes(raw))
        tokens = message_tokens(wire, self.tokenizer)  # images counted from their sizes, before they become chat parts
        return Message(compact_json.dumps(chat_images(wire)), tokens, role=wire.get("role", ""))

    def output(self, output: dict[str, Any]) -> Message:
        wire = self.policy.output_message(output)
        return Message(compact_json.dumps(wire), message_tokens(wire, self.tokenizer), role=wire.get("role", ""))

    @property
    def renders_as_recorded(self) -> bool:
        """Whether a message's wire bytes are the recorded message's (the policy renders appended messages as they
        are unless it flattens tool calls into text)."""
        return self.policy.tool_calls == "native"

    def recorded_bytes(self, raw: dict[str, Any]) -> bytes:
        """The bytes ``message`` makes of ``raw`` under the default policy (for the fingerprint, where the wire's
        differ: a flattened or padded message)."""
        return orjson.dumps(chat_images(with_image_sizes(raw)))


def output_as_message(output: dict[str, Any]) -> dict[str, Any]:
    """The assistant message a recorded output becomes in the context under the default policy."""
    return HistoryPolicy().output_message(output)


class CountedContext:
    """A conversation with running token sums, so prompt size and reusable prefix need no re-tokenising.

    After a truncation, what is left is, message for message, the previous request plus its output: its
    tokens are the next request's reusable prefix. The loader and the sessions both count with this.
    """

    def __init__(self, base: Iterable[Message] = ()) -> None:
        self.messages: list[Message] = []
        self._sums = [0]  # _sums[i] = tokens of messages[:i]
        self.extend(base)

    def __len__(self) -> int:
        return len(self.messages)

    @property
    def tokens(self) -> int:
        return self._sums[-1]

    @property
    def prompt_tokens(self) -> int:
        """The estimated prompt of a request made of these messages."""
        return self._sums[-1] + REPLY_PRIMING_TOKENS

    def truncate(self, keep: int) -> None:
        del self.messages[keep:]
        del self._sums[keep + 1 :]

    def extend(self, messages: Iterable[Message]) -> None:
        for m in messages:
            self.messages.append(m)
            self._sums.append(self._sums[-1] + m.tokens)
