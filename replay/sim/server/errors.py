"""Error bodies in each API's and provider's own shape, and the context-overflow wording each one uses.

Shapes (``Dialect.errors``): ``default`` ``{"error": {message, type, param, code: null}}``; ``openai`` the same
with OpenAI's codes; ``vllm`` (vLLM, SGLang) ``type`` named after the status (``BadRequestError``) and the
status as ``code``; ``llamacpp`` ``{"error": {code, message, type}}`` with llama-server's types;
``openrouter`` ``{"error": {code, message}}``. Anthropic Messages always answers
``{"type": "error", "error": {type, message}}`` (plus ``request_id`` under the anthropic dialect).
Overflow wordings and their sources are listed in docs/simulated-host.md (Faults).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import orjson

from replay.sim.server.dialect_base import Dialect

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_LLAMACPP_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    501: "not_supported_error",
    503: "unavailable_error",
}
_MESSAGES = {
    429: "Rate limit reached for requests",
    500: "The server had an error while processing your request",
    503: "The server is overloaded or not ready yet",
    529: "Overloaded",
}


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Overloaded" if status == 529 else "Error"


def _openai_type(status: int) -> str:
    return "rate_limit_error" if status == 429 else "invalid_request_error" if status < 500 else "server_error"


def error_body(
    api: str,
    dialect: Dialect,
    status: int,
    message: str,
    request_id: str,
    *,
    code: str | None = None,
    param: str | None = None,
    extra: dict[str, Any] | None = None,
) -> bytes:
    """The body of an HTTP error answer of ``api`` under ``dialect``."""
    if api == "messages":
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": _ANTHROPIC_TYPES.get(status, _fallback(status)), "message": message},
        }
        if dialect.name == "anthropic":
            body["request_id"] = f"req_{request_id}"
        return orjson.dumps(body)
    family = dialect.errors
    if family == "vllm":
        name = "".join(w.capitalize() for w in _phrase(status).replace("-", " ").split())
        error: dict[str, Any] = {
            "message": message,
            "type": name if name.endswith("Error") else name + "Error",
            "param": param,
            "code": status,
        }
    elif family == "llamacpp":
        error = {"code": status, "message": message, "type": _LLAMACPP_TYPES.get(status, "server_error")}
    elif family == "openrouter":
        error = {"code": status, "message": message}
    else:
        if family == "openai" and code is None and status == 429:
            code = "rate_limit_exceeded"
        error = {"message": message, "type": _openai_type(status), "param": param, "code": code}
    return orjson.dumps({"error": error | (extra or {})})


def _fallback(status: int) -> str:
    return "invalid_request_error" if status < 500 else "api_error"


def fault_body(api: str, dialect: Dialect, status: int, request_id: str) -> bytes:
    """The answer to an injected HTTP fault."""
    message = f"{_MESSAGES.get(status, _phrase(status))} (simulated fault {status})"
    return error_body(api, dialect, status, message, request_id)


def overflow_body(api: str, dialect: Dialect, limit: int, prompt: int, completion: int, request_id: str) -> bytes:
    """A 400 "context length exceeded" answer in the API's and dialect's own wording."""
    requested = prompt + completion
    if api == "messages":
        return error_body(api, dialect, 400, f"prompt is too long: {prompt} tokens > {limit} maximum", request_id)
    family = dialect.errors
    if family == "llamacpp":
        message = f"request ({prompt} tokens) exceeds the available context size ({limit} tokens), try increasing it"
        extra = {"type": "exceed_context_size_error", "n_prompt_tokens": prompt, "n_ctx": limit}
        return error_body(api, dialect, 400, message, request_id, extra=extra)
    if family == "openrouter":
        message = (
            f"This endpoint's maximum context length is {limit} tokens. However, you requested about "
            f"{requested} tokens ({prompt} of text input, {completion} in the output). Please reduce the "
            'length of either one, or use the "middle-out" transform to compress your prompt automatically.'
        )
        return error_body(api, dialect, 400, message, request_id)
    if family == "openai" and api == "responses":
        message = "Your input exceeds the context window of this model. Please adjust your input and try again."
        return error_body(api, dialect, 400, message, request_id, code="context_length_exceeded", param="input")
    if family == "openai":
        message = (
            f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
            f"{requested} tokens. Please reduce the length of the messages."
        )
        param = "prompt" if api == "completions" else "messages"
        return error_body(api, dialect, 400, message, request_id, code="context_length_exceeded", param=param)
    message = (
        f"This model's maximum context length is {limit} tokens. However, you requested {requested} tokens "
        f"({prompt} in the messages, {completion} in the completion). Please reduce the length of the "
        "messages or completion."
    )
    return error_body(api, dialect, 400, message, request_id)


def previous_not_found(dialect: Dialect, response_id: str, request_id: str) -> bytes:
    """Responses API: ``previous_response_id`` names no response the sim keeps."""
    message = f"Previous response with id '{response_id}' not found."
    return error_body(
        "responses", dialect, 400, message, request_id, code="previous_response_not_found", param="previous_response_id"
    )


def stream_error(api: str, dialect: Dialect) -> dict[str, Any]:
    """The error object of a mid-stream failure (``midstream`` fault) on an OpenAI-style stream."""
    message = "The server had an error while processing your request (simulated midstream fault)"
    if dialect.errors == "openrouter":
        return {"code": 502, "message": message}
    if dialect.errors == "vllm":
        return {"message": message, "type": "InternalServerError", "param": None, "code": 500}
    if dialect.errors == "llamacpp":
        return {"code": 500, "message": message, "type": "server_error"}
    return {"message": message, "type": "server_error", "param": None, "code": None}
