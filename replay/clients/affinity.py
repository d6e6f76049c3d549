"""Per-session values in request bodies and headers: ``{session}`` and ``{task}`` templates.

Routers and caches pin a conversation by a value the client sends with every call (OpenAI ``prompt_cache_key``
or ``user``, Fireworks ``x-session-affinity``, a router's ``X-Session-ID``, vLLM's ``cache_salt``). A body field
or header whose value holds ``{session}`` (the concurrency slot) or ``{task}`` (the task's sequence number) is
filled per call; every other field stays in the body's fixed part, serialised once. Filling is one byte replace
per template on the few bytes of the templated fields, spliced before the body's closing brace.
"""

from __future__ import annotations

from typing import Any

import orjson

from replay.clients.body import Body

TEMPLATES = ("{session}", "{task}")


def is_templated(value: Any) -> bool:
    """Whether ``value`` (a JSON value) holds a template anywhere."""
    text = orjson.dumps(value).decode() if not isinstance(value, str) else value
    return any(t in text for t in TEMPLATES)


def split_body(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(fields that never change, fields filled per call)."""
    fixed = {k: v for k, v in body.items() if not is_templated(v)}
    return fixed, {k: v for k, v in body.items() if k not in fixed}


class Affinity:
    """Fills the templated body fields and headers of one call from its record's session and task."""

    __slots__ = ("_body", "_headers")

    def __init__(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        self._body = orjson.dumps(body)[1:-1] if body else b""
        self._headers = {k: v for k, v in headers.items() if is_templated(v)}

    @property
    def header_names(self) -> tuple[str, ...]:
        return tuple(self._headers)

    def __bool__(self) -> bool:
        return bool(self._body or self._headers)

    def body(self, body: Body | bytes, session: int, task: int) -> Body | bytes:
        """``body`` (a JSON object's bytes, or its pieces) with the templated fields filled in and added."""
        if not self._body:
            return body
        fields = self._body.replace(b"{session}", str(session).encode()).replace(b"{task}", str(task).encode())
        if isinstance(body, Body):
            return body.with_fields(fields)
        return body[:-1] + b"," + fields + b"}"

    def headers(self, session: int, task: int) -> dict[str, str]:
        return {k: fill(v, session, task) for k, v in self._headers.items()}


def fill(text: str, session: int, task: int) -> str:
    return text.replace("{session}", str(session)).replace("{task}", str(task))
