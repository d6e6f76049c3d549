"""The figures a run adds when its header names a recipe or the facts of its host (replay.runner.recipes): latency
from the intended start, the AgentX and AA blocks, the validity verdict, and what the public methods leave out
(per-GPU and per-MW throughput and the hourly cost are the summary's own: ``summary.run_hardware``). Everything
from the run file alone, like every other figure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from replay.metrics.host.cost import PICO
from replay.metrics.recipes.aa_figures import aa_figures
from replay.metrics.recipes.agentx_figures import agentx_figures
from replay.metrics.recipes.beside import beside
from replay.metrics.recipes.intended import intended_figures
from replay.metrics.recipes.validity import submission
from replay.records.run_file import RunData

if TYPE_CHECKING:
    from replay.metrics.accumulator import Accumulator


def recipe_figures(run: RunData, summary: dict[str, Any], acc: Accumulator, window: Any) -> dict[str, Any]:
    """Keys to merge into the summary, from the accumulator's recipe and host tallies."""
    recipe = run.header.get("recipe") or {}
    host = run.header.get("host") or {}
    gpus = summary["throughput"]["gpus"]  # the recipe's, else the hosts file's (summary.run_hardware)
    t = acc.recipe
    out: dict[str, Any] = {"intended": intended_figures(t, run.footer)}
    name = recipe.get("name")
    if not name:
        return out
    figures = recipe.get("figures") or ()
    out["recipe"] = name
    finals = (t.counts["finals"], acc.sums["finals_failed"], t.counts["overflow"])
    out |= submission(recipe, run.header, run.footer, finals, t.coverage(window.start, window.end))
    if "agentx" in figures:
        out["agentx"] = agentx_figures(t, window.start, gpus)
    if "aa" in figures:
        facts = {**recipe, "gpus": gpus, "power_kw": recipe.get("power_kw") or host.get("power_kw")}
        out["aa"] = aa_figures(summary, facts, (run.header.get("load") or {}).get("concurrency"))
    card = host.get("price")
    task_usd = {task: pico / PICO for task, pico in acc.host.task_usd.items()} if isinstance(card, dict) else None
    out["beside"] = beside(summary["tasks"], acc.tasks.complete, task_usd)
    return out


def run_seconds(run: RunData) -> float | None:
    """How long the run ran, start to end, over its segments (a resumed run's gaps are no cost)."""
    total = 0.0
    for phases in (run.phases, *run.later_phases):
        start, end = phases.get("start"), phases.get("end") or phases.get("stop")
        if start is None or end is None:
            return None
        total += max(0.0, end - start)
    return total
