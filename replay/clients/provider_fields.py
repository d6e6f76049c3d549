"""What a host says about itself beyond the OpenAI fields: each provider's own extras, read generically.

Every field here rides on an event the flavours decode anyway (the first chunk, the finish chunk, the usage
chunk) or on a response header, so reading them adds nothing to the per-read path. Any provider's field is read
whatever the dialect: a gateway may pass another provider's fields through, and a field that is absent costs
nothing. Sources: ``../shared/PROVIDERS.md`` (section per provider) and docs/providers.md.

- Groq: ``x_groq.id`` (first and finish chunk), ``x_groq.usage`` (finish chunk; the same object as ``usage``)
  whose ``queue_time``, ``prompt_time``, ``completion_time`` and ``total_time`` (seconds) are the server timings.
- Cerebras: a top-level ``time_info`` on the finish chunk (the same four times, and ``created``).
- llama.cpp: a top-level ``timings`` on the finish chunk (milliseconds).
- Fireworks: ``perf_metrics`` on the finish chunk (when asked with ``perf_metrics_in_response``), else the
  ``fireworks-server-time-to-first-token`` header (seconds).
- OpenRouter: ``usage.cost`` (USD) beside the counts; the serving ``provider`` on every chunk.
- Vercel AI Gateway: ``provider_metadata.gateway.routing.finalProvider`` (the sim's choice of where it rides:
  PROVIDERS.md §8 could not verify it).
- Anthropic: ``usage.speed`` (beta fast mode) beside ``usage.service_tier``.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

from replay.clients.stream import StreamState
from replay.clients.usage import get, host_value

GROQ_TIMES = ("queue_time", "prompt_time", "completion_time", "total_time")
TIMING_KEYS = ("timings", "time_info", "perf_metrics")  # top-level chunk fields that hold server timings
FIREWORKS_TTFT = "fireworks-server-time-to-first-token"


def note_chunk(st: StreamState, obj: dict[str, Any]) -> None:
    """The extras one decoded OpenAI-style chunk carries."""
    groq = obj.get("x_groq")
    if isinstance(groq, dict):
        if isinstance(groq.get("id"), str):
            st.served["request_id"] = groq["id"][:200]
        if obj.get("usage") is None and groq.get("usage") is not None:
            st.usage_parts.append(groq["usage"])  # Groq sends it here always, in ``usage`` only when asked
    for key in TIMING_KEYS:
        if obj.get(key) is not None:
            st.timings = host_value(obj[key])
    final = get(obj, "provider_metadata", "gateway", "routing", "finalProvider")
    if isinstance(final, str) and final:
        st.served["provider"] = final[:200]


def note_usage(st: StreamState, usage: Any) -> None:
    """Extras of the usage object the counts were taken from: Groq's timings, OpenRouter's cost."""
    if not isinstance(usage, dict):
        return
    if st.timings is None and any(k in usage for k in GROQ_TIMES):
        st.timings = host_value({k: usage[k] for k in GROQ_TIMES if k in usage})
    cost = usage.get("cost")
    if _plausible_number(cost):
        st.served["cost"] = float(cost)
    speed = usage.get("speed")
    if isinstance(speed, str) and speed:
        st.served["speed"] = speed[:50]


def header_timings(headers: dict[str, str]) -> dict[str, Any] | None:
    """Server timings a host sends only as headers (Fireworks' server TTFT), or None."""
    value = headers.get(FIREWORKS_TTFT)
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return {"server-time-to-first-token": seconds} if math.isfinite(seconds) and seconds >= 0 else None


def _plausible_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value < 1e9
