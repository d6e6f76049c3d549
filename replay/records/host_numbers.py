"""Numbers a host sends, read through one bounded parser before anything adds them up.

A host builds its JSON and its headers itself: a count may come as a string, a float, a negative number or 2^64, a
time as 1e303, a header as ``nan`` or ``inf``. Every number a host sends that replay reads (token counts, server
timings in bodies and headers, a reported cost, rate-limit headers, retry advice) passes through here first: it is
taken only when it is of the right type, finite and within a plausible range, so no tally, histogram or wait ever
meets an infinity, a NaN or a 300-digit integer. What fails is, per field, a ``bad_usage`` call (token counts:
``replay.clients.usage``) or the field left out with a note on the record (the rest), never an exception.

It lives beside the records because both sides read host numbers through it: the client as a call ends, and the
figures when a run file is read back (a file written before a bound existed, or by hand, is read the same way).
"""

from __future__ import annotations

import math
from typing import Any

MAX_COUNT = (1 << 31) - 1  # tokens of one request: no request has two billion
MAX_SECONDS = 86_400.0  # one day: no timing of one call, and no wait a host may ask for, is longer
MAX_MS = MAX_SECONDS * 1000
MAX_USD = 1e4  # the cost a host reports for one call
MAX_HEADER_INT = 10**15  # rate-limit figures (tokens a day, requests a minute)
MAX_ANY = 1e18  # any other number in a host's timings object: kept only as a plain JSON number
_TEXT_CHARS = 64  # a header number longer than this is no number


def number(value: Any, lo: float, hi: float) -> float | None:
    """``value`` as a float when it is a JSON number (not a bool) in ``lo``..``hi``; else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return float(value) if lo <= value <= hi else None  # an int compares exactly, however many digits
    return value if math.isfinite(value) and lo <= value <= hi else None


def integer(value: Any, lo: int, hi: int) -> int | None:
    """``value`` when it is a JSON integer (not a bool, not a float) in ``lo``..``hi``; else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if lo <= value <= hi else None


def from_text(text: Any, lo: float, hi: float) -> float | None:
    """A number written as text (a header), in ``lo``..``hi``; None for anything else (``nan``, ``inf``, ``1e400``,
    ``0x10``, a date, a 10 KB string)."""
    if not isinstance(text, str) or len(text) > _TEXT_CHARS:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and lo <= value <= hi else None


def int_from_text(text: Any, lo: int, hi: int) -> int | None:
    """An integer figure written as text (``"1000"``, ``"1000.0"``), in ``lo``..``hi``; else None."""
    value = from_text(text, lo, hi)
    return None if value is None else int(value)


def describe(value: Any) -> str:
    """A host value as a note shows it: short, whatever it is."""
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."
