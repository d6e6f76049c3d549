"""The figures of an AgentX run, aggregated as AIPerf (``agentx-harness`` 1.0.12) aggregates them.

Over the measured calls only (warm-up excluded, as AIPerf's profiling phase): throughput = (input + output tokens)
/ profiling span, total and per GPU; per-call TTFT, end-to-end latency and ITL as AIPerf defines it per request,
(latency - TTFT) / (output tokens - 1); interactivity = 1 / ITL at each percentile; the theoretical prefix-cache hit
(an infinite cache over the session tree) beside the host's. Field names map to AIPerf's export (docs/recipes.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from replay.results.records import RequestRecord

PCTS = (50, 75, 90, 95)


def stats(values: list[float]) -> dict[str, float | int | None]:
    """mean, p50, p75, p90, p95, std (numpy's linear percentiles) and n."""
    if not values:
        return {"mean": None, **{f"p{p}": None for p in PCTS}, "std": None, "n": 0}
    a = np.asarray(values, dtype=float)
    return {"mean": float(a.mean()), **{f"p{p}": float(np.percentile(a, p)) for p in PCTS}, "std": float(a.std()),
            "n": int(a.size)}  # fmt: skip


def request_itl(r: RequestRecord) -> float | None:
    """AIPerf's inter-token latency of one call: (end-to-end - TTFT) / (output tokens - 1)."""
    n = r.output_tokens if r.output_tokens is not None else r.output_events
    if n is None or n < 2 or r.t_first_token is None or r.t_done is None:
        return None
    return (r.t_done - r.t_first_token) / (n - 1)


def interactivity(itl: dict[str, Any]) -> dict[str, float | None]:
    """1 / ITL at p50, p75, p90, p95: tokens per second a user sees at that percentile."""
    return {f"p{p}": (1.0 / v if (v := itl.get(f"p{p}")) else None) for p in PCTS}


def agentx_figures(measured: list[RequestRecord], window_start: float, gpus: int | None, warmup: int) -> dict[str, Any]:
    """The AgentX block; ``measured``: the calls of the profiling phase that succeeded."""
    span_end = max((r.t_done for r in measured if r.t_done is not None), default=window_start)
    span = max(0.0, span_end - window_start)
    tokens_in = sum(r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_est for r in measured)
    tokens_out = sum(r.output_tokens if r.output_tokens is not None else r.output_events for r in measured)

    def rate(x: float) -> float | None:
        return x / span if span > 0 else None

    total = rate(tokens_in + tokens_out)
    output = rate(tokens_out)
    itl = stats([v for r in measured if (v := request_itl(r)) is not None])
    reported = [r for r in measured if r.prompt_tokens is not None and r.cached_tokens is not None]
    seen = [r for r in measured if r.prefix_seen_tokens is not None]
    est = sum(r.prompt_tokens_est for r in seen)
    return {
        "requests": len(measured),
        "subagent_requests": sum(r.parent is not None for r in measured),
        "warmup_requests": warmup,
        "throughput": {
            "span_s": span,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "total_tps": total,
            "output_tps": output,
            "gpus": gpus,
            "total_tps_per_gpu": total / gpus if (total is not None and gpus) else None,
            "output_tps_per_gpu": output / gpus if (output is not None and gpus) else None,
        },
        "ttft_s": stats([r.t_first_token - r.t_sent for r in measured if r.t_first_token is not None]),
        "e2e_s": stats([r.t_done - r.t_sent for r in measured if r.t_done is not None]),
        "itl_s": itl,
        "interactivity": interactivity(itl),
        "prefix_cache": {
            "theoretical_hit_ratio": sum(r.prefix_seen_tokens or 0 for r in seen) / est if est else None,
            "host_hit_ratio": (sum(r.cached_tokens or 0 for r in reported) / p)
            if (p := sum(r.prompt_tokens or 0 for r in reported))
            else None,
        },
    }
