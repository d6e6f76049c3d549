"""The twin's fit: a host's step times recovered from what a probe measured, in the simulated host's own terms.

The simulated host times a dense model's engine step by a roofline (``SimProfile.step_seconds``):

    step = overhead + max(weight_read + kv_read × KV tokens read, prefill_token × tokens + attn_pair × pairs)
           + seq × decoding sequences

so six coefficients, in seconds, describe it: ``overhead_s`` (scheduler, launches, collectives per step),
``weight_read_s`` (the memory time of a step apart from its KV), ``kv_read_s`` (per KV token a step reads),
``prefill_token_s`` (compute per new token), ``attn_pair_s`` (compute per new-token × context-token pair
attended) and ``seq_s`` (per decoding sequence, outside the roofline: the profile's ``seq_overhead_s``,
sampling and CPU-side work, large on a CPU host, small on a GPU one). Two more are what a request costs
outside the engine's steps (HTTP, templating, tokenising, hashing its blocks for the prefix cache):
``request_s`` per request and ``request_token_s`` per prompt token, cached ones included. They are in
every TTFT and in no step, and the simulated host has no field for them: they are fitted so that they do
not bend the step coefficients, and reported.

The probe gives two kinds of points: a TTFT at concurrency 1 (a prompt's new tokens over its cached ones,
prefilled in chunks, each chunk a step), and a decode step time (a batch of sequences decoding over a
total context). Both are piecewise linear in the coefficients: each step is in its memory or its compute
regime. ``fit`` alternates between assigning every step its regime and a non-negative least-squares
solve over relative errors, until the assignment holds, and keeps the best solution it met.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from replay.histogram import US, percentile
from replay.sim.core.profiles import SimProfile

RELATIVE = 1_000_000  # relative errors held to a millionth before the histogram's 3 significant digits

NAMES = (
    "overhead_s",
    "weight_read_s",
    "kv_read_s",
    "prefill_token_s",
    "attn_pair_s",
    "seq_s",
    "request_s",
    "request_token_s",
)
DEFAULT_CHUNK = 8192  # prefill tokens per step the twin runs (vLLM's max_num_batched_tokens default)
# The nominal device the twin's profile is written for: coefficients become bytes and FLOPs at these rates.
NOMINAL_BYTES_PER_S = 1e12
NOMINAL_FLOPS = 1e15


@dataclass(frozen=True, slots=True)
class Coefficients:
    """A dense roofline's step-time coefficients (seconds), as the simulated host uses them."""

    overhead_s: float
    weight_read_s: float
    kv_read_s: float
    prefill_token_s: float
    attn_pair_s: float
    seq_s: float = 0.0
    request_s: float = 0.0
    request_token_s: float = 0.0

    def vector(self) -> np.ndarray:
        return np.array([getattr(self, n) for n in NAMES])

    def step_s(self, tokens: float, kv_read: float, pairs: float) -> float:
        memory = self.weight_read_s + self.kv_read_s * kv_read
        compute = self.prefill_token_s * tokens + self.attn_pair_s * pairs
        return self.overhead_s + max(memory, compute)

    def decode_s(self, batch: float, kv: float) -> float:
        """One decode step of ``batch`` sequences reading ``kv`` KV tokens in all."""
        return self.step_s(batch, kv, kv) + self.seq_s * batch

    def ttft_s(self, new: int, cached: int, chunk: int = DEFAULT_CHUNK) -> float:
        """Time to first token of a lone prompt: ``new`` tokens over ``cached`` ones, in chunks."""
        steps = sum(self.step_s(n, c + n, pairs) - self.overhead_s for n, c, pairs in chunks(new, cached, chunk))
        return self.request_s + self.request_token_s * (new + cached) + self.overhead_s + steps

    def scaled(self, ratio: float) -> Coefficients:
        """The same host counted in other tokens: ``ratio`` host tokens per token of the new count."""
        return Coefficients(self.overhead_s, self.weight_read_s, self.kv_read_s * ratio,
                            self.prefill_token_s * ratio, self.attn_pair_s * ratio**2, self.seq_s,
                            self.request_s, self.request_token_s * ratio)  # fmt: skip

    def public(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}


@dataclass(frozen=True, slots=True)
class PrefillPoint:
    """A TTFT measured at concurrency 1 (host tokens)."""

    new: int
    cached: int
    ttft_s: float


@dataclass(frozen=True, slots=True)
class DecodePoint:
    """A decode step measured over a batch (host tokens: ``kv`` is the batch's total context)."""

    batch: float
    kv: float
    step_s: float


OUTLIER = 0.15  # a point off by more than this, and 4 times the median error, is left out of a second fit
KEEP = 0.7  # ... unless that would leave fewer than this share of the points
COALESCED = 0.1  # a decode step under this share of the median one is a burst of tokens read as a step
TRUSTED_RMS = 0.5  # a fit that misses its own points by more than this (relative rms) writes no twin


@dataclass(frozen=True, slots=True)
class Fit:
    coefficients: Coefficients
    prefill_rms: float  # relative root mean square error over the prefill points kept
    decode_rms: float
    worst: float  # the largest relative error of any point kept
    identified: tuple[str, ...]  # coefficients the points could tell apart from zero
    iterations: int
    left_out: tuple[int, int] = (0, 0)  # prefill and decode points the second fit left out as outliers

    def untrusted(self) -> str | None:
        """Why no twin should be written from this fit (it misses its own points by far), or None."""
        rms = max(self.prefill_rms, self.decode_rms)
        if rms <= TRUSTED_RMS:
            return None
        return (f"the fit misses its own points by {100 * self.prefill_rms:.0f} % (TTFT) and "
                f"{100 * self.decode_rms:.0f} % (decode step) rms, over the {100 * TRUSTED_RMS:.0f} % a twin is "
                "written with: the host's timings were too uneven to fit (a busy machine?)")  # fmt: skip

    def public(self) -> dict[str, object]:
        return {"coefficients": self.coefficients.public(), "prefill_rms": self.prefill_rms,
                "decode_rms": self.decode_rms, "worst": self.worst, "identified": list(self.identified),
                "iterations": self.iterations, "left_out": list(self.left_out)}  # fmt: skip


def chunks(new: int, cached: int, chunk: int) -> list[tuple[int, int, float]]:
    """(tokens, context before, pairs attended) of each prefill chunk of ``new`` tokens over ``cached``."""
    out: list[tuple[int, int, float]] = []
    done = 0
    while done < new or not out:
        n = max(min(chunk, new - done), 1)
        c = cached + done
        out.append((n, c, n * (c + (n + 1) / 2)))
        done += n
    return out


def _step_row(tokens: float, kv_read: float, pairs: float, memory: bool) -> np.ndarray:
    if memory:
        return np.array([1.0, 1.0, kv_read, 0.0, 0.0, 0.0, 0.0, 0.0])
    return np.array([1.0, 0.0, 0.0, tokens, pairs, 0.0, 0.0, 0.0])


def _is_memory(c: Coefficients, tokens: float, kv_read: float, pairs: float) -> bool:
    return c.weight_read_s + c.kv_read_s * kv_read >= c.prefill_token_s * tokens + c.attn_pair_s * pairs


def _rows(pre: Sequence[PrefillPoint], dec: Sequence[DecodePoint], c: Coefficients | None, chunk: int):
    """The linear rows of every point under the regimes ``c`` implies (None: a first guess)."""
    rows, regimes = [], []
    for p in pre:
        row = np.zeros(len(NAMES))
        row[0] = row[6] = 1.0
        row[7] = p.new + p.cached
        for n, ctx, pairs in chunks(p.new, p.cached, chunk):
            memory = n < 64 if c is None else _is_memory(c, n, ctx + n, pairs)
            row += _step_row(n, ctx + n, pairs, memory) - _step_row(0, 0, 0, False)  # the overhead once
            regimes.append(memory)
        rows.append(row)
    for d in dec:
        memory = True if c is None else _is_memory(c, d.batch, d.kv, d.kv)
        row = _step_row(d.batch, d.kv, d.kv, memory)
        row[5] = d.batch
        rows.append(row)
        regimes.append(memory)
    return np.array(rows), tuple(regimes)


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Non-negative least squares by trying every set of free coefficients (eight: 255 small solves)."""
    best, best_r = np.zeros(a.shape[1]), float(np.sum(b**2))
    cols = [j for j in range(a.shape[1]) if np.any(a[:, j])]
    for k in range(1, len(cols) + 1):
        for subset in itertools.combinations(cols, k):
            x, *_ = np.linalg.lstsq(a[:, subset], b, rcond=None)
            if np.all(x >= 0):
                r = float(np.sum((a[:, subset] @ x - b) ** 2))
                if r < best_r - 1e-18:
                    best, best_r = np.zeros(a.shape[1]), r
                    best[list(subset)] = x
    return best


def _errors(c: Coefficients, pre: Sequence[PrefillPoint], dec: Sequence[DecodePoint], chunk: int):
    e_pre = np.array([c.ttft_s(p.new, p.cached, chunk) / p.ttft_s - 1 for p in pre])
    e_dec = np.array([c.decode_s(d.batch, d.kv) / d.step_s - 1 for d in dec])
    return e_pre, e_dec


def _score(e_pre: np.ndarray, e_dec: np.ndarray) -> float:
    both = np.concatenate([e_pre, e_dec])
    return float(np.sqrt(np.mean(both**2))) if both.size else math.inf


def fit(prefill: Sequence[PrefillPoint], decode: Sequence[DecodePoint], chunk: int = DEFAULT_CHUNK) -> Fit:
    """The coefficients that best explain the points (relative errors), regimes included; then once more
    without the points the first fit missed by far (a shared machine's stalls), if few enough."""
    pre = [p for p in prefill if p.ttft_s > 0]
    dec = [d for d in decode if d.step_s > 0]
    floor = (percentile([d.step_s for d in dec], 50, US) or 0.0) * COALESCED
    dec = [d for d in dec if d.step_s >= floor]  # tokens that arrived together, not a step: they would pull every
    # coefficient to zero (the fit weighs relative errors, and a step read as a microsecond outweighs the rest)
    if not pre or not dec:
        raise ValueError("the fit needs at least one TTFT and one decode point")
    first = _fit(pre, dec, chunk)
    e_pre, e_dec = _errors(first.coefficients, pre, dec, chunk)
    bound = max(OUTLIER, 4 * (percentile(np.abs(np.concatenate([e_pre, e_dec])), 50, RELATIVE) or 0.0))
    keep_pre = [p for p, e in zip(pre, e_pre, strict=True) if abs(e) <= bound]
    keep_dec = [d for d, e in zip(dec, e_dec, strict=True) if abs(e) <= bound]
    kept = len(keep_pre) + len(keep_dec)
    if kept == len(pre) + len(dec) or kept < KEEP * (len(pre) + len(dec)) or not keep_pre or not keep_dec:
        return first
    second = _fit(keep_pre, keep_dec, chunk)
    return dataclasses.replace(second, left_out=(len(pre) - len(keep_pre), len(dec) - len(keep_dec)))


def _fit(pre: list[PrefillPoint], dec: list[DecodePoint], chunk: int, max_iter: int = 40) -> Fit:
    weights = 1.0 / np.array([p.ttft_s for p in pre] + [d.step_s for d in dec])
    c: Coefficients | None = None
    seen: set[tuple[bool, ...]] = set()
    best: tuple[float, Coefficients] | None = None
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 - the count is reported
        a, regimes = _rows(pre, dec, c, chunk)
        if regimes in seen:
            break
        seen.add(regimes)
        x = nnls(a * weights[:, None], np.ones(len(weights)))
        c = Coefficients(*(float(v) if v > 1e-15 else 0.0 for v in x))
        score = _score(*_errors(c, pre, dec, chunk))
        if best is None or score < best[0]:
            best = (score, c)
    assert best is not None
    c = best[1]
    e_pre, e_dec = _errors(c, pre, dec, chunk)
    rms = [float(np.sqrt(np.mean(e**2))) for e in (e_pre, e_dec)]
    worst = float(np.max(np.abs(np.concatenate([e_pre, e_dec]))))
    identified = tuple(n for n, v in zip(NAMES, c.vector(), strict=True) if v > 0)
    return Fit(c, rms[0], rms[1], worst, identified, iterations)


def true_coefficients(p: SimProfile) -> Coefficients:
    """What a dense roofline profile's step times are in these terms (the recovery test's truth)."""
    if p.experts or p.step_table is not None:
        raise ValueError(f"profile {p.name!r}: only a dense roofline profile has these coefficients")
    bw = p.hbm_bytes_per_s * p.gpus * p.mem_efficiency
    peak = p.flops * p.gpus
    return Coefficients(
        overhead_s=p.step_overhead_s,
        seq_s=p.seq_overhead_s,
        weight_read_s=p.dense_weight_bytes / bw,
        kv_read_s=p.kv_bytes_per_token / bw,
        prefill_token_s=2 * p.active_params / (peak * p.mfu),
        attn_pair_s=p.attn_flops_per_ctx_token / (peak * (p.attn_mfu or p.mfu)),
    )


def profile_fields(c: Coefficients) -> dict[str, float | int]:
    """SimProfile fields whose roofline has exactly these coefficients, on a nominal device (1 TB/s and
    1 PFLOP/s, one GPU, every efficiency 1): bytes and FLOPs then read as seconds at those rates."""
    return {
        "gpus": 1,
        "hbm_bytes_per_s": NOMINAL_BYTES_PER_S,
        "flops": NOMINAL_FLOPS,
        "mem_efficiency": 1.0,
        "mfu": 1.0,
        "attn_mfu": 1.0,
        "step_overhead_s": c.overhead_s,
        "weight_bytes": c.weight_read_s * NOMINAL_BYTES_PER_S,
        "dense_weight_bytes": c.weight_read_s * NOMINAL_BYTES_PER_S,
        "experts": 0,
        "experts_per_token": 0,
        "kv_bytes_per_token": max(c.kv_read_s * NOMINAL_BYTES_PER_S, 1e-6),
        "active_params": c.prefill_token_s * NOMINAL_FLOPS / 2,
        "attn_flops_per_ctx_token": c.attn_pair_s * NOMINAL_FLOPS,
        "seq_overhead_s": c.seq_s,
    }
