"""The simulated host's timing model, apart from HTTP so a fuller batching model can replace it.

The model, honest but simple:
- Prefill runs on one compute unit, one request at a time, first come first served, at
  ``prefill_tps`` over the tokens the prefix cache does not hold; so time to first token grows with the
  queue. The queue is kept as a virtual clock (when the unit is next free), so sleep overshoot never
  accumulates along it. Because prefills are serialised, looking the prefix up at arrival finds exactly
  the blocks every earlier request will have computed by the time this one starts.
- The first token is due when prefill ends. Each later token is due one interval after the previous
  one, the interval set by how many streams are decoding at that moment (``SimProfile.token_interval``).
  Due times advance from that anchor, never from when a sleep returned, so a stream does not drift.
- Every request produces exactly ``min(max_tokens, max_output_tokens)`` tokens (no EOS, like
  ``ignore_eos``); the first ``round(reasoning_fraction * n)`` are reasoning tokens.
Not modelled yet: decode steps slowing prefill, KV-budget admission queues, a request that leaves while
queued giving its prefill slot back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np

from replay.sim.prefix_cache import PrefixCache
from replay.sim.profiles import SimProfile


@dataclass(slots=True)
class SimRequest:
    """One request's plan inside the engine: its sizes and its prefill schedule (perf_counter seconds)."""

    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int
    prefill_start: float
    prefill_end: float


class SimEngine:
    """Schedules prefills on one compute unit and paces each stream's decode."""

    def __init__(self, profile: SimProfile) -> None:
        self.profile = profile
        self.prefix_cache = PrefixCache(profile.kv_budget_tokens, profile.block_size)
        self._prefill_free_at = 0.0
        self.decoding = 0  # streams between prefill end and their last token

    def submit(self, prompt_ids: np.ndarray, max_tokens: int) -> SimRequest:
        """Admit a request now: consult the prefix cache and book its prefill on the compute unit."""
        p = self.profile
        n = min(max_tokens, p.max_output_tokens)
        cached = self.prefix_cache.lookup_and_insert(prompt_ids)
        start = max(time.perf_counter(), self._prefill_free_at)
        end = start + (len(prompt_ids) - cached) / p.prefill_tps
        self._prefill_free_at = end
        return SimRequest(len(prompt_ids), cached, n, round(p.reasoning_fraction * n), start, end)

    async def token_batches(self, req: SimRequest) -> AsyncIterator[int]:
        """Yield how many tokens to send, each time some fall due; all already-due tokens at once."""
        await _sleep_until(req.prefill_end)
        self.decoding += 1
        try:
            if self.profile.tokens_per_write:
                async for count in self._unpaced(req.output_tokens):
                    yield count
                return
            due, sent, n = req.prefill_end, 0, req.output_tokens
            while sent < n:
                now = time.perf_counter()
                if due > now:
                    await asyncio.sleep(due - now)
                    continue
                count = 0
                while sent + count < n and due <= now:
                    count += 1
                    due += self.profile.token_interval(self.decoding)
                sent += count
                yield count
        finally:
            self.decoding -= 1

    async def _unpaced(self, n: int) -> AsyncIterator[int]:
        """Zero-delay mode: fixed-size batches, yielding the loop between them so streams interleave."""
        per_write = self.profile.tokens_per_write
        for sent in range(0, n, per_write):
            yield min(per_write, n - sent)
            await asyncio.sleep(0)


async def _sleep_until(t: float) -> None:
    delay = t - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)
