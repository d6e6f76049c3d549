"""Named timing profiles of the simulated host.

- ``default``: what ``replay run`` uses out of the box; roughly one mid-size model on one GPU: 150 tok/s
  decode for a lone stream, 6 % slower per extra concurrent stream, 20k tok/s uncached prefill, a 2M-token
  prefix cache, no reasoning.
- ``reasoning``: ``default`` with 30 % of every answer streamed as reasoning before the answer.
- ``fast``: for tests; 1000 tok/s decode, 1M tok/s prefill, 1 % slowdown per extra stream, so a test
  streams in milliseconds while the pacing code still runs.
- ``instant``: no pacing at all; tokens go out 256 per write as fast as the loop can write them. For
  throughput benchmarks of the client, where the sim must never be the bottleneck.

The timing model is deliberately simple (see ``engine``); the fields are the seam a fuller
continuous-batching model will grow from.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SimProfile:
    """Timing and capacity parameters of the simulated host."""

    name: str
    prefill_tps: float  # prompt tokens/s of uncached prefill; prefills run one at a time
    decode_tps: float  # decode tokens/s of a lone stream
    decode_slowdown: float  # fractional slowdown of each stream's token interval per extra decoding stream
    kv_budget_tokens: int  # prefix-cache capacity
    block_size: int = 16  # prefix-cache block size in tokens
    reasoning_fraction: float = 0.0  # share of output tokens streamed as reasoning first
    tokens_per_write: int = 0  # 0: real-time pacing; >0: no delays, this many tokens per write
    max_output_tokens: int = 32768  # cap on max_tokens

    def token_interval(self, active_streams: int) -> float:
        """Seconds between two tokens of one stream while ``active_streams`` streams decode."""
        return (1.0 + self.decode_slowdown * max(active_streams - 1, 0)) / self.decode_tps


_DEFAULT = SimProfile(
    name="default",
    prefill_tps=20_000.0,
    decode_tps=150.0,
    decode_slowdown=0.06,
    kv_budget_tokens=2_000_000,
)

PROFILES: dict[str, SimProfile] = {
    p.name: p
    for p in (
        _DEFAULT,
        dataclasses.replace(_DEFAULT, name="reasoning", reasoning_fraction=0.3),
        dataclasses.replace(_DEFAULT, name="fast", prefill_tps=1e6, decode_tps=1000.0, decode_slowdown=0.01),
        dataclasses.replace(
            _DEFAULT,
            name="instant",
            prefill_tps=math.inf,
            decode_tps=math.inf,
            decode_slowdown=0.0,
            tokens_per_write=256,
        ),
    )
}


def get_profile(name: str) -> SimProfile:
    """The profile called ``name``; a ValueError lists the known names."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown sim profile {name!r}; known: {', '.join(PROFILES)}") from None
