"""Open-loop arrival models: when new sessions arrive, whatever the host is doing (``--arrivals``).

``poisson:RATE`` (exponential gaps, RATE sessions per second), ``gamma:RATE:CV`` (gamma gaps of the same mean and
coefficient of variation CV: burstier above 1, more regular below) and ``recorded[:SPEED]``: each trajectory
arrives at its recorded start (the first call's ``timestamp`` or ``arrival_s``, as the Mooncake and request-log
importers keep them), relative to the earliest, SPEED times faster.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from replay.workload.trajectory import Trajectory


@dataclass(frozen=True, slots=True)
class Arrivals:
    kind: str  # poisson | gamma | recorded
    rate: float = 1.0  # sessions per second (recorded: the speed-up)
    cv: float = 1.0

    @classmethod
    def parse(cls, spec: str) -> Arrivals:
        kind, _, rest = spec.strip().partition(":")
        parts = rest.split(":") if rest else []
        try:
            nums = [float(p) for p in parts]
        except ValueError:
            nums = [-1.0]
        if kind == "poisson" and len(nums) == 1 and nums[0] > 0:
            return cls("poisson", nums[0])
        if kind == "gamma" and len(nums) == 2 and nums[0] > 0 and nums[1] > 0:
            return cls("gamma", nums[0], nums[1])
        if kind == "recorded" and len(nums) <= 1 and (not nums or nums[0] > 0):
            return cls("recorded", nums[0] if nums else 1.0)
        raise ValueError(f"arrivals {spec!r}: expected poisson:RATE, gamma:RATE:CV or recorded[:SPEED] (all > 0)")

    def schedule(
        self, tasks: list[Trajectory], order: Iterator[Trajectory], seed: int
    ) -> Iterator[tuple[float, Trajectory]]:
        """(seconds after the start, trajectory) of each arrival, in order; recorded arrivals end with the workload."""
        if self.kind == "recorded":
            stamped = sorted(((recorded_start(t), t) for t in tasks), key=lambda p: p[0])
            t0 = stamped[0][0] if stamped else 0.0
            for t, traj in stamped:
                yield (t - t0) / self.rate, traj
            return
        rng = random.Random(seed)
        t = 0.0
        while True:
            yield t, next(order)
            if self.kind == "poisson":
                t += rng.expovariate(self.rate)
            else:
                shape = 1.0 / (self.cv**2)
                t += rng.gammavariate(shape, 1.0 / (self.rate * shape))

    def __str__(self) -> str:
        if self.kind == "poisson":
            return f"poisson:{self.rate:g}"
        if self.kind == "gamma":
            return f"gamma:{self.rate:g}:{self.cv:g}"
        return f"recorded:{self.rate:g}"


def recorded_start(traj: Trajectory) -> float:
    """A trajectory's recorded start (unix or trace seconds); 0 when it has none."""
    rec = traj.turns[0].recorded or {}
    for key in ("timestamp", "arrival_s"):
        if isinstance(rec.get(key), (int, float)):
            return float(rec[key])
    return 0.0
