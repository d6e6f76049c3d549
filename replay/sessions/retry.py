"""Retries as the official SDKs make them: which failures to retry, and how long to wait before the next attempt.

Retried (``../shared/PROVIDERS.md``, the Stainless-generated SDKs' ``_should_retry``): 408, 409, 429 and every 5xx,
and calls that failed before the host sent a token (no connection, a connection that broke, a stream that ended
early or timed out). A call that failed after tokens arrived is retried only with ``--retry-partial`` (a replayed
agent would have had half an answer). ``x-should-retry: true|false`` overrides all of that. A context overflow,
a malformed stream or implausible usage is never retried: it would fail the same way; nor is an exhausted quota
or a tier's limit (``quota_exhausted``, ``tier_limit``: a 429 that waiting does not cure), whatever the host's
``x-should-retry`` says.

The wait honours ``retry-after-ms`` (milliseconds), then ``retry-after`` (seconds, or an HTTP date), when it asks for
a wait (0, negative, ``nan`` or a past date ask for none: the backoff applies, as in the SDKs); otherwise it
is exponential backoff with jitter (0.5 s doubling to 8 s, less up to 25 %, as the SDKs do). Every wait is capped
by ``--retry-max-wait``.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from replay.records.host_numbers import MAX_SECONDS, from_text
from replay.records.run_file import RequestRecord

RETRY_STATUS = {408, 409, 429}
_BEFORE_TOKENS = {"connect", "disconnect", "timeout", "incomplete", "empty", "stream_error"}
NEVER = {"quota_exhausted", "tier_limit", "tls"}  # waiting does not cure them (nor a certificate not trusted)
INITIAL_S, MAX_BACKOFF_S = 0.5, 8.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    retries: int = 0  # attempts after the first
    max_wait_s: float = 60.0
    partial: bool = False  # retry calls that failed after tokens arrived

    def public(self) -> dict[str, object]:
        return {"retries": self.retries, "max_wait_s": self.max_wait_s, "partial": self.partial}

    def should_retry(self, rec: RequestRecord) -> bool:
        """Whether the failed call ``rec`` is worth another attempt (its attempt number aside)."""
        if rec.error in NEVER:
            return False
        advice = (rec.headers or {}).get("x-should-retry")
        if advice in ("true", "false"):
            return advice == "true"
        if rec.status is not None and rec.status != 200:
            return rec.status in RETRY_STATUS or rec.status >= 500
        if rec.error in _BEFORE_TOKENS:
            return rec.output_events == 0 or self.partial
        return False

    def wait(self, attempt: int, rec: RequestRecord, rng: random.Random) -> float:
        """Seconds to wait before attempt ``attempt + 1``, after attempt ``attempt`` failed as ``rec``."""
        asked = retry_after(rec)
        if asked is not None:
            return min(max(asked, 0.0), self.max_wait_s)
        backoff = min(INITIAL_S * 2 ** (attempt - 1), MAX_BACKOFF_S) * (1 - 0.25 * rng.random())
        return min(backoff, self.max_wait_s)


def retry_after(rec: RequestRecord) -> float | None:
    """The host's own advice, in seconds: ``retry-after-ms``, then ``retry-after`` (seconds or an HTTP date), read
    through the bounded parser. Advice of no wait at all (0, negative, a date passed), or no number (``nan``,
    ``inf``), is no advice: None, and the backoff applies, as the SDKs do (they take only ``0 < wait``)."""
    headers = rec.headers or {}
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        seconds = from_text(value, 0.0, MAX_SECONDS / scale)
        if seconds is None and name == "retry-after" and from_text(value, -math.inf, math.inf) is None:
            try:  # an HTTP date
                seconds = parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError, IndexError, OverflowError):
                seconds = None
        if seconds is not None and seconds * scale > 0:
            return min(seconds * scale, MAX_SECONDS)
        return None
    return None
