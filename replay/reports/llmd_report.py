"""``replay export --format llm-d``: a run's summary as an llm-d Benchmark Report, v0.2 line (revision 0.2.1).

The format is llm-d-benchmark's (PyPI ``llmd-benchmark-report``, its ``schema_v0_2.py`` and
``br_v0_2_json_schema.json``): ``version``, ``run`` (a unique id), ``scenario.load`` (the workload generator) and
``results.request_performance.aggregate``. Every figure is one of the summary's (docs/reports.md has the map), never
recomputed here; the only arithmetic is a change of unit (``normalized_time_per_output_token`` is 1 /
``interactivity_e2e``, which is itself 1 / the percentile of seconds per output token) and the input rate, the sum of
the summary's two input rates. Statistics carry the percentiles replay reports (its own method: nearest rank at 3
significant digits), never ones it does not. The test suite validates the output with the package's own models
(``llmd-benchmark-report`` in the ``test`` extra); replay itself needs nothing to write it.
"""

from __future__ import annotations

import uuid
from typing import Any

BR_VERSION = "0.2.1"
# The percentiles a Benchmark Report's Statistics take, in the names replay's figures use.
BR_PERCENTILES = ("p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99")
_NAMESPACE = uuid.UUID("5d1c1a52-4f0b-4c59-9a55-7265706c6179")  # replay's, for the report ids (uuid5)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def statistics(figure: Any, units: str) -> dict[str, Any] | None:
    """A Statistics object from one of the summary's percentile sets (None when it has no mean: no calls)."""
    if not isinstance(figure, dict) or not _number(figure.get("mean")):
        return None
    out: dict[str, Any] = {"units": units, "mean": figure["mean"]}
    out |= {p: figure[p] for p in BR_PERCENTILES if _number(figure.get(p))}
    if _number(figure.get("std")):
        out["stddev"] = figure["std"]
    return out


def _inverse(figure: Any, units: str) -> dict[str, Any] | None:
    """Statistics of 1 / a speed set: the seconds per token whose percentiles the speeds inverted (no spread: the
    speeds' is not the seconds')."""
    if not isinstance(figure, dict) or not _number(figure.get("mean")) or not figure["mean"]:
        return None
    inverted = {k: 1.0 / v for k, v in figure.items() if k != "std" and k != "n" and _number(v) and v}
    return statistics(inverted, units)


def _rate(value: Any) -> dict[str, Any] | None:
    return {"units": "tokens/s", "mean": value} if _number(value) else None


def _drop_none(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if v is not None}


def report_id(summary: dict[str, Any], *parts: Any) -> str:
    """A stable id for a run's report: the same run (its start, host, concurrency, corpus) gives the same one."""
    run = summary.get("run") or {}
    key = "|".join(str(x) for x in (run.get("created"), run.get("host"), run.get("model"), run.get("concurrency"),
                                    (run.get("workload") or {}).get("fingerprint"), *parts))  # fmt: skip
    return uuid.uuid5(_NAMESPACE, key).hex


def _load(summary: dict[str, Any]) -> dict[str, Any]:
    run, totals = summary.get("run") or {}, summary.get("totals") or {}
    ok, prompt = totals.get("ok"), totals.get("prompt_tokens")
    standardized: dict[str, Any] = {
        "tool": "replay",
        "tool_version": str(run.get("replay_version") or "unknown"),
        "source": "sampled",  # recorded agent trajectories, replayed
        # the mean prompt of the run's successful calls (the summary's totals): the recordings, not a distribution,
        # set each call's
        "input_seq_len": {"distribution": "other", "value": prompt / ok if ok and _number(prompt) else 0},
        "multi_turn": {"enabled": True},
    }
    if isinstance(run.get("concurrency"), int) and run["concurrency"] >= 1 and not run.get("open_loop"):
        standardized["concurrency"] = run["concurrency"]
    workload = run.get("workload") or {}
    return {
        "metadata": _drop_none({"description": f"replay of {workload.get('trajectories')} recorded trajectories"
                                               f" (workload fingerprint {workload.get('fingerprint')})"}),
        "standardized": standardized,
        "native": {"config": {"run": run}},
    }  # fmt: skip


def _aggregate(summary: dict[str, Any]) -> dict[str, Any]:
    tp = summary.get("throughput") or {}
    inputs = [tp.get("cached_input_tps"), tp.get("new_input_tps")]
    latency = _drop_none({
        "time_to_first_token": statistics(summary.get("ttft_s"), "s"),
        "request_latency": statistics(summary.get("e2e_s"), "s"),
        "inter_token_latency": statistics(summary.get("itl_s"), "s/token"),
        "normalized_time_per_output_token": _inverse(summary.get("interactivity_e2e"), "s/token"),
    })  # fmt: skip
    throughput = _drop_none({
        "input_token_rate": _rate(sum(inputs)) if all(_number(x) for x in inputs) else None,
        "output_token_rate": _rate(tp.get("output_tps")),
        "total_token_rate": _rate(tp.get("total_tps")),
    })  # fmt: skip
    requests = {"total": int(summary.get("requests") or 0), "failures": int(summary.get("errors") or 0)}
    return _drop_none({"requests": requests, "latency": latency or None, "throughput": throughput or None})


def llmd_report(summary: dict[str, Any], eid: str | None = None, treatment: str | None = None) -> dict[str, Any]:
    """The Benchmark Report of one run's summary (``eid``: the experiment, a sweep, its levels share)."""
    run = summary.get("run") or {}
    load = _load(summary)
    if treatment is not None:
        load["metadata"]["treatment"] = treatment
    out_run = _drop_none({
        "uid": report_id(summary, treatment),
        "eid": eid,
        "time": {"start": run["created"]} if run.get("created") else None,
        "description": f"replay: {run.get('model') or 'model unknown'} at {run.get('host')}"
                       + (f", {run['concurrency']} concurrent agents" if run.get("concurrency") else ""),
        "keywords": ["replay", *([summary["recipe"]] if summary.get("recipe") else [])],
    })  # fmt: skip
    return {
        "version": BR_VERSION,
        "run": out_run,
        "scenario": {"load": load},
        "results": {"request_performance": {"aggregate": _aggregate(summary)}},
    }


def llmd_sweep(levels: list[dict[str, Any]], sweep_id: str) -> list[dict[str, Any]]:
    """One report per level of a sweep, sharing the experiment id; each level's treatment is its concurrency."""
    eid = uuid.uuid5(_NAMESPACE, sweep_id).hex
    return [llmd_report(lv, eid=eid, treatment=f"concurrency-{lv.get('concurrency')}") for lv in levels]
