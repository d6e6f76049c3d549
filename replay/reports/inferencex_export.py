"""``replay export --format inferencex``: a run's AgentX figures in InferenceX's aggregate shape.

InferenceX (SemiAnalysisAI/InferenceX, ``utils/agentic/aggregation/request_metrics.py`` and
``process_agentic_result.py``) aggregates an AIPerf AgentX run's profiling records into ``request_metrics``:
``latency.{ttft,e2el,itl,tpot,e2e_norm_intvty}`` each ``{mean, p50, p75, p90, p95, std}`` in seconds (``tpot`` is
the per-request ITL again, ``e2e_norm_intvty`` 1 / each statistic of request latency over output tokens, ``std`` the
per-request speeds' population spread), ``throughput.{input,output,total}.tokens_per_second`` over the profiling
span (first request start to last end; ``duration_seconds``) and ``throughput.per_gpu.{total,output,input}_tput_tps``
(over the GPU count; empty without one). These are AgentX's aggregates, so they come from the summary's ``agentx``
block (a run made with ``--recipe agentx``), key for key (docs/reports.md has the map); a run without one is refused,
since replay's other figures are defined otherwise (its ITL is every gap between token reads, its throughput the
tokens attributed to the steady window). Percentiles are replay's (nearest rank at 3 significant digits), where
InferenceX interpolates between values.
"""

from __future__ import annotations

from typing import Any

from replay.errors import ReplayError

FORMAT = "replay.inferencex/1"
STATS = ("mean", "p50", "p75", "p90", "p95", "std")


class ExportError(ReplayError, ValueError):
    """A summary the chosen format cannot be made from; the message says why and what would do."""


def _stats(figure: Any) -> dict[str, Any]:
    return {k: figure.get(k) for k in STATS} if isinstance(figure, dict) else dict.fromkeys(STATS)


def request_metrics(summary: dict[str, Any], where: str = "the run", remedy: str = "run it with --recipe agentx"
                    ) -> dict[str, Any]:  # fmt: skip
    """InferenceX's ``request_metrics`` (latency, throughput, cache) from a summary's ``agentx`` block."""
    ax = summary.get("agentx")
    if not isinstance(ax, dict):
        raise ExportError(f"{where} has no AgentX figures: InferenceX's fields are AgentX's aggregates (per-request "
                          f"ITL, the profiling span's throughput); {remedy}")  # fmt: skip
    tp = ax.get("throughput") or {}
    itl = _stats(ax.get("itl_s"))
    per_gpu = {}
    if tp.get("gpus"):
        per_gpu = {
            "total_tput_tps": tp.get("total_tps_per_gpu"),
            "output_tput_tps": tp.get("output_tps_per_gpu"),
            "input_tput_tps": tp.get("input_tps_per_gpu"),
        }
    return {
        "latency": {
            "ttft": _stats(ax.get("ttft_s")),
            "e2el": _stats(ax.get("e2e_s")),
            "itl": itl,
            "tpot": dict(itl),
            "e2e_norm_intvty": _stats(ax.get("interactivity_e2e")),
        },
        "throughput": {
            "input": {"tokens_per_second": tp.get("input_tps")},
            "output": {"tokens_per_second": tp.get("output_tps")},
            "total": {"tokens_per_second": tp.get("total_tps")},
            "duration_seconds": tp.get("span_s"),
            "per_gpu": per_gpu,
        },
        "cache": {"theoretical_cache_hit_rate": (ax.get("prefix_cache") or {}).get("theoretical_hit_ratio")},
    }


def inferencex(summary: dict[str, Any], where: str = "the run", remedy: str = "run it with --recipe agentx"
               ) -> dict[str, Any]:  # fmt: skip
    """One run's export: InferenceX's ``request_metrics`` and the run's identity and validity beside it."""
    run = summary.get("run") or {}
    tp = (summary.get("agentx") or {}).get("throughput") or {}
    return {
        "format": FORMAT,
        "request_metrics": request_metrics(summary, where, remedy),
        "num_gpus": tp.get("gpus"),
        "requests": (summary.get("agentx") or {}).get("requests"),
        "submission_valid": summary.get("submission_valid"),
        "invalid_reasons": summary.get("invalid_reasons"),
        "replay": {
            "version": run.get("replay_version"),
            "created": run.get("created"),
            "host": run.get("host"),
            "model": run.get("model"),
            "concurrency": run.get("concurrency"),
            "workload_fingerprint": (run.get("workload") or {}).get("fingerprint"),
        },
    }


def inferencex_sweep(levels: list[dict[str, Any]]) -> dict[str, Any]:
    """A sweep's levels, one InferenceX row each, exported as its run (every level must carry AgentX's figures: a
    sweep made with ``replay sweep --recipe agentx``)."""
    remedy = "make the sweep with --recipe agentx (each level an AgentX run)"
    rows = [{"concurrency": lv.get("concurrency"), **inferencex(lv, f"level {lv.get('concurrency')}", remedy)}
            for lv in levels]  # fmt: skip
    return {"format": FORMAT, "levels": rows}
