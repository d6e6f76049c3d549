"""Error classes of a call that did not succeed, named for what a user can do about them.

| class | meaning |
|---|---|
| ``http_429`` | the host refused for rate (``Retry-After`` kept on the record when sent) |
| ``context_overflow`` | the prompt plus ``max_tokens`` exceeds the model's context (each provider's wording) |
| ``http_4xx``, ``http_5xx`` | any other refusal or server error |
| ``connect`` | no connection, or it broke before the response headers |
| ``disconnect`` | the connection broke after the headers, mid-stream |
| ``timeout`` | no bytes within the stall timeout, or the call passed its deadline |
| ``response_too_large`` | the body passed ``--max-response-bytes``; what came before is kept |
| ``stream_error`` | the host said in the stream that the call failed (an error event) |
| ``malformed_stream`` | the stream could not be understood (invalid JSON, an unexpected shape) |
| ``bad_usage`` | the host's token counts are not plausible non-negative integers that add up |
| ``incomplete`` | the stream closed before the flavour's final event |
| ``empty`` | the stream ended without any output token |
| ``cancelled`` | the run stopped before the host finished |
"""

from __future__ import annotations

import re

# Context-length refusals as each host words them (see docs/metrics.md for the sources).
_OVERFLOW = re.compile(
    rb"context_length_exceeded|maximum context length|context length exceeded|prompt is too long"
    rb"|exceeds the (?:available )?context (?:size|window)|too many tokens|input is too long"
    rb"|reduce the length of the (?:messages|prompt)|max_tokens.{0,40}exceed|context window",
    re.IGNORECASE,
)


def http_error_class(status: int, body: bytes) -> str:
    """The class of a non-200 answer, from its status and body."""
    if status == 429:
        return "http_429"
    if status in (400, 413, 422) and _OVERFLOW.search(body[:20_000]):
        return "context_overflow"
    return f"http_{status // 100}xx"
