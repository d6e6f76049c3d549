"""What the host signalled besides its answers: rate-limit state, the cost of new connections, and refusals that
are a provider's limits rather than a passing fault.

Rate-limit headers (PROVIDERS.md): OpenAI and Groq ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``,
Cerebras the same with a window suffix (``-requests-day``, ``-tokens-minute``), Anthropic
``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``, OpenRouter
``x-ratelimit-{limit,remaining,reset}``. Per bucket the summary keeps the limit, the lowest remaining value seen
(how close the run came) and the last reset as sent.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from replay.results.records import RequestRecord

_OPENAI = re.compile(r"^x-ratelimit-(limit|remaining|reset)(?:-([a-z-]+))?$")
_ANTHROPIC = re.compile(r"^anthropic-ratelimit-([a-z-]+)-(limit|remaining|reset)$")
PROVIDER_LIMITS = ("context_overflow", "request_too_large", "quota_exhausted", "tier_limit")


def _bucket_field(name: str) -> tuple[str, str] | None:
    if m := _OPENAI.match(name):
        return m.group(2) or "requests", m.group(1)
    if m := _ANTHROPIC.match(name):
        return m.group(1), m.group(2)
    return None


def _int(value: str) -> int | None:
    try:
        return int(float(value))
    except ValueError:
        return None


def rate_limits(reqs: list[RequestRecord]) -> dict[str, dict[str, Any]]:
    """Per bucket (``requests``, ``tokens``, ``requests-day``, ``input-tokens``, ...): limit, lowest remaining, last
    reset, and how many calls reported it ({} when the host sends no rate-limit headers)."""
    out: dict[str, dict[str, Any]] = {}
    for r in reqs:
        for name, value in (r.headers or {}).items():
            bf = _bucket_field(name)
            if bf is None:
                continue
            b = out.setdefault(bf[0], {"limit": None, "remaining_min": None, "reset_last": None, "requests": 0})
            if bf[1] == "limit":
                b["limit"] = _int(value)
                b["requests"] += 1
            elif bf[1] == "remaining" and (n := _int(value)) is not None:
                b["remaining_min"] = n if b["remaining_min"] is None else min(b["remaining_min"], n)
            elif bf[1] == "reset":
                b["reset_last"] = value
    return out


def connections(measured: list[RequestRecord]) -> dict[str, Any]:
    """How many calls opened a new connection and what that took (outside TTFT: before the bytes were sent)."""
    times = [r.connect_s for r in measured if r.connect_s is not None]
    arr = np.asarray(times, dtype=float)
    return {
        "new": len(times),
        "reused": len(measured) - len(times),
        "new_share": len(times) / len(measured) if measured else None,
        "connect_s": {
            "p50": float(np.percentile(arr, 50)) if times else None,
            "p95": float(np.percentile(arr, 95)) if times else None,
            "mean": float(arr.mean()) if times else None,
        },
    }


def provider_limits(errors_by_class: dict[str, int]) -> dict[str, int]:
    """The refusals that are a provider's limits, by class (docs/metrics.md)."""
    return {k: errors_by_class[k] for k in PROVIDER_LIMITS if errors_by_class.get(k)}


GROQ_PERFORMANCE_UNCACHED = 8192  # Groq's Performance tier takes requests whose uncached context is below this


def tier_checks(header: dict[str, Any], reqs: list[RequestRecord]) -> dict[str, Any]:
    """Calls that a tier's documented limit would refuse, where the run asked for that tier: Groq's Performance
    tier needs the uncached context below 8,192 tokens (issue 11; the wording of its refusal is unverified)."""
    host = header.get("host") or {}
    if host.get("dialect") != "groq" or (host.get("body") or {}).get("service_tier") != "performance":
        return {}
    sized = [r for r in reqs if r.prompt_tokens is not None]
    above = sum((r.prompt_tokens or 0) - (r.cached_tokens or 0) >= GROQ_PERFORMANCE_UNCACHED for r in sized)
    return {"groq_performance_uncached_8192": {"above": above, "of": len(sized)}}
