"""Rate-limit headers as providers send them, from windows that count what the sim served (never enforced).

The limits are nominal figures of the sim (``LIMITS``); the remaining counts and reset times are true to the
requests and prompt tokens seen in the current window, so a client parsing them sees values that move.
Header names and formats per provider: the project's provider notes, PROVIDERS.md (OpenAI: reset as durations
like ``6m0s``; Anthropic: RFC 3339 timestamps; Groq: requests per day, tokens per minute; Cerebras: window-suffixed
names).
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass

LIMITS = {"requests_per_minute": 10_000, "tokens_per_minute": 30_000_000, "requests_per_day": 1_000_000}


@dataclass(slots=True)
class _Window:
    period_s: float
    start: float = 0.0
    requests: int = 0
    tokens: int = 0

    def roll(self, now: float) -> None:
        if now - self.start >= self.period_s:
            self.start, self.requests, self.tokens = now - (now - self.start) % self.period_s, 0, 0

    def reset_s(self, now: float) -> float:
        return max(self.start + self.period_s - now, 0.0)


def go_duration(seconds: float) -> str:
    """A duration the way OpenAI and Groq write reset times: ``12ms``, ``1.5s``, ``6m0s``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{rest}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes}m{rest}s"


def _rfc3339(seconds_from_now: float) -> str:
    at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds_from_now)
    return at.replace(microsecond=0).isoformat().replace("+00:00", "Z")


class RateLimits:
    """Requests and tokens per minute and requests per day, as served so far."""

    def __init__(self) -> None:
        now = time.monotonic()
        self._minute = _Window(60.0, now)
        self._day = _Window(86_400.0, now)

    def note(self, tokens: int) -> None:
        """Count one request of ``tokens`` prompt tokens."""
        now = time.monotonic()
        for w in (self._minute, self._day):
            w.roll(now)
            w.requests += 1
            w.tokens += tokens

    def _figures(self, exhausted: bool) -> tuple[int, int, int, float, float]:
        now = time.monotonic()
        m, d = self._minute, self._day
        m.roll(now)
        d.roll(now)
        rpm = 0 if exhausted else max(LIMITS["requests_per_minute"] - m.requests, 0)
        tpm = max(LIMITS["tokens_per_minute"] - m.tokens, 0)
        rpd = 0 if exhausted else max(LIMITS["requests_per_day"] - d.requests, 0)
        return rpm, tpm, rpd, m.reset_s(now), d.reset_s(now)

    def openai(self, exhausted: bool = False) -> dict[str, str]:
        """``x-ratelimit-*`` per minute (OpenAI)."""
        rpm, tpm, _, reset, _ = self._figures(exhausted)
        return {
            "x-ratelimit-limit-requests": str(LIMITS["requests_per_minute"]),
            "x-ratelimit-limit-tokens": str(LIMITS["tokens_per_minute"]),
            "x-ratelimit-remaining-requests": str(rpm),
            "x-ratelimit-remaining-tokens": str(tpm),
            "x-ratelimit-reset-requests": go_duration(reset),
            "x-ratelimit-reset-tokens": go_duration(reset),
        }

    def groq(self, exhausted: bool = False) -> dict[str, str]:
        """``x-ratelimit-*`` with requests per day and tokens per minute (Groq)."""
        _, tpm, rpd, reset_m, reset_d = self._figures(exhausted)
        return {
            "x-ratelimit-limit-requests": str(LIMITS["requests_per_day"]),
            "x-ratelimit-limit-tokens": str(LIMITS["tokens_per_minute"]),
            "x-ratelimit-remaining-requests": str(rpd),
            "x-ratelimit-remaining-tokens": str(tpm),
            "x-ratelimit-reset-requests": go_duration(reset_d),
            "x-ratelimit-reset-tokens": go_duration(reset_m),
        }

    def cerebras(self, exhausted: bool = False) -> dict[str, str]:
        """Window-suffixed ``x-ratelimit-*-requests-day`` / ``-tokens-minute`` (Cerebras); resets in seconds."""
        _, tpm, rpd, reset_m, reset_d = self._figures(exhausted)
        return {
            "x-ratelimit-limit-requests-day": str(LIMITS["requests_per_day"]),
            "x-ratelimit-remaining-requests-day": str(rpd),
            "x-ratelimit-reset-requests-day": f"{reset_d:.0f}",
            "x-ratelimit-limit-tokens-minute": str(LIMITS["tokens_per_minute"]),
            "x-ratelimit-remaining-tokens-minute": str(tpm),
            "x-ratelimit-reset-tokens-minute": f"{reset_m:.0f}",
        }

    def anthropic(self, exhausted: bool = False) -> dict[str, str]:
        """``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``."""
        rpm, tpm, _, reset, _ = self._figures(exhausted)
        at = _rfc3339(reset)
        out = {
            "anthropic-ratelimit-requests-limit": str(LIMITS["requests_per_minute"]),
            "anthropic-ratelimit-requests-remaining": str(rpm),
            "anthropic-ratelimit-requests-reset": at,
        }
        for kind in ("tokens", "input-tokens", "output-tokens"):
            out[f"anthropic-ratelimit-{kind}-limit"] = str(LIMITS["tokens_per_minute"])
            out[f"anthropic-ratelimit-{kind}-remaining"] = str(tpm)
            out[f"anthropic-ratelimit-{kind}-reset"] = at
        return out
