"""The recipe, open-loop and start-point options of a run, checked and folded into its ``RunSpec``."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import click

from replay.cli.options import parse_duration

# The recipe's options (docs/recipes.md); the cost per task uses --rate-card, a host option. RULES: the recipe and
# what it is judged by, which a sweep takes too (each level a recipe run); the rest: where sessions start.
RULES = [
    click.option(
        "--recipe",
        type=click.Choice(["agentx", "aa-agentperf"]),
        help="Run by a public benchmark's rules and print its figures: agentx (SemiAnalysis InferenceX AgentX v1.0, "
        "as agentx-harness 1.0.12 runs it) or aa-agentperf (Artificial Analysis AA-AgentPerf). docs/recipes.md.",
    ),
    click.option(
        "--slo-tier",
        "slo_tiers",
        multiple=True,
        metavar="NAME:TTFT:TPS",
        help="An SLO tier for aa-agentperf: TTFT at most TTFT seconds and per-user speed at least TPS (repeatable; "
        "default 20tps:10:20, 60tps:5:60, 100tps:3:100, 180tps:2:180).",
    ),
    click.option(
        "--recipe-min-duration",
        help="Shorten the recipe's minimum duration (agentx: 900 s) for a smoke test; the summary says so.",
    ),
    click.option(
        "--recipe-fingerprint",
        metavar="sha256:HEX",
        help="The workload fingerprint the recipe run requires (replay inspect prints a workload's; AgentX pins "
        "the corpus semianalysis_cc_traces_weka_062126): a run on another corpus is not submission_valid.",
    ),
]
RECIPE = [
    *RULES,
    click.option(
        "--start-at",
        help="Start each session's first tree mid-trajectory: RATIO of its recorded duration, or random:LO:HI "
        "(seeded), with a primer call carrying the full prefix; later trees start at turn 0.",
    ),
    click.option("--idle-cap", help="No tool pause longer than this (e.g. 30, 5m)."),
    click.option(
        "--arrivals",
        help="Open loop: sessions arrive at poisson:RATE, gamma:RATE:CV (RATE per second) or recorded[:SPEED] "
        "(the workload's recorded start times, SPEED times faster); latency counts from each call's intended start.",
    ),
    click.option(
        "--max-live",
        type=click.IntRange(1),
        help="Open loop: at most this many sessions at once; later arrivals wait in a backlog (default: "
        "--concurrency).",
    ),
]


def _bad(option: str, problem: str) -> click.BadParameter:
    return click.BadParameter(problem, param_hint=option)


def _floats(text: str, n: int, option: str, what: str) -> list[float]:
    parts = text.split(":")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != n or any(v < 0 for v in values):
        raise _bad(option, f"{text!r}: expected {what}")
    return values


def _tiers(specs: tuple[str, ...]) -> tuple[tuple[str, float, float], ...] | None:
    if not specs:
        return None
    tiers = []
    for spec in specs:
        name, _, rest = spec.partition(":")
        if not name:
            raise _bad("--slo-tier", f"{spec!r}: expected NAME:TTFT_SECONDS:TOKENS_PER_S")
        ttft, tps = _floats(rest, 2, "--slo-tier", "NAME:TTFT_SECONDS:TOKENS_PER_S (numbers >= 0)")
        tiers.append((name, ttft, tps))
    return tuple(tiers)


def with_recipe(spec: Any, opts: dict[str, Any]) -> Any:
    """``spec`` with the recipe applied, the start point, the arrivals and the facts the figures need."""
    from replay.loops.arrivals import Arrivals
    from replay.runner.recipes import DEFAULT_SLO_TIERS, RecipeFacts, apply_recipe, get_recipe
    from replay.runner.run_spec import RecipeSpec
    from replay.sessions.lanes import LaneConfig
    from replay.sessions.start_points import StartAt

    load = spec.load
    if opts.get("start_at"):
        try:
            start = StartAt.parse(opts["start_at"])
        except ValueError as exc:
            raise _bad("--start-at", str(exc)) from None
        load = dataclasses.replace(load, lanes=LaneConfig(start_at=start))
    arrivals = None
    if opts.get("arrivals"):
        try:
            arrivals = Arrivals.parse(opts["arrivals"])
        except ValueError as exc:
            raise _bad("--arrivals", str(exc)) from None
        if opts.get("start_at") or opts.get("recipe") == "agentx":
            raise _bad("--arrivals", "open-loop sessions start at turn 0: not with --start-at or --recipe agentx")
    try:
        minimum = parse_duration(opts.get("recipe_min_duration"))
    except click.BadParameter as exc:
        raise _bad("--recipe-min-duration", exc.message) from None
    facts = RecipeFacts(
        fingerprint=_fingerprint(opts.get("recipe_fingerprint")),
        gpus=_one(opts.get("gpus")),
        power_kw=_one(opts.get("power_kw")),
        price_per_hour=_one(opts.get("price_per_hour")),
        min_duration_s=minimum,
        slo_tiers=_tiers(tuple(opts.get("slo_tiers") or ())) or DEFAULT_SLO_TIERS,
    )
    loop = dataclasses.replace(spec.loop, arrivals=arrivals, max_live=opts.get("max_live"))
    recipe = RecipeSpec(opts.get("recipe"), facts)
    spec = dataclasses.replace(spec, load=load, loop=loop, recipe_spec=recipe)
    if opts.get("recipe"):
        asked = {k for k in ("duration", "tasks") if opts.get(k) is not None}
        spec = apply_recipe(spec, get_recipe(opts["recipe"]), asked)
    return spec


def _fingerprint(text: str | None) -> str | None:
    """A workload fingerprint as ``replay inspect`` prints it (``sha256:`` and 64 hex digits)."""
    if text is None:
        return None
    value = text.strip().lower()
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", value):
        raise _bad("--recipe-fingerprint", f"{text!r}: expected sha256: and 64 hex digits, as replay inspect prints")
    return value


def _one(value: Any) -> Any:
    """One host's value of a repeatable hardware option (study_options.HARDWARE: once per --host)."""
    if not isinstance(value, tuple):
        return value
    return value[0] if len(value) == 1 else None  # several: one per --host (study_options.hardware checks them)
