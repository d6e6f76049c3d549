"""The fallback route: a seeded share of requests is served by a second engine with its own profile.

``--fallback SHARE:PROFILE`` (e.g. ``0.3:overloaded``). Each valid request draws one number from its own
seeded generator, in arrival order; below ``share`` it goes to the fallback engine (its own batch, KV cache
and prefix cache: another deployment) and is labelled ``fallback:PROFILE``, else ``primary``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from replay.sim.core.profiles import get_profile
from replay.sim.server.exchange import PRIMARY


@dataclass(frozen=True, slots=True)
class FallbackSpec:
    """A share of the requests and the profile that serves them."""

    share: float
    profile: str

    @property
    def route(self) -> str:
        return f"fallback:{self.profile}"

    @classmethod
    def parse(cls, text: str | None) -> FallbackSpec | None:
        """``0.3:overloaded``; None for none; ValueError with the reason otherwise."""
        if not text:
            return None
        share_s, sep, profile = text.partition(":")
        try:
            share = float(share_s)
        except ValueError:
            share = -1.0
        if not sep or not 0.0 <= share <= 1.0:
            raise ValueError(f"fallback {text!r}: expected SHARE:PROFILE with SHARE within [0, 1], e.g. 0.3:overloaded")
        get_profile(profile)  # ValueError naming the known profiles
        return cls(share, profile)


class RoutePlan:
    """Draws each request's route in arrival order."""

    def __init__(self, spec: FallbackSpec | None, seed: int = 0) -> None:
        self.spec = spec
        self._rng = random.Random(f"route:{seed}")
        self.counts: dict[str, int] = {PRIMARY: 0} | ({spec.route: 0} if spec else {})

    @property
    def routes(self) -> tuple[str, ...]:
        return tuple(self.counts)

    def draw(self) -> str:
        route = PRIMARY
        if self.spec is not None and self._rng.random() < self.spec.share:
            route = self.spec.route
        self.counts[route] += 1
        return route
