"""The shipped profiles against forward-pass times predicted from measured kernels (aiconfigurator).

The reference (``aiconfigurator-step-times.json``, see its README) gives, per model and GPU set:

- ``prefill``: ms to prefill a batch of ``batch`` prompts of ``input_tokens`` tokens each, of which
  ``cached_prefix`` are already in the KV cache, in one forward pass;
- ``decode``: ms of one decode step of ``batch`` sequences with ``context_per_seq`` tokens each.

How the sim is made to answer the same questions:

- **prefill**: what a user of the sim sees as TTFT. The engine (``EngineCore``, as the server runs it)
  is given one request holding the prefix, run until idle, then the ``batch`` prompts at once (the same
  prefix, then distinct tokens); the figure is the time from their arrival until the last of them has
  its first token. So the prompts are prefilled in chunks of ``max_num_batched_tokens`` (8192) tokens,
  one after another, each chunk a step with its own weight read and overhead, which is how vLLM's
  chunked prefill runs them; the reference prices one unchunked pass. The cached prefix is what the
  block cache holds of it: whole blocks (``cached_prefix`` rounded down to 16 tokens).
- **decode**: the step time of one decode step of ``batch`` sequences each holding ``context_per_seq``
  tokens (``SimProfile.step_seconds`` over the shape the engine builds for such a step). Not run
  through the scheduler: the reference's larger points (128 × 131k tokens) hold more KV than any
  profile's cache, and it prices kernels, not memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from replay.sim.core.engine import EngineCore
from replay.sim.core.profiles import SimProfile
from replay.sim.core.step_table import StepShape

REFERENCE_FILE = "aiconfigurator-step-times.json"

# shipped profile -> (model, gpu, parallel) of the reference case it stands for
CASES: dict[str, tuple[str, str, dict[str, int]]] = {
    "h100-8b": ("meta-llama/Meta-Llama-3.1-8B", "h100_sxm", {"tp": 1}),
    "default": ("meta-llama/Meta-Llama-3.1-8B", "h100_sxm", {"tp": 2}),
    "moe-8gpu": ("deepseek-ai/DeepSeek-V3", "h200_sxm", {"tp": 8, "moe_tp_size": 1, "moe_ep_size": 8}),
}


@dataclass(frozen=True, slots=True)
class Point:
    """One reference figure and the sim's answer to the same question."""

    kind: str  # "prefill" or "decode"
    batch: int
    tokens: int  # prefill: input tokens per prompt; decode: context per sequence
    cached: int  # prefill: cached prefix (0 for decode)
    reference_ms: float
    sim_ms: float

    @property
    def ratio(self) -> float:
        return self.sim_ms / self.reference_ms


def load_reference(directory: Path) -> dict[str, Any]:
    return orjson.loads((directory / REFERENCE_FILE).read_bytes())


def find_case(reference: dict[str, Any], profile_name: str) -> dict[str, Any]:
    """The reference case the profile stands for; KeyError if the reference has none."""
    model, gpu, parallel = CASES[profile_name]
    for case in reference["cases"]:
        if case["model"] == model and case["gpu"] == gpu and case["parallel"] == parallel:
            return case
    raise KeyError(f"no reference case for {profile_name!r} ({model}, {gpu}, {parallel})")


def sim_prefill_s(profile: SimProfile, batch: int, input_tokens: int, cached_prefix: int) -> float:
    """Seconds from the arrival of ``batch`` prompts to the last one's first token (see module doc)."""
    core = EngineCore(profile)
    rng = np.random.default_rng(0)
    prefix = rng.integers(0, 100_000, cached_prefix).astype(np.int32)
    t = 0.0
    if cached_prefix:
        core.add(core.new_seq("prefix", prefix, 1), t)
        t = _run(core, t)
    seqs = []
    for i in range(batch):
        rest = rng.integers(0, 100_000, input_tokens - cached_prefix).astype(np.int32)
        seqs.append(core.new_seq(f"r{i}", np.concatenate([prefix, rest]), 1))
        core.add(seqs[-1], t)
    _run(core, t)
    return max(s.t_first_token for s in seqs if s.t_first_token is not None) - t


def _run(core: EngineCore, t: float) -> float:
    while (step := core.schedule(t)) is not None:
        t += step.duration
        core.complete(step, t)
    return t


def sim_decode_s(profile: SimProfile, batch: int, context: int) -> float:
    """Seconds of one decode step of ``batch`` sequences of ``context`` tokens each."""
    return profile.step_seconds(StepShape.decode(batch, context))


def compare(profile: SimProfile, case: dict[str, Any]) -> list[Point]:
    """Every reference point of ``case`` next to the sim's figure for it."""
    points = [
        Point("prefill", p["batch"], p["input_tokens"], p["cached_prefix"], p["ms"],
              1000 * sim_prefill_s(profile, p["batch"], p["input_tokens"], p["cached_prefix"]))
        for p in case["prefill"]
    ]  # fmt: skip
    points += [
        Point("decode", p["batch"], p["context_per_seq"], 0, p["ms_per_step"],
              1000 * sim_decode_s(profile, p["batch"], p["context_per_seq"]))
        for p in case["decode"]
    ]  # fmt: skip
    return points
