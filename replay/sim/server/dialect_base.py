"""What a dialect is: the simulated host's plain OpenAI-compatible stream (vLLM-like, nothing added) and the hooks a
provider's dialect overrides (``dialects``: one class per provider, picked by ``replay sim --dialect NAME``).

The wire modules (``replay.sim.wire``), the answer, the errors and the virtual host read a dialect through this
face alone; ``openai_usage`` is the OpenAI chat usage object the dialects start from.
"""

from __future__ import annotations

from typing import Any

from replay.sim.server.exchange import Counts, Exchange, Timings, spec_meta
from replay.sim.server.ratelimits import RateLimits


def openai_usage(c: Counts) -> dict[str, Any]:
    """The OpenAI chat usage object."""
    return {
        "prompt_tokens": c.prompt,
        "completion_tokens": c.output,
        "total_tokens": c.prompt + c.output,
        "prompt_tokens_details": {"cached_tokens": c.cached},
        "completion_tokens_details": {"reasoning_tokens": c.reasoning},
    }


class Dialect:
    """The default: today's plain OpenAI-compatible stream (vLLM-like), nothing added."""

    name = "default"
    reasoning_fields: tuple[str, ...] = ("reasoning_content",)  # () = reasoning is not streamed
    usage_always = False  # top-level usage is sent even when the request did not ask for it
    usage_on_finish = False  # usage rides on the finish_reason chunk instead of a chunk of its own
    timings_in_usage = False  # the server timings it reports are fields of the usage object
    headers_at_first_token = False  # streamed headers wait for the first token (they carry its figures)
    comment = b""  # an SSE comment sent before and during generation
    errors = "default"  # error wording: default | openai | vllm | llamacpp | openrouter
    done_after_error = True  # a mid-stream error frame is followed by [DONE]

    def chunk_fields(self, x: Exchange) -> dict[str, Any]:
        """Top-level fields of every chunk."""
        return {}

    def first_fields(self, x: Exchange) -> dict[str, Any]:
        """Top-level fields of the first chunk only."""
        return {}

    def usage(self, c: Counts, t: Timings) -> dict[str, Any]:
        return openai_usage(c)

    def spec_meta(self, c: Counts) -> dict[str, int] | None:
        """A speculating profile's per-call acceptance, on the finish chunk's ``choices[0].meta_info`` under
        SGLang's names (the default and every OpenAI-style dialect; None: the dialect reports none per call)."""
        return spec_meta(c.speculation)

    def reported_timings(self, x: Exchange, c: Counts, t: Timings) -> dict[str, Any] | None:
        """The server timings this dialect reports for a request (logged in the truth as ``server_timings``)."""
        return None

    def final_fields(self, x: Exchange, c: Counts, t: Timings, usage: dict[str, Any] | None) -> dict[str, Any]:
        """Top-level fields of the finish chunk (the one with ``finish_reason``). ``usage`` is the usage this
        dialect reports, asked for or not (None when the request gets none, as with the ``no_usage`` fault)."""
        return {}

    def headers(self, x: Exchange, limits: RateLimits, exhausted: bool = False) -> dict[str, str]:
        """Response headers (``exhausted``: on a 429, the remaining requests read 0)."""
        return {}

    def first_token_headers(self, x: Exchange, c: Counts, t: Timings) -> dict[str, str]:
        """Headers only known once the first token is sampled (sent then, with ``headers_at_first_token``)."""
        return {}

    def messages_usage(self, x: Exchange) -> dict[str, Any]:
        """Extra fields of an Anthropic Messages usage object."""
        return {}

    def response_tier(self, x: Exchange) -> str:
        """``service_tier`` of a Responses API response."""
        return "auto"
