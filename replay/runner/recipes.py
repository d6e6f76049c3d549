"""Recipes: the run settings and figures of a public agentic benchmark, as one small value.

``agentx``: SemiAnalysis InferenceX AgentX v1.0 as ``agentx-harness`` 1.0.12 runs it (its ``agentx`` scenario,
``aiperf/common/scenario/inferencex_agentx_mvp.py``). ``aa-agentperf``: Artificial Analysis AA-AgentPerf, as far as
its method is public (artificialanalysis.ai/methodology/agentperf); what replay had to choose is in docs/recipes.md.
A recipe fills what the user left unset and never overrides what was asked for; the header records it, so
``replay report`` rebuilds its figures and its verdict from the run file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from replay.sessions.lanes import LaneConfig
from replay.sessions.start_points import StartAt

RECIPE_NAMES = ("agentx", "aa-agentperf")

# AA-AgentPerf publishes SLO tiers per model (TTFT and per-user output speed) but not every value; these are
# replay's defaults (docs/recipes.md): name, TTFT limit (s), per-user speed floor (tok/s).
DEFAULT_SLO_TIERS = (("20tps", 10.0, 20.0), ("60tps", 5.0, 60.0), ("100tps", 3.0, 100.0), ("180tps", 2.0, 180.0))


@dataclass(frozen=True, slots=True)
class Recipe:
    """What a recipe sets and how its run is judged."""

    name: str
    lanes: LaneConfig | None = None
    force_output_length: bool = False
    default_duration_s: float | None = None
    min_duration_s: float | None = None
    max_overflow_rate: float | None = None  # more than this share of calls overflowing the context: invalid
    max_error_rate: float | None = None  # more than this share of calls failing: invalid
    min_metric_coverage: float | None = None  # share of 1 s slices of the window with a TTFT or token in them
    figures: tuple[str, ...] = ()
    corpus: str | None = None  # the public corpus the method pins (its name: replay does not ship it)


AGENTX = Recipe(
    name="agentx",
    lanes=LaneConfig(
        start_at=StartAt(0.25, 0.75),
        warmup_per_lane=10,
        background_subagents=True,
        system_idle_cap_s=10.0,
        tree_idle_cap_s=300.0,
    ),
    force_output_length=True,
    default_duration_s=3600.0,
    min_duration_s=900.0,
    max_overflow_rate=0.01,
    max_error_rate=0.10,
    min_metric_coverage=0.95,
    figures=("agentx",),
    corpus="semianalysis_cc_traces_weka_062126",  # agentx-harness's pinned public corpus (docs/recipes.md)
)

AA_AGENTPERF = Recipe(name="aa-agentperf", force_output_length=True, figures=("aa",))


@dataclass(frozen=True, slots=True)
class RecipeFacts:
    """What a recipe's figures need to know about the system under test (none of it measured by replay)."""

    gpus: int | None = None
    power_kw: float | None = None
    price_per_hour: float | None = None  # USD an hour for the whole host (--price-per-hour): the run's hourly cost
    slo_tiers: tuple[tuple[str, float, float], ...] = DEFAULT_SLO_TIERS
    min_duration_s: float | None = None  # the recipe's minimum, shortened for a smoke test (stated in the summary)
    fingerprint: str | None = None  # the workload fingerprint the run must have (--recipe-fingerprint)
    extra: dict[str, Any] = field(default_factory=dict)


def get_recipe(name: str) -> Recipe:
    if name == AGENTX.name:
        return AGENTX
    if name == AA_AGENTPERF.name:
        return AA_AGENTPERF
    raise ValueError(f"unknown recipe {name!r}; expected one of {', '.join(RECIPE_NAMES)}")


def header_block(recipe: Recipe | None, facts: RecipeFacts) -> dict[str, Any]:
    """The header's ``recipe`` entry: which rules the run follows and the facts its figures use."""
    block: dict[str, Any] = {
        "name": recipe.name if recipe else None,
        "gpus": facts.gpus,
        "power_kw": facts.power_kw,
        "price_per_hour": facts.price_per_hour,
        "slo_tiers": [{"name": n, "ttft_s": t, "speed_tps": v} for n, t, v in facts.slo_tiers],
    }
    if recipe is not None:
        minimum = facts.min_duration_s if facts.min_duration_s is not None else recipe.min_duration_s
        block |= {
            "min_duration_s": minimum,
            "min_duration_shortened": minimum != recipe.min_duration_s,
            "max_overflow_rate": recipe.max_overflow_rate,
            "max_error_rate": recipe.max_error_rate,
            "min_metric_coverage": recipe.min_metric_coverage,
            "figures": list(recipe.figures),
            "corpus": {"name": recipe.corpus, "fingerprint": facts.fingerprint},
        }
    return block


def apply_recipe(spec: Any, recipe: Recipe, asked: set[str]) -> Any:
    """``spec`` (a RunSpec) with the recipe's settings wherever the user did not set one (``asked``: option names)."""
    load = spec.load
    changes: dict[str, Any] = {}
    if recipe.default_duration_s is not None and "duration" not in asked and "tasks" not in asked:
        changes["duration_s"] = recipe.default_duration_s
    if recipe.lanes is not None:
        lanes = recipe.lanes
        if load.lanes is not None and load.lanes.start_at is not None:
            lanes = dataclasses.replace(lanes, start_at=load.lanes.start_at)
        changes["lanes"] = lanes
    spec = dataclasses.replace(spec, load=dataclasses.replace(load, **changes))
    if recipe.force_output_length:
        spec = dataclasses.replace(spec, endpoint=dataclasses.replace(spec.endpoint, force_output_length=True))
    return spec
