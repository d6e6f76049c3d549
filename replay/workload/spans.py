"""Where a message's text lies in its pre-serialised bytes, so it can be tagged or shared without decoding.

The loader keeps each message as its compact JSON (``Message.wire``). The per-task tag is spliced into the first
user message's content there (``sessions/session.py``), and the flavours whose formats carry the same text in a
JSON string (completions, Responses, Anthropic) point into those bytes instead of keeping a copy of a long text.
"""

from __future__ import annotations

import orjson

_CONTENT = b'"content":"'


def string_content_at(wire: bytes) -> int | None:
    """Where a message's top-level string ``content`` begins in its compact JSON, or None (content of parts).

    Inside a JSON string every quote is escaped, so the first ``"content":"`` is a key; it is the top-level one
    when what precedes it is a complete object's beginning (checked by parsing that short prefix)."""
    idx = wire.find(_CONTENT)
    if idx < 0:
        return None
    try:
        orjson.loads(wire[:idx].rstrip(b",") + b"}")
    except orjson.JSONDecodeError:
        return None
    return idx + len(_CONTENT)


def content_view(wire: bytes, content: str) -> memoryview | None:
    """The message's string ``content`` (as decoded from ``wire``) JSON-escaped, as a view into ``wire``: other
    formats that carry the same text in a JSON string share these bytes instead of copying them. None when the
    bytes there are not exactly ``content`` escaped as orjson escapes it (checked byte for byte)."""
    start = string_content_at(wire)
    if start is None:
        return None
    escaped = memoryview(orjson.dumps(content))[1:-1]
    end = start + len(escaped)
    if not wire.startswith(escaped, start) or wire[end : end + 1] != b'"':
        return None
    return memoryview(wire)[start:end]
