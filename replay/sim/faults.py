"""Faults on demand: seeded, at configured rates, one draw per valid request.

Spec: comma-separated ``KIND:RATE[@PARAM]``, e.g. ``429:0.05@2,500:0.02,drop:0.01,stall:0.01@5``.

| kind | what the sim does | what a client sees |
|---|---|---|
| ``429`` | answers 429 at once, ``Retry-After: PARAM`` (default 1 s) | ``http_429`` |
| ``500``, ``503`` | answers that status at once (503 with ``Retry-After``) | ``http_5xx`` |
| ``drop`` | closes the connection after half the answer's tokens (n // 2) | ``disconnect`` |
| ``stall`` | writes nothing for PARAM s (default 5) after n // 2 tokens, then goes on | ``timeout`` if stalled longer |
| ``malformed`` | writes one cut-short JSON event after the first token, then goes on | ``stream_error`` |
| ``no_usage`` | leaves the usage out though the request asked for it | prompt/output tokens null |
| ``bad_usage`` | reports ``prompt_tokens`` and ``completion_tokens`` one too high | counts off the truth |

Each request draws one uniform number from ``random.Random(seed)`` in arrival order and the kinds split
[0, 1) in the order given, so kinds never combine and their rates must sum to at most 1. The truth log
names the fault each request got.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

KINDS = ("429", "500", "503", "drop", "stall", "malformed", "no_usage", "bad_usage")
HTTP_KINDS = ("429", "500", "503")
_DEFAULT_PARAM = {"429": 1.0, "503": 1.0, "stall": 5.0}


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """Parsed fault rates: ``rates`` in the order given, ``params`` (Retry-After or stall seconds)."""

    rates: tuple[tuple[str, float], ...] = ()
    params: dict[str, float] = field(default_factory=dict)
    seed: int = 0

    @classmethod
    def parse(cls, spec: str | None, seed: int = 0) -> FaultSpec:
        """``429:0.05,drop:0.01,stall:0.02@3``; ValueError with the reason on anything else."""
        rates: list[tuple[str, float]] = []
        params: dict[str, float] = {}
        for part in (spec or "").split(","):
            part = part.strip()
            if not part:
                continue
            kind, sep, rest = part.partition(":")
            rate_s, _, param_s = rest.partition("@")
            if kind not in KINDS or not sep:
                raise ValueError(f"fault {part!r}: expected KIND:RATE[@PARAM] with KIND one of {', '.join(KINDS)}")
            if any(k == kind for k, _ in rates):
                raise ValueError(f"fault {kind!r} given twice")
            try:
                rate = float(rate_s)
                param = float(param_s) if param_s else _DEFAULT_PARAM.get(kind, 0.0)
            except ValueError:
                raise ValueError(f"fault {part!r}: rate and parameter must be numbers") from None
            if not 0.0 <= rate <= 1.0 or param < 0:
                raise ValueError(f"fault {part!r}: rate must be within [0, 1] and the parameter >= 0")
            rates.append((kind, rate))
            params[kind] = param
        if sum(r for _, r in rates) > 1.0 + 1e-9:
            raise ValueError("fault rates sum to more than 1")
        return cls(tuple(rates), params, seed)

    def __bool__(self) -> bool:
        return any(r > 0 for _, r in self.rates)

    def __str__(self) -> str:
        return ",".join(f"{k}:{r:g}" + (f"@{self.params[k]:g}" if k in _DEFAULT_PARAM else "") for k, r in self.rates)


class FaultPlan:
    """Draws the fault (or None) of each request in arrival order."""

    def __init__(self, spec: FaultSpec) -> None:
        self.spec = spec
        self._rng = random.Random(spec.seed)
        self.counts: dict[str, int] = {k: 0 for k, _ in spec.rates}
        self.draws = 0

    def draw(self) -> str | None:
        if not self.spec:
            return None
        self.draws += 1
        u = self._rng.random()
        edge = 0.0
        for kind, rate in self.spec.rates:
            edge += rate
            if u < edge:
                self.counts[kind] += 1
                return kind
        return None

    def param(self, kind: str) -> float:
        return self.spec.params.get(kind, _DEFAULT_PARAM.get(kind, 0.0))
