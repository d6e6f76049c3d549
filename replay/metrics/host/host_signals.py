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
from typing import Any, Protocol

from replay.histogram import Histogram, read_percentiles
from replay.records.host_numbers import MAX_HEADER_INT, int_from_text

US = 1_000_000

_OPENAI = re.compile(r"^x-ratelimit-(limit|remaining|reset)(?:-([a-z-]+))?$")
_ANTHROPIC = re.compile(r"^anthropic-ratelimit-([a-z-]+)-(limit|remaining|reset)$")
PROVIDER_LIMITS = ("context_overflow", "request_too_large", "quota_exhausted", "tier_limit")


class SignalTally(Protocol):
    """What the figures here read of a run's tally (``host_tally.HostTally``, which parses headers with this
    module's helpers)."""

    limits: dict[str, list[Any]]  # bucket -> [limit, lowest remaining, last reset, requests]
    conn: list[int]  # new, reused
    connect: Histogram  # µs to open a new connection
    sized: list[int]  # requests with a reported prompt, those over a tier's uncached limit


def bucket_field(name: str) -> tuple[str, str] | None:
    """(bucket, field) of a rate-limit header's name: ``x-ratelimit-remaining-tokens`` → (tokens, remaining)."""
    if m := _OPENAI.match(name):
        return m.group(2) or "requests", m.group(1)
    if m := _ANTHROPIC.match(name):
        return m.group(1), m.group(2)
    return None


def parse_int(value: str) -> int | None:
    """A rate-limit figure as sent (text), through the bounded parser; None when it is no plausible count."""
    return int_from_text(value, 0, MAX_HEADER_INT)


def rate_limits(t: SignalTally) -> dict[str, dict[str, Any]]:
    """Per bucket (``requests``, ``tokens``, ``requests-day``, ``input-tokens``, ...): limit, lowest remaining, last
    reset, and how many calls reported it ({} when the host sends no rate-limit headers)."""
    return {b: {"limit": limit, "remaining_min": low, "reset_last": reset, "requests": n}
            for b, (limit, low, reset, n) in t.limits.items()}  # fmt: skip


def connections(t: SignalTally) -> dict[str, Any]:
    """How many calls opened a new connection and what that took (outside TTFT: before the bytes were sent)."""
    new, reused, reconnects = t.conn
    h = t.connect
    return {
        "new": new,
        "reused": reused,
        "reconnects": reconnects,  # WebSocket: sockets the host closed (its connection limit, a drop), replaced
        "new_share": new / (new + reused) if new + reused else None,
        "connect_s": {k: v for k, v in read_percentiles(h, (50, 95), US, mean=True).items() if k != "n"},
    }


def provider_limits(errors_by_class: dict[str, int]) -> dict[str, int]:
    """The refusals that are a provider's limits, by class (docs/metrics.md)."""
    return {k: errors_by_class[k] for k in PROVIDER_LIMITS if errors_by_class.get(k)}


def tier_checks(header: dict[str, Any], t: SignalTally) -> dict[str, Any]:
    """Calls that a tier's documented limit would refuse, where the run asked for that tier: Groq's Performance
    tier needs the uncached context below 8,192 tokens (as quoted; the wording of its refusal is unverified)."""
    host = header.get("host") or {}
    if host.get("dialect") != "groq" or (host.get("body") or {}).get("service_tier") != "performance":
        return {}
    return {"groq_performance_uncached_8192": {"above": t.sized[1], "of": t.sized[0]}}
