"""The sim's Prometheus ``/metrics``, under the names vLLM exports, so dashboards and scrapers built for
vLLM read it unchanged (a speculating profile adds vLLM's ``spec_decode`` counters); ``replay_sim:*`` adds what
only a simulator knows (faults, loop lag)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replay.sim.core.engine import SimEngine
    from replay.sim.server.faults import FaultPlan


def _line(name: str, labels: dict[str, str], value: float) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {value:g}" if inner else f"{name} {value:g}"


def exposition(
    engine: SimEngine, faults: FaultPlan, requests: dict[str, int], model: str, routes: dict[str, int] | None = None
) -> str:
    """The text exposition format (version 0.0.4). The vLLM metrics are the primary route's engine's."""
    core = engine.core
    pool = core.pool
    p = engine.profile
    base = {"model_name": model}
    out: list[str] = []

    def metric(name: str, kind: str, help_: str, samples: Sequence[tuple[dict[str, str], float]]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(_line(name, {**base, **labels}, value) for labels, value in samples)

    metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
           [({}, len(core.running))])  # fmt: skip
    metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
           [({}, len(core.waiting))])  # fmt: skip
    metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", [({}, pool.usage)])
    metric("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage (vLLM V0 name).", [({}, pool.usage)])
    metric("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.",
           [({}, pool.query_tokens)])  # fmt: skip
    metric("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.",
           [({}, pool.hit_tokens)])  # fmt: skip
    metric("vllm:num_preemptions_total", "counter", "Cumulative number of preemptions from the engine.",
           [({}, core.preemptions)])  # fmt: skip
    metric("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
           [({}, core.prompt_tokens_total)])  # fmt: skip
    metric("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
           [({}, core.generation_tokens_total)])  # fmt: skip
    if p.spec_draft_tokens:  # vLLM exports these only with speculative decoding on; counted per engine step
        accepted, drafted, drafts = core.spec_totals
        metric("vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.", [({}, drafts)])
        metric("vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.", [({}, drafted)])
        metric("vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.",
               [({}, accepted)])  # fmt: skip
    finished = [({"finished_reason": r}, n) for r, n in sorted(core.finished.items())]
    metric("vllm:request_success_total", "counter", "Count of successfully processed requests.",
           finished or [({"finished_reason": "length"}, 0)])  # fmt: skip
    metric("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig.",
           [({"block_size": str(p.block_size), "num_gpu_blocks": str(pool.capacity_blocks),
              "enable_prefix_caching": str(p.enable_prefix_caching)}, 1)])  # fmt: skip
    metric("replay_sim:evicted_blocks_total", "counter", "Named KV blocks evicted from the prefix cache.",
           [({}, pool.evicted_blocks)])  # fmt: skip
    metric("replay_sim:engine_steps_total", "counter", "Engine steps run.", [({}, core.steps)])
    metric("replay_sim:engine_busy_seconds_total", "counter", "Simulated GPU time of all steps.", [({}, core.busy_s)])
    metric("replay_sim:loop_lag_resets_total", "counter", "Times the scheduler loop fell behind and re-anchored.",
           [({}, engine.lag_resets)])  # fmt: skip
    metric("replay_sim:requests_total", "counter", "Requests by final status.",
           [({"status": s}, n) for s, n in sorted(requests.items())] or [({"status": "ok"}, 0)])  # fmt: skip
    metric("replay_sim:faults_total", "counter", "Faults injected, by kind.",
           [({"kind": k}, n) for k, n in faults.counts.items()] or [({"kind": "none"}, 0)])  # fmt: skip
    metric("replay_sim:route_requests_total", "counter", "Valid requests by route (primary, fallback:PROFILE).",
           [({"route": r}, n) for r, n in (routes or {"primary": 0}).items()])  # fmt: skip
    return "\n".join(out) + "\n"
