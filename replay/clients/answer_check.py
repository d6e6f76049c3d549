"""What a host answered, judged after the stream closed: the asked length, the tool calls, the text.

A load test measures the load it asked for only when the host did the work asked: an answer cut short (the
model stopped although ``ignore_eos`` was sent, or the host lowered ``max_tokens`` to fit its context) is a
lighter load than the run claims, and a malformed tool call, an empty or a runaway answer is a success only in
name. These checks run once per call, on what the flavour already read, never per read.

``length`` (free: the host's own count against ``max_tokens``):

| value | meaning |
|---|---|
| ``ok`` | the host served as many output tokens as asked |
| ``stop`` | fewer, and the model ended the answer itself (finish ``stop``, ``end_turn``, ...): ``ignore_eos`` ignored |
| ``lowered`` | fewer, with a finish reason of the length limit: the host lowered ``max_tokens`` (to fit its context) |
| ``short`` | fewer, for another reason (a tool call, a content filter) or none given |
| ``over`` | more than asked |
| ``None`` | the host reported no output count |

``tool_calls``: ``None`` (none made), ``ok``, or what was wrong with the first bad one: ``invalid_json`` (the
arguments do not parse as a JSON object), ``unknown_tool`` (a name the request did not declare), ``schema`` (the
arguments miss a required property or give one of the wrong JSON type).

``degenerate``: whether the text repeats itself (a unit of up to ``MAX_PERIOD`` characters repeated over at least
``MIN_RUN`` characters: the loop of a model gone wrong); ``empty``: neither text nor a tool call came back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

STOPPED = frozenset({"stop", "end_turn", "stop_sequence", "eos", "completed"})
AT_LIMIT = frozenset({"length", "max_tokens", "max_output_tokens", "incomplete"})
MAX_PERIOD = 100  # characters of the repeated unit, at most
MIN_RUN = 300  # characters the repetition covers, at least (the unit then comes back 3 times or more)
# Every such stretch holds a CHUNK-character piece starting at a multiple of STEP, since its repeating part is
# MIN_RUN - MAX_PERIOD >= CHUNK + STEP - 1 characters long: that piece comes back within MAX_PERIOD characters.
CHUNK, STEP = 50, 150
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


@dataclass(slots=True)
class ToolCall:
    """One tool call as the host streamed it: its name and the arguments' text, joined from their deltas."""

    name: str
    arguments: str


def length_check(asked: int, served: int | None, finish: str | None) -> str | None:
    """Whether the answer had the asked length, and why not (see the module's table)."""
    if served is None or asked <= 0:
        return None
    if served == asked:
        return "ok"
    if served > asked:
        return "over"
    if finish in STOPPED:
        return "stop"
    if finish in AT_LIMIT:
        return "lowered"
    return "short"


def degenerate(text: str) -> bool:
    """A unit of at most MAX_PERIOD characters repeated back to back over MIN_RUN characters or more.

    Only where a piece (see CHUNK) comes back is the stretch measured, so ordinary text costs a ``str.find`` per
    STEP characters."""
    n = len(text)
    if n < MIN_RUN:
        return False
    for s in range(0, n - CHUNK, STEP):
        piece, end = text[s : s + CHUNK], s + MAX_PERIOD + CHUNK
        j = text.find(piece, s + 1, end)
        while j != -1:
            if _periodic_span(text, s, j - s) >= MIN_RUN:
                return True
            j = text.find(piece, j + 1, end)
    return False


def _periodic_span(text: str, s: int, period: int) -> int:
    """Characters of the stretch around ``s`` in which each equals the one ``period`` later, plus the period."""
    a, b, n = s, s + CHUNK, len(text)
    while a > 0 and text[a - 1] == text[a - 1 + period] and (b - a) + period < MIN_RUN:
        a -= 1
    while b + period < n and text[b] == text[b + period] and (b - a) + period < MIN_RUN:
        b += 1
    return (b - a) + period


def tool_calls_check(calls: Sequence[ToolCall], declared: Sequence[dict[str, Any]] | None) -> str | None:
    """``None`` without calls; else ``ok`` or the first fault (see the module's doc)."""
    if not calls:
        return None
    schemas = _schemas(declared or ())
    for call in calls:
        try:
            args = orjson.loads(call.arguments or "{}")
        except orjson.JSONDecodeError:
            return "invalid_json"
        if not isinstance(args, dict):
            return "invalid_json"
        if declared is not None and call.name not in schemas:
            return "unknown_tool"
        schema = schemas.get(call.name)
        if schema is not None and not _fits(args, schema):
            return "schema"
    return "ok"


def _schemas(declared: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """Tool name -> its parameters' JSON schema, from OpenAI-style (``function``) or Anthropic-style tools."""
    out: dict[str, dict[str, Any] | None] = {}
    for tool in declared:
        inner = tool.get("function")
        fn: dict[str, Any] = inner if isinstance(inner, dict) else tool
        name = fn.get("name")
        if isinstance(name, str):
            schema = fn.get("parameters") or fn.get("input_schema")
            out[name] = schema if isinstance(schema, dict) else None
    return out


def _fits(args: dict[str, Any], schema: dict[str, Any]) -> bool:
    """The top level of a JSON schema: the required properties are there and the typed ones have their type."""
    required = schema.get("required") or ()
    if any(isinstance(k, str) and k not in args for k in required):
        return False
    props = schema.get("properties") or {}
    for key, value in args.items():
        spec = props.get(key) if isinstance(props, dict) else None
        kind = spec.get("type") if isinstance(spec, dict) else None
        kinds = kind if isinstance(kind, list) else [kind]
        allowed = tuple(t for k in kinds if isinstance(k, str) for t in _JSON_TYPES.get(k, ()))
        if not allowed:
            continue
        if isinstance(value, bool) and bool not in allowed:
            return False
        if not isinstance(value, allowed):
            return False
    return True


def answer_check(
    asked: int,
    served: int | None,
    finish: str | None,
    text: str | None,
    calls: Sequence[ToolCall],
    declared: Sequence[dict[str, Any]] | None,
    answered: bool,
) -> dict[str, Any]:
    """The record's ``answer_check``: ``length``, ``tool_calls`` and ``empty`` always (``answered``: an answer-bearing
    event came); ``degenerate`` when the text was read (``text`` not None), else None."""
    return {
        "length": length_check(asked, served, finish),
        "tool_calls": tool_calls_check(calls, declared),
        "degenerate": degenerate(text) if text is not None else None,
        "empty": not (text.strip() if text is not None else answered) and not calls,
    }
