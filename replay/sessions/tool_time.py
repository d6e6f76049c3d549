"""Tool time: how long a replayed agent pauses between calls (its tools running).

``recorded``, ``scale:X``, ``fixed:S``, ``dist:lognormal:MEDIAN:SIGMA`` (a seeded draw per pause, for workloads
whose tool time was not recorded or should not be trusted) or ``none``; any of them capped per pause with
``--idle-cap S`` (a user reading for ten minutes is not tool time worth replaying).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

KINDS = "recorded, none, scale:X, fixed:SECONDS or dist:lognormal:MEDIAN:SIGMA"


@dataclass(frozen=True, slots=True)
class ToolTimePolicy:
    """How long the agent pauses between calls, and the longest any one pause may be (``cap``)."""

    kind: str = "recorded"
    value: float = 1.0  # scale factor, fixed seconds, or the distribution's median
    sigma: float = 0.0  # dist: the log-normal's sigma
    cap: float | None = None  # --idle-cap: no pause longer than this

    @classmethod
    def parse(cls, spec: str, cap: float | None = None) -> ToolTimePolicy:
        if cap is not None and cap < 0:
            raise ValueError(f"idle cap {cap:g}: expected seconds >= 0")
        kind, _, arg = spec.strip().partition(":")
        if kind in ("recorded", "none") and not arg:
            return cls(kind, 1.0 if kind == "recorded" else 0.0, cap=cap)
        if kind in ("scale", "fixed") and arg:
            value = _number(arg)
            if value is not None and value >= 0:
                return cls(kind, value, cap=cap)
        if kind == "dist":
            family, _, rest = arg.partition(":")
            median, _, sigma = rest.partition(":")
            m, s = _number(median), _number(sigma)
            if family == "lognormal" and m is not None and s is not None and m > 0 and s >= 0:
                return cls("dist", m, s, cap)
        raise ValueError(f"tool time policy {spec!r}: expected {KINDS} (X, S, MEDIAN > 0, SIGMA >= 0)")

    def pause(self, recorded_s: float, rng: random.Random | None = None) -> float:
        """The pause after a call whose recorded tool time was ``recorded_s`` (a draw from ``rng`` for ``dist``)."""
        if self.kind == "recorded":
            s = recorded_s
        elif self.kind == "scale":
            s = recorded_s * self.value
        elif self.kind == "fixed":
            s = self.value
        elif self.kind == "dist":
            s = (rng or random).lognormvariate(math.log(self.value), self.sigma)
        else:
            s = 0.0
        return s if self.cap is None else min(s, self.cap)

    def expected(self, recorded_s: float) -> float:
        """The mean pause, for estimates (time left): no draw, so the seeded sequence of pauses is untouched."""
        if self.kind != "dist":
            return self.pause(recorded_s)
        mean = self.value * math.exp(self.sigma**2 / 2)
        return mean if self.cap is None else min(mean, self.cap)

    def __str__(self) -> str:
        if self.kind in ("recorded", "none"):
            text = self.kind
        elif self.kind == "dist":
            text = f"dist:lognormal:{self.value:g}:{self.sigma:g}"
        else:
            text = f"{self.kind}:{self.value:g}"
        return text if self.cap is None else f"{text},idle-cap:{self.cap:g}"


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
