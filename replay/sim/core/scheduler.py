"""The simulated host's scheduler: continuous batching over a block KV cache, without a clock.

``EngineCore`` is the engine without a clock, modelled on vLLM V1's scheduler:

- Every step serves the running sequences first, in admission order, each with the tokens it still has
  to compute (1 when decoding; a chunk of its prompt while prefilling), within a per-step token budget
  (``max_num_batched_tokens``), then admits waiting sequences first come first served while the running
  cap (``max_num_seqs``), the budget and free KV blocks allow. A sequence's cache hit is looked up when it
  is admitted, and only then; its prefill may be split over several steps (chunked prefill), sharing
  them with decodes.
- A sequence needs KV blocks for every token it computes. When a running sequence needs a block and none
  is free, the most recently admitted running sequence is preempted (recompute, vLLM V1's only mode):
  its blocks are released (named ones stay cached, evictable), it goes back to the head of the queue, and
  when admitted again it recomputes prompt and answer so far, minus what the cache still holds. No
  admission happens in a step that preempted.
- A step admits only requests queued before it starts (in the real-time loop, one may arrive between a
  step's scheduled start and the moment the loop gets to run it; it waits for the next step).
- A step's duration comes from the profile (``SimProfile.step_seconds``) over the step's shape: the
  tokens it computes, the KV they read, which of them are decodes and which prefill chunks, and the
  engine's uptime (counted from the first request it was given, for profiles that speed up): a step
  table's figures if the profile has one, else the roofline of its physical inputs. At its end each
  sequence whose tokens are all computed samples one token; a sequence that has its answer is
  finished and lets go of its blocks.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from replay.sim.core.prefix_cache import KVBlockPool
from replay.sim.core.profiles import SimProfile, check_profile
from replay.sim.core.step_table import StepShape

WAITING, RUNNING, FINISHED, ABORTED = "waiting", "running", "finished", "aborted"


class Seq:
    """One request inside the engine."""

    __slots__ = (
        "_waiter",
        "blocks",
        "cached_tokens",
        "finish_reason",
        "hashes",
        "num_computed",
        "num_output",
        "preempted_at",
        "prompt_len",
        "reasoning",
        "recomputed_tokens",
        "rid",
        "spec",
        "spec_phase",
        "state",
        "t_first_token",
        "t_last_token",
        "t_queued",
        "t_scheduled",
        "target",
    )

    def __init__(self, rid: str, prompt_len: int, hashes: list[int], target: int, reasoning: int) -> None:
        self.rid = rid
        self.prompt_len = prompt_len
        self.hashes = hashes  # chained hashes of the prompt's full blocks
        self.target = target  # output tokens this answer has
        self.reasoning = reasoning  # of which the first ones are reasoning
        self.finish_reason = "length"
        self.num_computed = 0  # tokens whose KV is computed
        self.num_output = 0  # tokens sampled so far
        self.blocks: list[int | None] = []  # blocks held, in token order: hash if named, None if anonymous
        self.cached_tokens: int | None = None  # cache hit at first admission, as reported
        self.state = WAITING
        self.t_queued = 0.0
        self.t_scheduled: float | None = None  # start of the step that first admitted it
        self.t_first_token: float | None = None  # end of the step that sampled the first token
        self.t_last_token: float | None = None
        self.preempted_at: list[float] = []
        self.recomputed_tokens = 0  # tokens computed again after preemptions
        self.spec = [0, 0, 0]  # speculative decoding: accepted tokens, drafted tokens, drafts (verify steps)
        self.spec_phase = 1.0  # the share of a verify step its decode tokens have added up to (see EngineCore)
        self._waiter: asyncio.Future[None] | None = None

    @property
    def total_len(self) -> int:
        return self.prompt_len + self.num_output

    def _wake(self) -> None:
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)


@dataclass(slots=True)
class Step:
    """One engine step: who computes how many tokens, and how long it takes."""

    items: list[tuple[Seq, int]]
    tokens: int
    duration: float
    t_start: float = 0.0
    preempted: list[Seq] = field(default_factory=list)


def step_shape(items: list[tuple[Seq, int]]) -> StepShape:
    """The shape of a step over ``items`` (sequence, tokens it computes): a sequence that has all its
    tokens but the last sampled one computed, and computes that one, is decoding; anything else is a
    prefill chunk (a prompt's, or a preempted sequence's recompute)."""
    tokens = decodes = prefill_tokens = 0
    kv_read = pairs = decode_ctx = prefill_ctx = 0.0
    for seq, n in items:
        done = seq.num_computed
        tokens += n
        kv_read += done + n
        pairs += n * (done + (n + 1) / 2)
        if n == 1 and seq.num_output > 0 and done + 1 == seq.total_len:
            decodes += 1
            decode_ctx += done + 1
        else:
            prefill_tokens += n
            prefill_ctx += n * done
    return StepShape(tokens, kv_read, pairs, decodes, decode_ctx, prefill_tokens, prefill_ctx)


class EngineCore:
    """Scheduler, KV blocks and step timing, with no clock of its own: ``schedule(t)``, then ``complete``."""

    def __init__(self, profile: SimProfile, seed: int = 0) -> None:
        check_profile(profile)
        self.profile = profile
        self.block_size = profile.block_size
        self.pool = KVBlockPool(profile.kv_budget_tokens, profile.block_size, profile.enable_prefix_caching)
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.rng = random.Random(seed)
        self.t_first_request: float | None = None  # the engine's uptime counts from here
        # counters, as vLLM exports them
        self.steps = 0
        self.busy_s = 0.0
        self.preemptions = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.spec_totals = [0, 0, 0]  # accepted tokens, drafted tokens, drafts: vLLM's spec_decode counters
        self.finished: dict[str, int] = {}
        self.aborted = 0

    # --- requests ----------------------------------------------------------------------------------------
    def plan_output(self, max_tokens: int, ignore_eos: bool = False, min_tokens: int = 0) -> tuple[int, str]:
        """How many tokens the answer has, and why it ends (``length`` or ``stop``)."""
        p = self.profile
        n = min(max_tokens, p.max_output_tokens)
        if p.natural_output_tokens > 0 and not ignore_eos:
            natural = max(1, round(self.rng.expovariate(1.0 / p.natural_output_tokens)))
            natural = max(natural, min(min_tokens, n))
            if natural < n:
                return natural, "stop"
        return n, "length"

    def new_seq(self, rid: str, prompt_ids: np.ndarray, target: int, finish_reason: str = "length") -> Seq:
        seq = Seq(rid, len(prompt_ids), self.pool.block_hashes(prompt_ids), target,
                  round(self.profile.reasoning_fraction * target))  # fmt: skip
        seq.finish_reason = finish_reason
        return seq

    def add(self, seq: Seq, t: float) -> None:
        if self.t_first_request is None:
            self.t_first_request = t
        seq.t_queued = t
        seq.state = WAITING
        self.waiting.append(seq)

    def abort(self, seq: Seq) -> None:
        """Drop a sequence wherever it is (the client left); its blocks go back."""
        if seq.state == RUNNING:
            self.running.remove(seq)
            self.pool.release(seq.blocks)
        elif seq.state == WAITING:
            self.waiting.remove(seq)
        else:
            return
        seq.blocks = []
        seq.state = ABORTED
        self.aborted += 1
        seq._wake()

    # --- scheduling ---------------------------------------------------------------------------------------
    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def _preempt(self, seq: Seq, t: float) -> None:
        self.pool.release(seq.blocks)
        seq.blocks = []
        seq.recomputed_tokens += seq.num_computed
        seq.num_computed = 0
        seq.state = WAITING
        seq.preempted_at.append(t)
        self.preemptions += 1
        self.waiting.appendleft(seq)

    def schedule(self, t: float) -> Step | None:
        """The next step at time ``t``, or None when nothing can run."""
        p = self.profile
        pool = self.pool
        budget = p.max_num_batched_tokens
        items: list[tuple[Seq, int]] = []
        preempted: list[Seq] = []
        running = self.running
        i = 0
        while i < len(running) and budget > 0:
            seq = running[i]
            n = min(seq.total_len - seq.num_computed, budget)
            need = self._blocks_for(seq.num_computed + n) - len(seq.blocks)
            while need > 0 and not pool.take(need):
                victim = running.pop()  # the most recently admitted
                self._preempt(victim, t)
                preempted.append(victim)
                if victim is seq:
                    break
            if seq.state != RUNNING:
                break
            if need > 0:
                seq.blocks += [None] * need
            items.append((seq, n))
            budget -= n
            i += 1
        if not preempted:
            waiting = self.waiting
            while waiting and budget > 0 and len(running) < p.max_num_seqs:
                seq = waiting[0]
                if seq.t_queued > t:
                    break  # arrived after this step started (the real-time loop woke late): next step
                total = seq.total_len
                hits = pool.match(seq.hashes, total)
                hit_hashes = seq.hashes[:hits]
                computed = hits * self.block_size
                n = min(total - computed, budget)
                new = self._blocks_for(computed + n) - hits
                if not pool.can_take(new, hit_hashes):
                    break
                pool.hold(hit_hashes)
                pool.take(new)
                waiting.popleft()
                cached = pool.count_query(seq.prompt_len, min(hits, seq.prompt_len // self.block_size))
                if seq.cached_tokens is None:
                    seq.cached_tokens = cached
                    seq.t_scheduled = t
                    self.prompt_tokens_total += seq.prompt_len
                seq.blocks = [*hit_hashes, *([None] * new)]
                seq.num_computed = computed
                seq.state = RUNNING
                running.append(seq)
                items.append((seq, n))
                budget -= n
        if not items:
            return None
        shape = step_shape(items)
        uptime = t - (self.t_first_request if self.t_first_request is not None else t)
        return Step(items, shape.tokens, p.step_seconds(shape, uptime, self.generation_tokens_total), t, preempted)

    def complete(self, step: Step, t_end: float) -> None:
        """Apply a step that ended at ``t_end``: computed tokens, named blocks, sampled tokens, finishes."""
        bs = self.block_size
        pool = self.pool
        self.steps += 1
        self.busy_s += step.duration
        for seq, n in step.items:
            if seq.state != RUNNING:  # aborted while the step ran
                continue
            start = seq.num_computed
            seq.num_computed = done = start + n
            if start < seq.prompt_len and len(seq.hashes) > start // bs:
                blocks, hashes = seq.blocks, seq.hashes
                for b in range(start // bs, min(done, seq.prompt_len) // bs):
                    if blocks[b] is None and pool.name(hashes[b]):
                        blocks[b] = hashes[b]
            if done < seq.total_len:
                continue  # more prefill chunks to go
            seq.num_output += 1
            if self.profile.spec_draft_tokens and seq.num_output > 1:
                self._speculated(seq)
            self.generation_tokens_total += 1
            if seq.t_first_token is None:
                seq.t_first_token = t_end
            seq.t_last_token = t_end
            if seq.num_output >= seq.target:
                self.running.remove(seq)
                pool.release(seq.blocks)
                seq.blocks = []
                seq.state = FINISHED
                self.finished[seq.finish_reason] = self.finished.get(seq.finish_reason, 0) + 1
            seq._wake()

    def _speculated(self, seq: Seq) -> None:
        """Count one decode token of ``seq`` as a speculator yields it. At mean acceptance length L a verify step
        yields L tokens: the model's own (bonus) token and L - 1 accepted drafts, so 1 in L decode tokens ends a
        verify step (a draft of ``spec_draft_tokens`` tokens) and the rest are accepted drafts. Each sequence adds
        up 1/L per token and ends a verify step whenever the sum passes a whole one (its first decode token always
        does): whole numbers per request and per step, the engine's counters the sum of its requests'."""
        p = self.profile
        seq.spec_phase += 1.0 / p.acceptance_length(self.generation_tokens_total)
        if seq.spec_phase >= 1.0:
            seq.spec_phase -= 1.0
            drafted = (0, p.spec_draft_tokens, 1)
        else:
            drafted = (1, 0, 0)
        for i, n in enumerate(drafted):
            seq.spec[i] += n
            self.spec_totals[i] += n

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting
