"""Request bodies of the four APIs parsed into what the sim serves, and the affinity fields it logs.

Chat, Anthropic Messages and the Responses API all become chat messages (``prompt``), so one conversation is
counted and cached by the same rules whatever the API; completions prompts are tokenised as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from multidict import CIMultiDictProxy

from replay.errors import ReplayError
from replay.sim.core.prompt import anthropic_to_chat, responses_to_chat

MODEL_ID = "replay-sim"  # listed by /v1/models; any requested model name is accepted and echoed
DEFAULT_MAX_TOKENS = 256
_COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # as OpenAI's legacy completions

# Cache-affinity and routing hints a client may send; their values go to the truth log.
AFFINITY_FIELDS = (
    "prompt_cache_key",
    "user",
    "service_tier",
    "cache_salt",
    "provider",
    "speed",
    "providerOptions",
    "prompt_cache_isolation_key",
)
AFFINITY_HEADERS = ("x-session-id", "x-session-affinity", "session_id", "x-prompt-cache-isolation-key", "x-affinity")
_SECRET_WORDS = ("token", "secret", "auth", "password", "cookie")  # never logged, whatever the list above says


class BadRequest(ReplayError):
    """The request body is not a request the sim can serve."""


@dataclass(slots=True)
class SimRequest:
    """One parsed request."""

    api: str  # chat | completions | messages | responses
    model: str
    max_tokens: int
    stream: bool
    include_usage: bool
    ignore_eos: bool
    min_tokens: int
    body: dict[str, Any]
    messages: list[dict[str, Any]] | None = None  # the prompt as chat messages (all but completions)
    text_prompt: Any = None  # completions: a string or a list of token ids
    cache_control: bool = False  # Anthropic: the request marks cache breakpoints
    instructions: str | None = None  # Responses: the system prompt, placed first
    previous_response_id: str | None = None  # Responses: continue this response's context
    store: bool = True  # Responses: keep this response for a later previous_response_id
    fields: dict[str, Any] = field(default_factory=dict)  # affinity fields found in the body


def _int_field(body: dict[str, Any], *names: str, default: int | None, minimum: int) -> int | None:
    for name in names:
        if body.get(name) is not None:
            value = body[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise BadRequest(f"'{name}' must be an integer >= {minimum}")
            return value
    return default


def _loads(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    return body


def _common(body: dict[str, Any], api: str, max_names: tuple[str, ...], default_max: int | None) -> dict[str, Any]:
    max_tokens = _int_field(body, *max_names, default=default_max, minimum=1)
    if max_tokens is None:
        raise BadRequest(f"'{max_names[-1]}' is required")
    model = body.get("model")
    stream = body.get("stream") is True
    options = body.get("stream_options")
    asked = stream and isinstance(options, dict) and options.get("include_usage") is True
    return {
        "api": api,
        "model": model if isinstance(model, str) and model else MODEL_ID,
        "max_tokens": max_tokens,
        "stream": stream,
        "include_usage": api in ("messages", "responses") or asked,
        "ignore_eos": body.get("ignore_eos") is True,
        "min_tokens": _int_field(body, "min_tokens", default=0, minimum=0) or 0,
        "body": body,
        "fields": {k: body[k] for k in AFFINITY_FIELDS if k in body},
    }


def parse_chat(raw: bytes) -> SimRequest:
    body = _loads(raw)
    common = _common(body, "chat", ("max_completion_tokens", "max_tokens"), DEFAULT_MAX_TOKENS)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    return SimRequest(**common, messages=messages)


def parse_completions(raw: bytes) -> SimRequest:
    body = _loads(raw)
    common = _common(body, "completions", ("max_tokens",), _COMPLETIONS_DEFAULT_MAX_TOKENS)
    return SimRequest(**common, text_prompt=body.get("prompt"))


def parse_messages(raw: bytes) -> SimRequest:
    body = _loads(raw)
    common = _common(body, "messages", ("max_tokens",), None)
    try:
        messages = anthropic_to_chat(body.get("system"), body.get("messages"))
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    return SimRequest(**common, messages=messages, cache_control=b'"cache_control"' in raw)


def parse_responses(raw: bytes) -> SimRequest:
    body = _loads(raw)
    common = _common(body, "responses", ("max_output_tokens",), DEFAULT_MAX_TOKENS)
    try:
        messages = responses_to_chat(body.get("input"))
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    instructions, previous = body.get("instructions"), body.get("previous_response_id")
    if instructions is not None and not isinstance(instructions, str):
        raise BadRequest("'instructions' must be a string")
    if previous is not None and (not isinstance(previous, str) or not previous):
        raise BadRequest("'previous_response_id' must be a non-empty string")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("'tools' must be a list")
    return SimRequest(
        **common,
        messages=messages,
        instructions=instructions,
        previous_response_id=previous,
        store=body.get("store") is not False,
    )


PARSERS = {
    "chat": parse_chat,
    "completions": parse_completions,
    "messages": parse_messages,
    "responses": parse_responses,
}


def affinity_headers(headers: CIMultiDictProxy[str]) -> dict[str, str]:
    """The affinity headers a request carries (names lower-cased). Credentials never: a name with a secret
    word in it (token, secret, auth, ...) is left out even if it were listed."""
    out = {}
    for name in AFFINITY_HEADERS:
        value = headers.get(name)
        if value is not None and not any(w in name for w in _SECRET_WORDS):
            out[name] = value
    return out
