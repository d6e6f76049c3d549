"""Error classes of a call that did not succeed, named for what a user can do about them.

| class | meaning |
|---|---|
| ``http_429`` | the host refused for rate (``Retry-After`` kept on the record when sent) |
| ``context_overflow`` | the prompt plus ``max_tokens`` exceeds the model's context (each provider's wording) |
| ``request_too_large`` | the request's bytes exceed what the host accepts (413, Anthropic ``request_too_large``) |
| ``quota_exhausted`` | the account's credit or quota is used up (402, OpenAI ``insufficient_quota``): never retried |
| ``tier_limit`` | a limit of the account's tier or of the service tier asked for (OpenAI's 429 "Request too large |
|  | for ... tokens per min", a service tier that refuses the request): never retried |
| ``images_refused`` | the model takes no images (a 400 saying so: vLLM, OpenAI, llama.cpp, the sim): replay the |
|  | workload against a vision model, or import it with ``--screenshot-window 0`` |
| ``tools_refused`` | the host's tool calling is off (vLLM without ``--enable-auto-tool-choice --tool-call-parser |
|  | NAME``, llama.cpp without ``--jinja``): start it with them, or replay with ``--tool-calls text`` |
| ``redirect`` | a 3xx: not followed (or, with ``--follow-redirects``, to another origin); the detail names |
|  | the target |
| ``http_4xx``, ``http_5xx`` | any other refusal or server error |
| ``protocol`` | the host answered, but not in HTTP a stream can be read from (a status line or headers that do not |
|  | parse, too many or too large headers, a 2xx other than 200 to a streamed call); never retried |
| ``connect`` | no connection, or it broke before the response headers |
| ``tls`` | the TLS handshake failed (a certificate not trusted: ``--ca-bundle FILE``, or ``--insecure``); never |
|  | retried |
| ``disconnect`` | the connection broke after the headers, mid-stream |
| ``timeout`` | no new bytes within the stall timeout (``--stall-timeout``), or the call passed its deadline |
|  | (``--request-timeout``) |
| ``response_too_large`` | the body passed ``--max-response-bytes``; what came before is kept |
| ``stream_error`` | the host said in the stream that the call failed (an error event) |
| ``malformed_stream`` | the stream could not be understood (invalid JSON, an unexpected shape) |
| ``bad_usage`` | the host's token counts are not plausible non-negative integers that add up, or they contradict |
|  | the stream (fewer output tokens than token-bearing events) |
| ``incomplete`` | the stream closed before the flavour's final event |
| ``empty`` | the stream ended without any output token, and the host's usage counted none |
| ``cancelled`` | the run stopped before the host finished |
"""

from __future__ import annotations

import re

# Context-length refusals as each host words them (see docs/metrics.md for the sources; the engines' own wordings,
# vLLM's, llama.cpp's and SGLang's, are listed in docs/real-engines.md and tests/clients/test_errors.py).
_OVERFLOW = re.compile(
    rb"context_length_exceeded|maximum context length|context length exceeded|prompt is too long"
    rb"|exceeds the (?:available )?context (?:size|window)|too many tokens|input is too long"
    rb"|reduce the length of the (?:messages|prompt)|max_tokens.{0,40}exceed|context window"
    rb"|exceed_context_size_error|larger than the max context size"  # llama.cpp
    rb"|cannot be greater than max_model_len|exceeds the max_model_len|longer than the maximum model length"  # vLLM
    rb"|min_tokens must be less than or equal to max_tokens"  # vLLM lowered max_tokens to fit, under min_tokens
    rb"|longer than the model's context length",  # SGLang
    re.IGNORECASE,
)


# Credit or quota used up: OpenAI insufficient_quota ("You exceeded your current quota"), OpenRouter 402
# ("Insufficient credits"), Anthropic billing_error ("Your credit balance is too low"); PROVIDERS.md §1, §7.
_QUOTA = re.compile(
    rb"insufficient_quota|exceeded your current quota|insufficient credits|credit balance|billing_error"
    rb"|quota (?:exceeded|exhausted)|out of credits|payment required",
    re.IGNORECASE,
)
_TOO_LARGE = re.compile(rb"request_too_large|request too large|payload too large|request entity too large", re.I)
# A host whose model takes no images: vLLM ("... is not a multimodal model"), OpenAI ("image_url is only supported by
# certain models"), llama.cpp ("image input is not supported"), the sim ("does not support image input").
_IMAGES = re.compile(
    rb"not a multimodal model|multimodal (?:input )?(?:is )?not supported|image input is not supported"
    rb"|does not support image|image_url is only supported|images? (?:are|is) not supported|vision is not supported",
    re.I,
)
# A host whose tool calling is off: vLLM's 400 '"auto" tool choice requires --enable-auto-tool-choice and
# --tool-call-parser to be set', llama.cpp's 'tools param requires --jinja flag' (docs/real-engines.md).
_TOOLS = re.compile(rb"tool choice requires --enable-auto-tool-choice|--tool-call-parser to be set"
                    rb"|tools param requires --jinja", re.IGNORECASE)  # fmt: skip
# A limit of the tier rather than of the moment: OpenAI's 429 "Request too large for MODEL ... on tokens per min"
# (one request above the tier's TPM), a service tier that refuses the request (Groq's performance tier, whose
# exact wording could not be checked: docs/providers.md).
_TIER = re.compile(
    rb"(?:request too large|too large for).{0,200}per min|service[_ ]tier|performance tier|upgrade your (?:tier|plan)"
    rb"|not available (?:on|for|in) (?:your|this) tier|tier limit",
    re.IGNORECASE | re.DOTALL,
)


def http_error_class(status: int, body: bytes) -> str:
    """The class of a non-200 answer, from its status and body."""
    head = body[:20_000]
    if 200 <= status < 300:  # (200 is the stream) a 204, a 202: the host answered a streamed call with no stream
        return "protocol"
    if 300 <= status < 400:
        return "redirect"
    if status == 402 or (status in (400, 403, 429) and _QUOTA.search(head)):
        return "quota_exhausted"
    if status in (400, 413, 429) and _TIER.search(head):
        return "tier_limit"
    if status == 429:
        return "http_429"
    if status in (400, 413, 422) and _OVERFLOW.search(head):
        return "context_overflow"
    if status in (400, 415, 422) and _IMAGES.search(head):
        return "images_refused"
    if status in (400, 422) and _TOOLS.search(head):
        return "tools_refused"
    if status == 413 or (status == 400 and _TOO_LARGE.search(head)):
        return "request_too_large"
    return f"http_{status // 100}xx"


def drop_frames(exc: BaseException) -> None:
    """Drop the tracebacks of a failure the call has classified, and of those it was raised from or during.

    A traceback holds the frames it passed through, and their locals hold what raised it: aiohttp's stream reader
    and protocol keep the exception they raised (``set_exception``), and an asyncio task keeps the one its
    coroutine ended with. Kept, each failed call would leave a reference cycle that only the cyclic collector
    frees; the record already says what happened (class and detail)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        e = pending.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        e.__traceback__ = None
        pending += (e.__cause__, e.__context__)
