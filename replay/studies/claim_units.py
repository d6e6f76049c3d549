"""The units of published claims, and the one conversion from replay's figures into each of them.

A claim's unit is ``tokens/TIME[/PER]`` (TIME ``s``, ``min`` or ``h``; PER ``gpu``, ``user`` or ``request``;
nothing means the whole host), a latency in ``s`` or ``ms``, or ``share`` (a fraction, for what-if reductions).
Values may carry a scale or a percent sign: ``5.14M``, ``29,300``, ``1k``, ``45%``. replay's figures are tokens per
second and seconds (docs/metrics.md); ``from_base`` turns one of them into the claim's unit and nothing else does,
so every conversion is in this file and each has a unit test (tests/studies/test_claim_units.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from replay.errors import ReplayError

TIME = {"s": 1.0, "min": 60.0, "h": 3600.0}
LATENCY = {"s": 1.0, "ms": 1e-3}
PER = ("host", "gpu", "user", "request")
SCALE = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9, "%": 0.01}
_VALUE = re.compile(r"\s*([-+]?\d[\d,_]*(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*([kKMGB%]?)\s*")
_RATE = re.compile(r"\s*tok(?:en)?s?\s*/\s*(s|sec|second|min|minute|h|hour)\s*(?:/\s*(gpu|user|request))?\s*", re.I)
_TIME_NAMES = {"sec": "s", "second": "s", "minute": "min", "hour": "h"}


class UnitError(ReplayError, ValueError):
    """A unit or value a claim cannot be read in; the message names what was expected."""


@dataclass(frozen=True, slots=True)
class Unit:
    """A claim's unit. ``kind`` is 'rate' (tokens per time), 'latency' (a time) or 'share' (a fraction)."""

    text: str
    kind: str
    seconds: float = 1.0  # a rate's time unit, or a latency's unit, in seconds
    per: str = "host"  # a rate's denominator: host, gpu, user or request

    def __str__(self) -> str:
        return self.text


def parse_unit(text: str) -> Unit:
    """``tokens/min``, ``tokens/s/gpu``, ``tokens/s/user``, ``s``, ``ms``, ``share``; UnitError otherwise."""
    t = text.strip()
    if t in LATENCY:
        return Unit(t, "latency", LATENCY[t])
    if t in ("share", "ratio", "%"):
        return Unit(t, "share")
    m = _RATE.fullmatch(t)
    if not m:
        raise UnitError(
            f"unit {text!r}: expected tokens/s, tokens/min or tokens/h, optionally /gpu, /user or /request; or s, ms,"
            " share"
        )
    time = _TIME_NAMES.get(m.group(1).lower(), m.group(1).lower())
    return Unit(t, "rate", TIME[time], (m.group(2) or "host").lower())


def parse_value(value: object) -> float:
    """A claimed number: 5.14M → 5,140,000; 29,300 → 29300; 45% → 0.45; numbers as they are."""
    if isinstance(value, bool):
        raise UnitError(f"value {value!r}: expected a number")
    if isinstance(value, int | float):
        return float(value)
    m = _VALUE.fullmatch(str(value))
    if not m:
        raise UnitError(f"value {value!r}: expected a number with an optional k, M, G or %, e.g. 20.23M, 29,300, 45%")
    return float(m.group(1).replace(",", "").replace("_", "")) * SCALE[m.group(2)]


def from_base(base: float, unit: Unit, gpus: int | None = None) -> float:
    """replay's figure (tokens/s of the host or of one user; seconds; a share) in the claim's unit.

    A rate per GPU divides the host's rate by its GPU count; per user and per request are replay's per-call speeds
    as they are (one call in flight per agent in a closed loop): the caller passes the per-call figure.
    """
    if unit.kind == "latency":
        return base / unit.seconds
    if unit.kind == "share":
        return base
    rate = base * unit.seconds
    if unit.per == "gpu":
        if not gpus:
            raise UnitError(f"unit {unit.text}: the host's GPU count is unknown (--gpus)")
        return rate / gpus
    return rate


def project_wall(wall_s: float, model_s: float, speedup: float) -> float:
    """A task's (or turn's) time if its model part ran ``speedup`` times faster and the rest stayed: ``wall −
    model + model / k``, the formula of the summary's ``tasks.projected_wall_s`` (docs/metrics.md)."""
    return wall_s - model_s + model_s / speedup
