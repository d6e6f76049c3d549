"""Named profiles of the simulated host, each derived from a few physical inputs.

A profile states the hardware (GPU count, HBM bandwidth and size, FLOP/s), the model (bytes of weights
read per step, active parameters, KV bytes per token, MoE routing) and the engine settings (running
sequence cap, chunked-prefill token budget, block size), and the engine's timing follows from them:

    t_step = max(compute, memory) + overhead (+ seq_overhead × decoding sequences, 0 in every shipped profile)
    memory  = (weight bytes read + KV tokens read × kv_bytes_per_token) / (bandwidth × gpus × mem_efficiency)
    compute = (2 × active_params × tokens + attn_flops_per_ctx_token × Σ context attended) / (flops × gpus × mfu)

For a mixture of experts the weight bytes read per step are the dense part plus the share of expert bytes
the step's tokens touch: ``1 - (1 - k/E)^tokens`` of them (each token routed to k of E experts), so a
lone stream reads about k/E of the experts and a batch of a few dozen reads nearly all. The KV budget is
what memory is left once the weights and a runtime reserve are placed:

    kv_budget_tokens = (gpus × gpu_memory_bytes × gpu_memory_utilization − weight_bytes − gpus × reserve)
                       / kv_bytes_per_token

where ``kv_bytes_per_token`` counts every copy of a token's KV in the node (a latent MLA cache under
tensor parallelism is held whole by every rank, so it counts once per GPU). Sources and arithmetic of
every shipped profile are in ``docs/simulated-host.md``; the docstring of each one names its model.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from replay.sim.core.step_table import StepShape, StepTable

GB = 1e9
GIB = 1024**3


@dataclass(frozen=True, slots=True)
class SimProfile:
    """Physical inputs and engine settings of one simulated host."""

    name: str
    description: str
    # hardware
    gpus: int
    hbm_bytes_per_s: float  # peak HBM bandwidth of one GPU
    flops: float  # peak dense FLOP/s of one GPU at the model's compute precision
    gpu_memory_bytes: float  # HBM of one GPU
    mem_efficiency: float = 0.8  # achieved share of peak bandwidth in decode kernels
    mfu: float = 0.4  # achieved share of peak FLOP/s in the weight GEMMs (prefill)
    attn_mfu: float = 0.0  # achieved share of peak FLOP/s in prefill attention (0: the same as mfu)
    step_overhead_s: float = 0.0  # per engine step: scheduler, kernel launches, collectives
    seq_overhead_s: float = 0.0  # per decoding sequence per step, outside the roofline (sampling, CPU-side work)
    # model
    weight_bytes: float = 0.0  # all weights held in memory (all GPUs together)
    dense_weight_bytes: float = 0.0  # weights every step reads whatever the routing (= weight_bytes if dense)
    experts: int = 0  # routed experts per MoE layer (0: dense model)
    experts_per_token: int = 0  # routed experts each token activates
    active_params: float = 0.0  # parameters multiplied per token (2 FLOPs each)
    attn_flops_per_ctx_token: float = 0.0  # attention FLOPs per new token per context token it attends
    kv_bytes_per_token: float = 0.0  # KV bytes one token occupies in the whole node (all copies)
    # memory plan
    gpu_memory_utilization: float = 0.9  # vLLM's --gpu-memory-utilization
    reserve_bytes_per_gpu: float = 4 * GB  # activations, CUDA graphs, NCCL buffers
    kv_budget_override: int | None = None  # KV budget in tokens, instead of the derived one
    # engine settings
    block_size: int = 16
    max_num_seqs: int = 256  # running-sequence cap (vLLM --max-num-seqs)
    max_num_batched_tokens: int = 8192  # tokens per step, decode and prefill chunks together
    max_model_len: int = 131_072  # prompt + max_tokens above this is rejected with 400
    max_waiting: int = 0  # waiting-queue cap; past it new requests get 503 (0: unbounded, as vLLM)
    accepts_images: bool = True  # False: a text-only model; a request with image parts gets 400 (images_refused)
    enable_prefix_caching: bool = True
    lag_reset_s: float = 0.25  # if the loop falls this far behind its schedule it re-anchors to now
    # answers
    reasoning_fraction: float = 0.0  # share of output tokens streamed as reasoning first
    natural_output_tokens: int = 0  # mean answer length at which the model emits EOS (0: never; runs to max_tokens)
    max_output_tokens: int = 32768  # cap on max_tokens
    tokens_per_write: int = 0  # 0: the engine paces tokens; >0: no delays, this many tokens per write
    # a host that gets faster as it runs (an adaptive speculator learning the traffic)
    decode_speedup: float = 1.0  # final factor on the speed of decode-only steps
    speedup_after_s: float = 0.0  # uptime (from the first request) before the speed-up starts
    speedup_ramp_s: float = 0.0  # seconds over which the factor rises linearly from 1 to decode_speedup
    # a speculator (MTP/EAGLE-style drafts verified by the model): its acceptance rises as it learns the traffic
    spec_draft_tokens: int = 0  # tokens drafted per verify step (0: no speculative decoding)
    spec_acceptance_start: float = 1.0  # mean acceptance length (tokens per verify step) at start
    spec_acceptance_end: float = 1.0  # ... once the engine has generated spec_learn_tokens tokens
    spec_learn_tokens: int = 0  # tokens generated over which the acceptance rises linearly from start to end
    # measured step times: when set, they time every step instead of the roofline (see step_table.py)
    step_table: StepTable | None = None

    # --- derived -------------------------------------------------------------------------------------------
    @property
    def instant(self) -> bool:
        """Zero-delay streaming: no scheduler loop, tokens as fast as the socket takes them."""
        return self.tokens_per_write > 0

    @property
    def kv_budget_tokens(self) -> int:
        """KV cache capacity in tokens (whole blocks)."""
        if self.kv_budget_override is not None:
            tokens = self.kv_budget_override
        else:
            free = self.gpus * (self.gpu_memory_bytes * self.gpu_memory_utilization - self.reserve_bytes_per_gpu)
            tokens = int(max(free - self.weight_bytes, 0.0) / self.kv_bytes_per_token)
        return tokens // self.block_size * self.block_size

    @property
    def model_len_limit(self) -> int:
        """Longest prompt + answer accepted: max_model_len, but never more than the KV cache holds."""
        return min(self.max_model_len, self.kv_budget_tokens)

    def weight_bytes_read(self, tokens: int) -> float:
        """Weight bytes one step reads when it processes ``tokens`` tokens."""
        if not self.experts or tokens <= 0:
            return self.dense_weight_bytes
        touched = 1.0 - (1.0 - self.experts_per_token / self.experts) ** tokens
        return self.dense_weight_bytes + (self.weight_bytes - self.dense_weight_bytes) * touched

    def step_time(self, tokens: int, kv_read_tokens: float, attn_pairs: float) -> float:
        """Seconds of one engine step by the roofline: ``tokens`` new tokens that read ``kv_read_tokens``
        tokens of KV and attend ``attn_pairs`` (new token, context token) pairs."""
        if self.instant:
            return 0.0
        memory = (self.weight_bytes_read(tokens) + kv_read_tokens * self.kv_bytes_per_token) / (
            self.hbm_bytes_per_s * self.gpus * self.mem_efficiency
        )
        peak = self.flops * self.gpus
        attn = self.attn_flops_per_ctx_token * attn_pairs / (peak * (self.attn_mfu or self.mfu))
        compute = 2.0 * self.active_params * tokens / (peak * self.mfu) + attn
        return max(memory, compute) + self.step_overhead_s

    def decode_factor(self, uptime_s: float) -> float:
        """How many times faster than at start decode-only steps run after ``uptime_s`` seconds."""
        if self.decode_speedup == 1.0 or uptime_s <= self.speedup_after_s:
            return 1.0
        ramp = self.speedup_ramp_s
        share = 1.0 if ramp <= 0 else min((uptime_s - self.speedup_after_s) / ramp, 1.0)
        return 1.0 + (self.decode_speedup - 1.0) * share

    def acceptance_length(self, generated: int) -> float:
        """The speculator's mean acceptance length (tokens a verify step yields, the bonus token included) once
        the engine has generated ``generated`` tokens: from ``spec_acceptance_start`` linearly to
        ``spec_acceptance_end`` over ``spec_learn_tokens``."""
        start, end = self.spec_acceptance_start, self.spec_acceptance_end
        if self.spec_learn_tokens <= 0:
            return end
        return start + (end - start) * min(generated / self.spec_learn_tokens, 1.0)

    def step_seconds(self, shape: StepShape, uptime_s: float = 0.0, generated: int = 0) -> float:
        """The engine's step time (real-time and virtual clock alike): the step table if the profile has
        one, else the roofline; a step with no prefill in it is sped up by ``decode_factor`` and, with a
        speculator, by its acceptance length over the starting one (the roofline is the speed at the start)."""
        if self.instant:
            return 0.0
        if self.step_table is not None:
            t = self.step_table.seconds(shape)
        else:
            t = self.step_time(shape.tokens, shape.kv_read, shape.attn_pairs) + self.seq_overhead_s * shape.decodes
        if shape.prefill_tokens == 0 and self.decode_speedup != 1.0:
            t /= self.decode_factor(uptime_s)
        if shape.prefill_tokens == 0 and self.spec_draft_tokens:
            t /= self.acceptance_length(generated) / self.spec_acceptance_start
        return t

    def decode_tps(self, streams: int = 1, context: int = 1000, uptime_s: float = 0.0) -> float:
        """Tokens/s each of ``streams`` decoding streams gets, all at ``context`` tokens (no prefill)."""
        return 1.0 / self.step_seconds(StepShape.decode(streams, context), uptime_s)

    def prefill_tps(self, context: int = 0, chunk: int | None = None) -> float:
        """Prompt tokens/s of a lone prefill in chunks of ``chunk`` tokens, starting at ``context``."""
        chunk = chunk or self.max_num_batched_tokens
        return chunk / self.step_seconds(StepShape.prefill(chunk, context))

    def summary(self) -> dict[str, float | int | str]:
        """The derived figures docs and ``replay sim --list-profiles`` quote."""
        out: dict[str, float | int | str] = {
            "profile": self.name,
            "kv_budget_tokens": self.kv_budget_tokens,
            "decode_tps_1_stream": round(self.decode_tps(1), 1),
            "decode_tps_per_stream_at_16x8k": round(self.decode_tps(16, 8000), 1),
            "decode_tps_per_stream_at_64x8k": round(self.decode_tps(64, 8000), 1),
            "prefill_tps_short": round(self.prefill_tps(0)),
            "prefill_tps_at_32k": round(self.prefill_tps(32_000)),
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
        }
        if self.step_table is not None:
            out["step_model"] = "table"
        if self.spec_draft_tokens:
            names = ("spec_draft_tokens", "spec_acceptance_start", "spec_acceptance_end", "spec_learn_tokens")
            out |= {name: getattr(self, name) for name in names}
        if self.decode_speedup != 1.0:
            warm = self.speedup_after_s + self.speedup_ramp_s
            out |= {"decode_speedup": self.decode_speedup, "speedup_after_s": self.speedup_after_s,
                    "speedup_ramp_s": self.speedup_ramp_s,
                    "decode_tps_1_stream_warm": round(self.decode_tps(1, uptime_s=warm), 1)}  # fmt: skip
        return out


# Llama-3.1-8B-Instruct in BF16 on one H100 SXM 80 GB (vLLM defaults). 8.03e9 params × 2 bytes; KV: 32 layers
# × 8 KV heads × 128 dims × 2 (K, V) × 2 bytes = 128 KiB per token; attention 4 × 32 layers × 32 heads × 128.
# H100 SXM: 3.35 TB/s HBM3, 989 TFLOP/s dense BF16. mem_efficiency 0.85 and 1 ms overhead give the
# measured ~150 tok/s single-stream decode, within 10 % of aiconfigurator's kernel database at every batch
# and context it lists (the project's reference material). Prefill is fitted to the same database: its GEMMs run at
# 0.78 of peak and its attention at 0.62 (FlashAttention's share of peak is lower than a large GEMM's), so
# an 8k prompt prefills in ~200 ms (~41k tok/s) and a 128k one in ~9.6 s, as the database predicts; the
# single MFU of 0.4 this profile had made prefill 1.9x too slow.
_H100 = SimProfile(
    name="h100-8b",
    description="Llama-3.1-8B BF16 on 1x H100 SXM: ~150 tok/s single stream, ~41k tok/s prefill",
    gpus=1,
    hbm_bytes_per_s=3.35e12,
    flops=989e12,
    gpu_memory_bytes=80 * GIB,
    mem_efficiency=0.85,
    mfu=0.78,
    attn_mfu=0.62,
    step_overhead_s=0.001,
    weight_bytes=16.06 * GB,
    dense_weight_bytes=16.06 * GB,
    active_params=8.03e9,
    attn_flops_per_ctx_token=4 * 32 * 32 * 128,
    kv_bytes_per_token=2 * 32 * 8 * 128 * 2,
)

# What `replay run` starts by default: the same model served tensor-parallel on two H100s (as 8B models are
# for agent traffic): twice the bandwidth, FLOP/s and KV room; the two all-reduces per layer over NVLink add
# ~0.7 ms per step (64 × ~10 µs), so a lone stream decodes at ~220 tok/s. In prefill each GPU's GEMMs are
# half as wide and the all-reduces carry 512 KiB per token, so the achieved share of peak falls to 0.65
# (GEMMs and attention alike): TP2 prefills 1.6x, not 2x, as fast as one GPU, as aiconfigurator's database
# predicts (the project's reference material).
_DEFAULT = dataclasses.replace(
    _H100,
    name="default",
    description="Llama-3.1-8B BF16 on 2x H100 SXM (TP2): ~220 tok/s single stream, ~70k tok/s prefill",
    gpus=2,
    step_overhead_s=0.0017,
    mfu=0.65,
    attn_mfu=0.65,
)

# DeepSeek-V3 / R1 class (671B total, 37B active, 256 routed experts, 8 per token, MLA) in FP8 on one node of
# 8x H200 141 GB, tensor parallel 8 (experts EP8) as vLLM serves it, with an FP8 KV cache
# (--kv-cache-dtype fp8, what aiconfigurator assumes for an FP8 checkpoint). Weights ~690 GB (FP8 plus BF16
# embeddings, norms and scales); the dense part read every step (MLA attention, shared expert, 3 dense
# layers, embeddings) ~17 GB, the routed experts the rest. MLA KV: 61 layers × (512 + 64) × 1 byte =
# 35,136 bytes per token, held whole by each of the 8 ranks. H200: 4.8 TB/s, 1979 TFLOP/s dense FP8.
# Prefill attention (uncompressed MLA): 4 × 61 layers × 128 heads × 160 mean head dim. The 12 ms
# overhead stands for the expert all-to-all and all-reduces of every layer: it brings single-stream
# decode to the ~74 tok/s such nodes serve without speculative decoding. Prefill is fitted to
# aiconfigurator's kernel database (the project's reference material): the expert GEMMs (256 experts, each seeing
# a few hundred tokens of a chunk) and their all-to-all reach 0.09 of FP8 peak, the attention 0.31; an
# 8k prompt takes ~460 ms (~18k tok/s), 3x the 0.35 MFU this profile had.
_MOE = SimProfile(
    name="moe-8gpu",
    description="DeepSeek-V3-class MoE (671B/37B active, FP8) on 8x H200, TP8",
    gpus=8,
    hbm_bytes_per_s=4.8e12,
    flops=1979e12,
    gpu_memory_bytes=141 * GB,
    mem_efficiency=0.7,
    mfu=0.09,
    attn_mfu=0.31,
    step_overhead_s=0.012,
    weight_bytes=690 * GB,
    dense_weight_bytes=17 * GB,
    experts=256,
    experts_per_token=8,
    active_params=37e9,
    attn_flops_per_ctx_token=4 * 61 * 128 * 160,
    kv_bytes_per_token=8 * 61 * 576,
    reserve_bytes_per_gpu=6 * GB,
    max_num_seqs=256,
    max_num_batched_tokens=8192,
    max_model_len=163_840,
)

# A badly tuned host: the default model and GPU, but started with --gpu-memory-utilization 0.35 (the GPU is
# shared with another job) and the running cap left at 256. 0.35 × 80 GiB − 16.06 GB weights − 4 GB reserve
# leaves 10 GB for KV: 76k tokens at 128 KiB per token. A coding agent's context is 2k-52k tokens (the default
# workload's calls average ~20k), so the cache holds about four sessions' working sets: KNEE_SESSIONS =
# 76k / 20k ≈ 4 for the default workload. Past the knee every session's prefix is evicted before it comes
# back (LRU thrash), admitted prefills preempt one another, new-input work triples and total throughput
# falls by about 20 % instead of flattening (the thrashing host re-prefills at the GPU's ~41k tok/s), while
# TTFT jumps from a fraction of a second to seconds.
_OVERLOADED = dataclasses.replace(
    _H100,
    name="overloaded",
    description="default model on 1x H100 at gpu_memory_utilization 0.35: 76k-token KV, collapses past ~4 sessions",
    gpu_memory_utilization=0.35,
    max_model_len=65_536,
)

# For tests: a tiny model on an imaginary fast device. 1 ms decode steps (1000 tok/s single stream), ~1M tok/s
# prefill, a step over 16 streams of 1k context ~10 % slower than a lone one; a 2M-token KV cache.
_FAST = SimProfile(
    name="fast",
    description="tests: 1000 tok/s single stream, ~1M tok/s prefill, 2M-token KV cache",
    gpus=1,
    hbm_bytes_per_s=1e12,
    flops=1e15,
    gpu_memory_bytes=0.0,
    mem_efficiency=1.0,
    mfu=1.0,
    weight_bytes=1e9,
    dense_weight_bytes=1e9,
    active_params=5e8,
    kv_bytes_per_token=6_000,
    kv_budget_override=2_000_000,
    max_num_batched_tokens=65_536,
)

# For soak tests of a host that gets faster as it runs, as one with an adaptive speculator (a draft model
# that learns the traffic, so more of its guesses are accepted): `fast` for the first 20 s of uptime, then
# decode-only steps speed up linearly to twice as fast by 40 s (1000 -> 2000 tok/s for a lone stream), so a
# one-minute run shows the change. Prefill is unchanged. Uptime counts from the engine's first request.
_SPECULATOR_WARMUP = dataclasses.replace(
    _FAST,
    name="speculator-warmup",
    description="tests: fast, whose decode speeds up from 1x at 20 s of uptime to 2x at 40 s (a speculator warming up)",
    decode_speedup=2.0,
    speedup_after_s=20.0,
    speedup_ramp_s=20.0,
)

# For tests and docs of speculative decoding: `fast` with a speculator drafting 3 tokens a step whose mean
# acceptance length rises linearly from 1.5 to 3.0 tokens per verify step over the first 20,000 tokens the engine
# generates (a draft model learning the traffic, as Together's ATLAS does), and decode-only steps faster by the
# same ratio (1000 -> 2000 tok/s for a lone stream: the roofline is the speed at the start). Its acceptance is
# counted per call (SGLang's `meta_info` on the finish chunk, the truth log) and in vLLM's spec-decode counters.
_SPECULATOR = dataclasses.replace(
    _FAST,
    name="speculator",
    description="tests: fast with 3-token drafts whose acceptance length rises 1.5 -> 3.0 over 20k generated tokens",
    spec_draft_tokens=3,
    spec_acceptance_start=1.5,
    spec_acceptance_end=3.0,
    spec_learn_tokens=20_000,
)

PROFILES: dict[str, SimProfile] = {
    p.name: p
    for p in (
        _DEFAULT,
        dataclasses.replace(
            _DEFAULT,
            name="reasoning",
            description="default, with 30 % of every answer streamed as reasoning first",
            reasoning_fraction=0.3,
        ),
        _FAST,
        dataclasses.replace(
            _FAST,
            name="instant",
            description="no pacing at all: 256 tokens per write, as fast as the loop can write (benchmarks)",
            tokens_per_write=256,
        ),
        _MOE,
        _OVERLOADED,
        _H100,
        _SPECULATOR_WARMUP,
        _SPECULATOR,
    )
}


def get_profile(name: str) -> SimProfile:
    """The profile called ``name``; a ValueError lists the known names."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown sim profile {name!r}; known: {', '.join(PROFILES)}") from None


def check_profile(p: SimProfile) -> None:
    """ValueError if the profile cannot run (no KV room, non-positive rates)."""
    if p.instant:
        return
    for field in ("gpus", "block_size", "max_num_seqs", "max_num_batched_tokens"):
        if getattr(p, field) < 1:
            raise ValueError(f"profile {p.name!r}: {field} must be at least 1")
    if p.kv_budget_tokens < p.block_size:
        raise ValueError(f"profile {p.name!r}: the weights leave no room for a KV cache")
    for field in ("hbm_bytes_per_s", "flops", "mem_efficiency", "mfu", "kv_bytes_per_token"):
        value = getattr(p, field)
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"profile {p.name!r}: {field} must be a positive number")
    if not (p.decode_speedup > 0 and math.isfinite(p.decode_speedup)):
        raise ValueError(f"profile {p.name!r}: decode_speedup must be a positive number")
    if p.spec_draft_tokens < 0 or p.spec_learn_tokens < 0:
        raise ValueError(f"profile {p.name!r}: spec_draft_tokens and spec_learn_tokens must be >= 0")
    if p.spec_draft_tokens:
        top = 1 + p.spec_draft_tokens
        for field in ("spec_acceptance_start", "spec_acceptance_end"):
            value = getattr(p, field)
            if not (1.0 <= value <= top):
                raise ValueError(f"profile {p.name!r}: {field} must be within 1..{top} (1 + spec_draft_tokens)")
    for field in ("attn_mfu", "speedup_after_s", "speedup_ramp_s", "seq_overhead_s", "step_overhead_s"):
        value = getattr(p, field)
        if not (value >= 0 and math.isfinite(value)):
            raise ValueError(f"profile {p.name!r}: {field} must be a number >= 0")
