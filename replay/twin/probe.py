"""``replay probe``: measure a host for a few minutes and fit the simulated host's profile to it (its twin).

Three phases share the time budget (``--duration``, 180 s by default), each stopped when its share is
spent, what one phase leaves going to the next:

1. **prefill** (35 %), concurrency 1: a cold prompt at each of the workload's prompt-length quantiles
   (p5 ... p95), each followed by two continuations adding the workload's small and large new input over it.
   TTFT against new and cached tokens gives the prefill cost; each answer's token times give a lone
   stream's decode step against its context. A prompt the host refuses as too long caps the later phases.
2. **cache** (20 %, or all that the ladder's estimated time leaves, if more), concurrency 1: how many tokens
   the host keeps cached. A sentinel prompt, then 1, 2, 4 ... other prompts of the workload's p25 length,
   then the sentinel again; when it is no longer cached, the newest of the last round's prompts are asked
   again one by one until one is gone. Out of time first: the figure is a lower bound. ``--kv-tokens``
   skips the phase.
3. **ladder** (45 %, and whatever is left), concurrency 1, 2, 4 ... ``--max-concurrency``: that many calls
   at once over a shared, cached prefix of the workload's median prompt (shrunk to fit half the KV cache),
   each with the median new input and a long enough answer (``replay.twin.ladder``).
   The stretch in which all of them decode gives the decode step against the batch; fewer streams decoding
   at once than were sent (confirmed with answers twice as long) is the host's running cap, where queueing
   starts. It stops at the cap, when the aggregate decode rate gained less than 10 % from doubling twice in
   a row, or when the next level would not fit its budget.

The fit (``replay.twin.fit``) turns the points into the roofline coefficients of a profile; the KV
budget, running cap and context limit come from phases 2, 3 and 1.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replay.errors import ReplayError
from replay.twin.fit import DEFAULT_CHUNK, DecodePoint, Fit, PrefillPoint, fit, profile_fields
from replay.twin.host_facts import HostFacts
from replay.twin.ladder import ladder_cost, run_ladder
from replay.twin.plan import (
    CACHE_OUTPUT,
    MIN_PROMPT,
    PREFILL_OUTPUT,
    Corpus,
    Passes,
    Shape,
    cache_recheck,
    cache_round,
    prefill_pass,
)
from replay.twin.points import host_ratio, ok, prefill_point, prompt, single_decode_point, still_cached
from replay.twin.runners import Runner
from replay.twin.state import Measured, Phase, PhaseLog
from replay.workload.trajectory import Workload

PHASES = (("prefill", 0.35), ("cache", 0.20), ("ladder", 0.45))
DEFAULT_DURATION_S = 180.0
MIN_DURATION_S = 10.0
DEFAULT_MAX_NUM_SEQS = 256  # vLLM's default running cap: the twin's when the ladder never reached a cap
DEFAULT_MAX_MODEL_LEN = 131_072
DEFAULT_BLOCK = 16  # the twin's cache block (client tokens) when the host states none


class ProbeError(ReplayError):
    """A probe that cannot go on; ``exit_code`` 1 for bad input, 3 when the host could not be measured."""

    def __init__(self, message: str, exit_code: int = 3) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(slots=True)
class ProbeConfig:
    duration_s: float = DEFAULT_DURATION_S
    max_concurrency: int = 64
    max_context: int | None = None  # client tokens a call (prompt + answer) may hold
    kv_tokens: int | None = None  # host tokens the cache holds, when known (the cache phase is then skipped)
    nonce: str | None = None  # seeds every prompt's text (default: random, so no earlier probe is cached)
    log: Callable[[str], None] = field(default=lambda _: None)


@dataclass(slots=True)
class ProbeResult:
    """What the probe measured and fitted; ``twin_fields`` is the profile of the twin (client tokens)."""

    shape: Shape
    ratio: float  # host tokens per client token
    fit: Fit
    prefill: list[PrefillPoint]
    decode: list[DecodePoint]
    kv_tokens: int  # host tokens the cache holds
    # measured | host (the host states it) | given (--kv-tokens) | at least (the cache phase ran out of time: a bound,
    # never written as a twin's KV size: replay probe refuses to write that twin)
    kv_source: str
    max_num_seqs: int
    max_num_seqs_found: bool  # stated by the host or found by the ladder (not a default)
    context_accepted: int | None  # longest call (client tokens, prompt + answer) the host served
    context_refused: int | None  # shortest it refused as too long
    levels: list[dict[str, Any]]
    phases: list[PhaseLog]
    elapsed_s: float
    facts: HostFacts = field(default_factory=HostFacts)  # what the host states about itself (replay.twin.host_facts)

    @property
    def max_num_seqs_source(self) -> str:
        """host (it states its slots: llama-server's /props), measured (the ladder found the knee), or assumed."""
        if self.facts.slots:
            return "host"
        return "measured" if self.max_num_seqs_found else "assumed (the ladder found no limit)"

    def twin_fields(self) -> dict[str, Any]:
        """SimProfile fields of the twin, in the client's tokens (what the simulated host counts)."""
        r = self.ratio
        max_len = DEFAULT_MAX_MODEL_LEN
        if self.context_refused:
            max_len = ((self.context_accepted or self.context_refused) + self.context_refused) // 2
        elif self.facts.max_model_len:  # the served context, as the host states it
            max_len = int(self.facts.max_model_len / r)
        block = max(round(self.facts.block_size / r), 1) if self.facts.block_size else DEFAULT_BLOCK
        return profile_fields(self.fit.coefficients.scaled(r)) | {
            "kv_budget_override": max(int(self.kv_tokens / r) // block * block, block),
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": DEFAULT_CHUNK,
            "max_model_len": max_len,
            "block_size": block,
            "enable_prefix_caching": True,
            "reasoning_fraction": 0.0,
            "natural_output_tokens": 0,
            "tokens_per_write": 0,
            "decode_speedup": 1.0,
            "max_waiting": 0,
        }

    def public(self) -> dict[str, Any]:
        pre = self.fit.coefficients
        return {
            "elapsed_s": round(self.elapsed_s, 2),
            "host_tokens_per_client_token": round(self.ratio, 4),
            "workload_shape": self.shape.public(),
            "fit": self.fit.public() | {"chunk_tokens": round(DEFAULT_CHUNK * self.ratio)},
            "kv_tokens_host": self.kv_tokens, "kv_source": self.kv_source,
            "block_size_host": self.facts.block_size,
            "block_size_source": "host" if self.facts.block_size else f"assumed ({DEFAULT_BLOCK}: the host says none)",
            "max_model_len_host": self.facts.max_model_len,
            "max_num_seqs": self.max_num_seqs, "max_num_seqs_found": self.max_num_seqs_found,
            "max_num_seqs_source": self.max_num_seqs_source,
            "context_accepted_tokens": self.context_accepted, "context_refused_tokens": self.context_refused,
            "phases": [p.public() for p in self.phases],
            "levels": self.levels,
            "prefill_points": {"new": [p.new for p in self.prefill], "cached": [p.cached for p in self.prefill],
                               "ttft_s": [p.ttft_s for p in self.prefill],
                               "fit_error": [pre.ttft_s(p.new, p.cached, round(DEFAULT_CHUNK * self.ratio))
                                             / p.ttft_s - 1 if p.ttft_s > 0 else None
                                             for p in self.prefill]},
            "decode_points": {"batch": [d.batch for d in self.decode], "kv": [d.kv for d in self.decode],
                              "step_s": [d.step_s for d in self.decode],
                              "fit_error": [pre.decode_s(d.batch, d.kv) / d.step_s - 1 if d.step_s > 0 else None
                                            for d in self.decode]},
        }  # fmt: skip


class _Budget:
    """Each phase's share of what is left of the total."""

    def __init__(self, runner: Runner, total_s: float) -> None:
        self.runner, self.total_s, self.t0 = runner, total_s, runner.elapsed

    def used(self) -> float:
        return self.runner.elapsed - self.t0

    def phase(self, index: int) -> PhaseLog:
        shares = [s for _, s in PHASES[index:]]
        return PhaseLog(PHASES[index][0], max(self.total_s - self.used(), 0.0) * shares[0] / sum(shares))


def probe(runner: Runner, workload: Workload, directory: Path, config: ProbeConfig | None = None) -> ProbeResult:
    """Probe the host behind ``runner`` with ``workload``'s shape; pass files are written to ``directory``."""
    cfg = config or ProbeConfig()
    if cfg.duration_s < MIN_DURATION_S:
        raise ProbeError(f"--duration: at least {MIN_DURATION_S:.0f} s; got {cfg.duration_s:g}", 1)
    try:
        shape = Shape.of(workload)
    except ValueError as exc:
        raise ProbeError(f"workload: {exc}", 1) from None
    m = Measured(shape, Passes(directory, cfg.nonce or uuid.uuid4().hex[:12], Corpus.of(workload)))
    budget = _Budget(runner, cfg.duration_s)
    phases = [budget.phase(0)]
    cfg.log(f"probe: phase 1/3 prefill, concurrency 1 (up to {phases[0].budget_s:.0f} s)")
    _prefill_phase(Phase(runner, phases[0]), m, cfg)

    phases.append(budget.phase(1))
    facts = runner.host_facts()
    if cfg.kv_tokens:  # given: the cache phase's time goes to the ladder
        phases[1].budget_s, phases[1].stopped, kv, kv_source = 0.0, "given", cfg.kv_tokens, "given"
    elif facts.kv_tokens:  # the host states it (vLLM's cache_config_info): nothing to measure
        phases[1].budget_s, phases[1].stopped, kv, kv_source = 0.0, "host", facts.kv_tokens, "host"
        cfg.log(f"probe: the host states its KV cache: {kv:,} tokens (the cache phase's time goes to the ladder)")
    else:
        reserve = 1.5 * ladder_cost(m, m.coefficients(), cfg.max_concurrency)
        phases[1].budget_s = max(phases[1].budget_s, cfg.duration_s - budget.used() - reserve)
        cfg.log(f"probe: phase 2/3 cache capacity, concurrency 1 (up to {phases[1].budget_s:.0f} s)")
        kv, measured = _cache_phase(Phase(runner, phases[1]), m)
        kv_source = "measured" if measured else "at least"

    phases.append(budget.phase(2))
    cfg.log(f"probe: phase 3/3 concurrency ladder (up to {phases[2].budget_s:.0f} s)")
    ladder = run_ladder(Phase(runner, phases[2]), m, kv, cfg.max_concurrency, cfg.log)
    return ProbeResult(
        shape=shape, ratio=m.ratio, fit=fit(m.prefill, m.decode, m.chunk), prefill=m.prefill, decode=m.decode,
        kv_tokens=int(kv), kv_source=kv_source,
        max_num_seqs=facts.slots or ladder.cap or max(DEFAULT_MAX_NUM_SEQS, ladder.peak),
        max_num_seqs_found=bool(facts.slots) or ladder.cap is not None,
        context_accepted=m.accepted, context_refused=m.refused,
        levels=ladder.levels, phases=phases, elapsed_s=budget.used(), facts=facts,
    )  # fmt: skip


def _prefill_phase(phase: Phase, m: Measured, cfg: ProbeConfig) -> None:
    """TTFT against prompt length and cached share, and a lone stream's decode step, at concurrency 1."""
    cap = cfg.max_context - PREFILL_OUTPUT if cfg.max_context else None
    records = phase.run(prefill_pass(m.passes, m.shape, cap), 1)
    good = ok(records)
    if not good:
        first = next((r for r in records if r.error), None)
        why = f"{first.error}: {first.error_detail or ''}".strip(": ") if first else "no call was made"
        raise ProbeError(f"phase prefill: no call succeeded ({why})")
    m.ratio = host_ratio(good)
    measured = [r for r in good if r.turn > 0]  # the first call warms the host up
    m.prefill = [prefill_point(r, m.ratio) for r in measured]
    m.decode = [d for r in measured if (d := single_decode_point(r, m.ratio)) is not None]
    refused = [r.prompt_tokens_est + r.max_tokens for r in records if r.error == "context_overflow"]
    m.accepted = max((r.prompt_tokens_est + r.max_tokens for r in good), default=None)
    m.refused = min(refused) if refused else None
    m.limit = m.accepted if refused else cfg.max_context
    if len(m.prefill) < 3 or not m.decode:
        hint = "the host refuses the workload's prompts as too long" if refused else "give a longer --duration"
        raise ProbeError(f"phase prefill: only {len(m.prefill)} calls measured in {phase.log.used_s:.0f} s ({hint})")


def _cache_phase(phase: Phase, m: Measured) -> tuple[int, bool]:
    """Host tokens the cache holds, and whether that was measured (else it is a lower bound).

    Rounds of a sentinel, 1, 2, 4 ... fills and the sentinel again, until it is gone; then the newest fills of
    that round asked again one at a time, newest first (a hit refreshes only itself), until one is gone. The
    cache held the sentinel, the fills found, and what is left of the first one gone (LRU drops a prompt's
    tail first, so its cached tokens say how much of it was left)."""
    size = max(min(m.shape.prompts[1], (m.limit or 1 << 30) - CACHE_OUTPUT), MIN_PROMPT)
    cold = m.coefficients().ttft_s(round(size * m.ratio), 0)
    fills, lower, round_no, last = 1, round(size * m.ratio), 0, 0
    while True:
        if 1.5 * (fills + 2) * cold > phase.left():  # the last round: as many fills as there is time for
            fills = int(phase.left() / (1.5 * cold)) - 2
            if fills <= last:
                phase.log.stopped = "budget"
                return lower, False
        records = phase.run(cache_round(m.passes, f"kv{round_no}", size, fills), 1)
        if len(records) < fills + 2 or (hit := still_cached(records[-1], records[0], m.ratio)) is None:
            phase.log.stopped = "budget" if len(records) < fills + 2 else "errors"
            return lower, False
        held = prompt(records[0], m.ratio)
        if hit:
            lower, last, fills, round_no = (fills + 1) * held, fills, fills * 2, round_no + 1
            continue
        kept, partial = last, held / 2  # the last round's bound: that many of the newest are still held
        for i in range(fills - kept - 1, -1, -1):
            again = phase.run(cache_recheck(m.passes, f"kv{round_no}", size, [i]), 1)
            if not again or not still_cached(again[0], records[1 + i], m.ratio):
                if again and again[0].ok and again[0].cached_tokens is not None:
                    partial = again[0].cached_tokens
                break
            kept += 1
        return max(round((kept + 1) * held + partial), lower), True
