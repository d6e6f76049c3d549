"""The figures of an AgentX run, aggregated as AIPerf (``agentx-harness`` 1.0.12) aggregates them.

Over the measured calls only (warm-up excluded, as AIPerf's profiling phase): throughput = (input + output tokens)
/ profiling span, total and per GPU; per-call TTFT, end-to-end latency and ITL as AIPerf defines it per request,
(latency - TTFT) / (output tokens - 1); interactivity = 1 / ITL at each percentile; the theoretical prefix-cache hit
(an infinite cache over the session tree) beside the host's. Field names map to AIPerf's export (docs/recipes.md).
Percentiles come from HdrHistograms (3 significant digits), where AIPerf interpolates between values (numpy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replay.metrics.recipes.recipe_tally import RecipeTally

PCTS = (50, 75, 90, 95)
_P = tuple(f"p{p}" for p in PCTS)


def interactivity(itl: dict[str, Any]) -> dict[str, float | None]:
    """1 / ITL at p50, p75, p90, p95: tokens per second a user sees at that percentile."""
    return {f"p{p}": (1.0 / v if (v := itl.get(f"p{p}")) else None) for p in PCTS}


def interactivity_e2e(t: RecipeTally) -> dict[str, float | int | None]:
    """E2E-normalised interactivity (InferenceX's x axis; aiperf PR #1270): 1 / pX of each call's end-to-end latency
    over its output tokens, so the slow tail is inverted after the percentile (p90 is the speed nine calls in ten
    get or beat, prefill and queueing included); ``mean`` is 1 / the mean ratio, ``std`` the population spread of
    the per-call speeds, ``n`` the calls counted (``recipe_tally.e2e_norm_sample`` says which)."""
    ratio = t.stats["e2e_norm"].figures(PCTS)
    out: dict[str, float | int | None] = {
        key: (1.0 / v if isinstance(v := ratio[key], float) and v > 0 else None) for key in (*_P, "mean")
    }
    out["std"] = t.stats["e2e_norm_tps"].figures(())["std"]
    out["n"] = ratio["n"]
    return out


def agentx_figures(t: RecipeTally, window_start: float, gpus: int | None) -> dict[str, Any]:
    """The AgentX block, over the calls of the profiling phase that succeeded."""
    c = t.calls
    span = max(0.0, (t.span_end if t.span_end is not None else window_start) - window_start)

    def rate(x: float) -> float | None:
        return x / span if span > 0 else None

    total = rate(c["tokens_in"] + c["tokens_out"])
    output, inputs = rate(c["tokens_out"]), rate(c["tokens_in"])
    itl = t.stats["itl"].figures(PCTS)
    return {
        "requests": c["n"],
        "subagent_requests": c["subagents"],
        "warmup_requests": t.counts["warmup"],
        "throughput": {
            "span_s": span,
            "input_tokens": c["tokens_in"],
            "output_tokens": c["tokens_out"],
            "total_tps": total,
            "output_tps": output,
            "input_tps": inputs,
            "gpus": gpus,
            "total_tps_per_gpu": total / gpus if (total is not None and gpus) else None,
            "output_tps_per_gpu": output / gpus if (output is not None and gpus) else None,
            "input_tps_per_gpu": inputs / gpus if (inputs is not None and gpus) else None,
        },
        "ttft_s": t.stats["ttft"].figures(PCTS),
        "e2e_s": t.stats["e2e"].figures(PCTS),
        "itl_s": itl,
        "interactivity": interactivity(itl),
        "interactivity_e2e": interactivity_e2e(t),
        "prefix_cache": {
            "theoretical_hit_ratio": c["seen_tokens"] / c["seen_est"] if c["seen_est"] else None,
            "host_hit_ratio": c["host_cached"] / c["host_prompt"] if c["host_prompt"] else None,
        },
    }
