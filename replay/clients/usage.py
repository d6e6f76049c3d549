"""Token counts as a host reports them, checked before anything adds them up.

Hosts report usage in JSON they build themselves, and some send counts as strings, floats, negatives or numbers
above 2^63. A count is accepted only as a non-negative integer of a plausible size, and the parts must fit the
whole (cached and cache-write tokens within the prompt, reasoning within the output), and the output must not be
fewer than the stream's token-bearing events (8 content deltas are never 1 token). Anything else makes the call
an error of class ``bad_usage``: the raw usage is kept on the record as text, and no count of that call enters a
sum. Fields the host did not send stay ``None`` (absent is not zero).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from replay.errors import ReplayError
from replay.records.host_numbers import MAX_COUNT, integer

# No single request has two billion tokens; anything above is a host's bug, not a figure.
MAX_TOKENS = MAX_COUNT
FIELDS = ("prompt", "cached", "cache_write", "output", "reasoning")


@dataclass(slots=True)
class Usage:
    """Counts of one call in the flavour-independent sense: ``prompt`` is all input tokens, cached included."""

    prompt: int | None = None
    cached: int | None = None
    cache_write: int | None = None
    output: int | None = None
    reasoning: int | None = None
    problem: str | None = None  # why the counts were rejected (then every count is None)
    raw: str | None = None  # the host's usage objects as text, kept when rejected


class UsageError(ReplayError, ValueError):
    """A usage report that cannot be taken at its word."""


def count(value: Any, name: str) -> int | None:
    """A reported count: None if absent (null), the int if plausible; raises _Bad otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} is {_kind(value)}, not an integer")
    if integer(value, 0, MAX_TOKENS) is None:
        raise UsageError(f"{name} = {excerpt(str(value), 40)} is outside 0..{MAX_TOKENS}")
    return value


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return f"the string {excerpt(orjson.dumps(value), 40)}"
    return f"a {type(value).__name__} ({excerpt(safe_dumps(value), 40)})"


def build(raw: Any, **values: Any) -> Usage:
    """A checked Usage from the counts a flavour read (``prompt=``, ``cached=``, ...) and the raw object (or the
    list of them), which a rejected Usage keeps as text."""
    u = Usage()
    try:
        for name in FIELDS:
            setattr(u, name, count(values.get(name), name))
        for part, whole in (("cached", "prompt"), ("cache_write", "prompt"), ("reasoning", "output")):
            p, w = getattr(u, part), getattr(u, whole)
            if p is not None and w is not None and p > w:
                raise UsageError(f"{part} = {p} exceeds {whole} = {w}")
    except UsageError as exc:
        return rejected(str(exc), raw)
    return u


def last_counted(parts: list[Any], keys: tuple[str, ...]) -> Any:
    """The last of a stream's usage objects that carries any of the count ``keys`` (or is not an object, to be
    rejected); the last of all when none does."""
    for part in reversed(parts):
        if not isinstance(part, dict) or any(part.get(k) is not None for k in keys):
            return part
    return parts[-1]


def against_stream(u: Usage, events: int, parts: Any) -> Usage:
    """``u``, or a rejected Usage when its output count contradicts the stream: fewer output tokens than the
    stream's token-bearing events (each non-empty content, reasoning, refusal or tool-call delta holds at least one
    token; a host may put several tokens in one event, never less than one)."""
    if u.problem or u.output is None or u.output >= events:
        return u
    return rejected(f"output = {u.output} but the stream carried {events} token events", parts)


def rejected(problem: str, raw: Any) -> Usage:
    """A Usage with no counts: the host's report could not be read (``problem`` says why)."""
    return Usage(problem=problem, raw=excerpt(safe_dumps(raw), 600))


def sub(obj: Any, key: str) -> dict[str, Any]:
    """``obj[key]`` as an object ({} when absent or null); raises UsageError when it is something else."""
    value = obj.get(key) if isinstance(obj, dict) else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{key} is {_kind(value)}, not an object")
    return value


def get(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...`` or None where a level is missing or not an object (never raises)."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def safe_dumps(value: Any) -> bytes:
    """JSON bytes of anything a host sent: numbers beyond 64 bits and other oddities become strings."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: an int beyond 64 bits, a non-str key
        return orjson.dumps(_stringify(value))


def _stringify(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _stringify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value < (1 << 64):
        return str(value)
    return value


def host_value(value: Any, limit: int = 2000) -> Any:
    """A host-sent JSON value safe to write into a record: as it is if it serialises within ``limit`` bytes, else
    its text cut to ``limit``. (A record must always be writable, whatever the host sent.)"""
    data = safe_dumps(value)
    if len(data) <= limit:
        return orjson.loads(data)
    return excerpt(data, limit)


def excerpt(text: bytes | str, limit: int = 300) -> str:
    """The first ``limit`` characters of ``text`` (bytes decoded leniently), marked when cut."""
    s = text.decode("utf-8", "replace") if isinstance(text, bytes | bytearray | memoryview) else text
    return s if len(s) <= limit else s[:limit] + "..."
