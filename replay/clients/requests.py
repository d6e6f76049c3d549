"""Requests: turn a session's context into the exact bytes of one chat-completions request.

Messages were serialised once at load (``Message.wire``), so a request body is a join of bytes,
not a re-serialisation of a context that grows every turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from replay.workload.trajectory import Message


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """What every request of a run carries besides the conversation."""

    model: str
    stream: bool = True
    # Engine extensions (vLLM, SGLang, llama.cpp) that make the host produce exactly max_tokens.
    force_output_length: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)

    def fixed_fields(self) -> bytes:
        """The body fields that never change within a run, serialised once."""
        fields: dict[str, Any] = {"stream": self.stream}
        if self.stream:
            fields["stream_options"] = {"include_usage": True}
        fields.update(self.extra_body)
        return orjson.dumps(fields)[1:-1]


def build_chat_body(
    context: Sequence[Message],
    max_tokens: int,
    options: RequestOptions,
    fixed: bytes,
    tools_wire: bytes | None = None,
) -> bytes:
    """The JSON body of one OpenAI chat-completions request, built by joining pre-serialised parts."""
    parts = [
        b'{"model":',
        orjson.dumps(options.model),
        b',"messages":[',
        b",".join(m.wire for m in context),
        b'],"max_tokens":',
        str(max_tokens).encode(),
    ]
    if options.force_output_length:
        parts += [b',"ignore_eos":true,"min_tokens":', str(max_tokens).encode()]
    if tools_wire:
        parts += [b',"tools":', tools_wire]
    if fixed:
        parts += [b",", fixed]
    parts.append(b"}")
    return b"".join(parts)
