"""What the wire formats and dialects need to know about one request, and the engine's own timings of it.

Kept apart from ``dialects`` and ``wire`` so both can use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replay.sim.core.engine import Seq

PRIMARY = "primary"


@dataclass(frozen=True, slots=True)
class Counts:
    """What a usage report says: prompt, cached and output tokens (``created``: newly cached, Anthropic)."""

    prompt: int
    cached: int
    output: int
    reasoning: int
    created: int = 0
    speculation: dict[str, int] | None = None  # a speculator's accepted, drafted tokens and drafts (spec_meta)


def spec_meta(speculation: dict[str, int] | None) -> dict[str, int] | None:
    """A request's speculation as SGLang names it in its ``meta_info`` (accepted and drafted tokens, verify steps),
    the fields the sim sends on a speculating profile's finish chunk (``choices[0].meta_info``)."""
    if speculation is None:
        return None
    return {"spec_accept_token_num": speculation["accepted"], "spec_draft_token_num": speculation["drafted"],
            "spec_verify_ct": speculation["drafts"]}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Timings:
    """The engine's truth of one request, in seconds: waiting queue, prefill (admission to first token),
    decode (first to last token)."""

    queue_s: float = 0.0
    prefill_s: float = 0.0
    decode_s: float = 0.0

    @classmethod
    def of(cls, seq: Seq) -> Timings:
        """From the engine's stamps; a stamp not reached yet (or the instant profile's) counts as no time."""
        queue = seq.t_scheduled - seq.t_queued if seq.t_scheduled is not None else 0.0
        prefill = seq.t_first_token - seq.t_scheduled if seq.t_first_token and seq.t_scheduled else 0.0
        decode = seq.t_last_token - seq.t_first_token if seq.t_last_token and seq.t_first_token else 0.0
        return cls(queue, prefill, decode)

    @property
    def to_first_token_s(self) -> float:
        return self.queue_s + self.prefill_s


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request as the wire and its dialect see it."""

    request_id: str
    api: str  # chat | completions | messages | responses
    model: str
    created: int  # unix time
    route: str = PRIMARY  # primary | fallback:PROFILE
    tier: str | None = None  # the service_tier the request asked for
    perf_metrics: bool = False  # Fireworks: perf_metrics_in_response
    router_metadata: bool = False  # OpenRouter: the request opted in to openrouter_metadata

    @property
    def fallback(self) -> bool:
        return self.route != PRIMARY
