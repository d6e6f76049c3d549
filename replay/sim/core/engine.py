"""The simulated host's engine: the scheduler (``scheduler.EngineCore``: continuous batching over a block KV cache,
without a clock) stepped by one loop on a clock.

``SimEngine`` runs the core on its loop's clock (``perf_counter``, or the virtual clock's: ``replay.clock``):
it sleeps until each step's end, anchored to the previous step's end (never to when a sleep returned, so
there is no drift), then hands the tokens to the sequences' waiters. The ``instant`` profile skips the loop
entirely (see ``instant_batches``).

The scheduler's names (``EngineCore``, ``Seq``, ``Step``, ``step_shape``, the states) are imported from here too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from replay.sim.core.prefix_cache import KVBlockPool
from replay.sim.core.profiles import SimProfile
from replay.sim.core.scheduler import ABORTED, FINISHED, RUNNING, WAITING, EngineCore, Seq, Step, step_shape

__all__ = ["ABORTED", "FINISHED", "RUNNING", "WAITING", "EngineCore", "Seq", "SimEngine", "Step", "step_shape"]


class SimEngine:
    """The core on a clock (its loop's sleeps follow it): one asyncio task steps it while there is work. ``core``:
    one kept from an earlier run (its cache too); ``on_step(step, t_end)``: called after each step is applied."""

    def __init__(self, profile: SimProfile, seed: int = 0, clock: Callable[[], float] = time.perf_counter,
                 core: EngineCore | None = None, on_step: Callable[[Step, float], None] | None = None,
                 ) -> None:  # fmt: skip
        self.profile = profile
        self.core = core if core is not None else EngineCore(profile, seed)
        self.clock = clock
        self.on_step = on_step
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.lag_resets = 0  # times the loop fell lag_reset_s behind and re-anchored

    @property
    def prefix_cache(self) -> KVBlockPool:
        return self.core.pool

    @property
    def decoding(self) -> int:
        """Running sequences (prefilling or decoding)."""
        return len(self.core.running)

    def submit(self, seq: Seq) -> None:
        """Queue a sequence; the loop starts (or wakes) to serve it."""
        if self.profile.instant:
            seq.cached_tokens = self.core.pool.lookup_and_insert_hashes(seq.hashes, seq.prompt_len)
            seq.t_queued = seq.t_scheduled = self.clock()
            self.core.prompt_tokens_total += seq.prompt_len
            seq.state = RUNNING
            return
        self.core.add(seq, self.clock())
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        self._wake.set()

    def abort(self, seq: Seq) -> None:
        if self.profile.instant:
            seq.state = ABORTED if seq.state == RUNNING else seq.state
            return
        self.core.abort(seq)

    async def tokens(self, seq: Seq, sent: int) -> int:
        """Wait until ``seq`` has more than ``sent`` tokens; its count (``sent`` if it was dropped)."""
        while seq.num_output <= sent and seq.state in (WAITING, RUNNING):
            loop = asyncio.get_running_loop()
            seq._waiter = fut = loop.create_future()
            await fut
        return seq.num_output

    async def instant_batches(self, seq: Seq) -> AsyncIterator[int]:
        """Zero-delay mode: fixed-size batches, yielding the loop between them so streams interleave."""
        per_write = self.profile.tokens_per_write
        n = seq.target
        for sent in range(0, n, per_write):
            count = min(per_write, n - sent)
            seq.num_output += count
            self.core.generation_tokens_total += count
            yield count
            await asyncio.sleep(0)
        seq.state = FINISHED
        self.core.finished[seq.finish_reason] = self.core.finished.get(seq.finish_reason, 0) + 1

    async def _run(self) -> None:
        core = self.core
        lag_reset = self.profile.lag_reset_s
        anchor: float | None = None
        perf = self.clock
        while True:
            now = perf()
            if anchor is None or now - anchor > lag_reset:
                if anchor is not None:
                    self.lag_resets += 1
                anchor = now
            step = core.schedule(anchor)
            if step is None and core.waiting:  # all it has arrived after the anchor: start the step now
                anchor = perf()
                step = core.schedule(anchor)
            if step is None:
                anchor = None
                self._wake.clear()
                await self._wake.wait()
                continue
            t_end = anchor + step.duration
            while (delay := t_end - perf()) > 0:
                await asyncio.sleep(delay)
            core.complete(step, t_end)
            if self.on_step is not None:
                self.on_step(step, t_end)
            anchor = t_end

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
