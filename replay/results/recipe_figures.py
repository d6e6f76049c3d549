"""The figures a run adds when its header names a recipe or the facts of its host (replay.jobs.recipes): per-GPU
throughput, latency from the intended start, the AgentX and AA blocks, the validity verdict, and what the public
methods leave out. Everything from the run file alone, like every other figure."""

from __future__ import annotations

from typing import Any

from replay.results.aa_figures import aa_figures
from replay.results.agentx_figures import agentx_figures
from replay.results.beside import beside
from replay.results.intended import intended_figures
from replay.results.records import RequestRecord, RunData
from replay.results.validity import submission


def recipe_figures(run: RunData, summary: dict[str, Any], measured: list[RequestRecord], window: Any) -> dict[str, Any]:
    """Keys to merge into the summary; ``measured``: the successful non-warm-up calls sent in the window."""
    recipe = run.header.get("recipe") or {}
    gpus = recipe.get("gpus")
    tp = summary["throughput"]
    tp["gpus"] = gpus
    tp["total_tps_per_gpu"] = tp["total_tps"] / gpus if gpus and tp["total_tps"] is not None else None
    tp["output_tps_per_gpu"] = tp["output_tps"] / gpus if gpus and tp["output_tps"] is not None else None
    out: dict[str, Any] = {"intended": intended_figures(measured, run.footer)}
    name = recipe.get("name")
    if not name:
        return out
    figures = recipe.get("figures") or ()
    finals = [r for r in run.requests if r.final and r.phase != "warmup"]
    out["recipe"] = name
    out |= submission(recipe, run.header, run.footer, finals, measured, (window.start, window.end))
    warmup = sum(r.phase == "warmup" for r in run.requests)
    if "agentx" in figures:
        out["agentx"] = agentx_figures(measured, window.start, gpus, warmup)
    if "aa" in figures:
        out["aa"] = aa_figures(summary, recipe, (run.header.get("load") or {}).get("concurrency"))
    out["beside"] = beside(summary["tasks"], run.tasks, run.requests, recipe.get("rate_card_per_million"))
    return out
