"""``replay capacity --tier NAME:TTFT:SPEED``: the most concurrent agents for each of several SLO tiers, in one job.

A tier is AA-AgentPerf's shape (docs/recipes.md): a time-to-first-token limit and a per-user output speed floor,
judged as replay reads AA's "at least 75 % of calls meet both": ``ttft_p75<=TTFT`` and ``user_decode_tps_p25>=SPEED``.
``--tier aa`` is the AA tiers replay ships (``runner.recipes.DEFAULT_SLO_TIERS``).

Each tier gets the capacity search of ``studies.capacity`` (grow, bisect, repeat the boundary), in the order given,
and every level run for one tier is reused by the others: a level is one run, judged against each tier that asks for
it. A tier's probes are exactly those its own search would make, and each probe's run is the run that search would
make (a level and its attempt; on the virtual clock a run is deterministic), so each tier's answer is the answer of a
search for it alone, in fewer runs than separate searches (``runs`` beside ``separate_runs``). The search is a pure
function of the levels, so ``replay report`` repeats it over the index's levels without running any.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.hosts.hardware import POWER_NOTE, Hardware, per_unit
from replay.metrics.level_figures import value
from replay.runner.recipes import DEFAULT_SLO_TIERS
from replay.studies.capacity import CapacityPlan, Probe, bracket, search, uncertainty
from replay.studies.levels import VIRTUAL_MODE, Level, Runner
from replay.studies.study_files import level_entry, level_summary, run_path, write_json
from replay.verdict.thresholds import parse_all

PRESETS = {"aa": DEFAULT_SLO_TIERS}
FIGURES = ("throughput.total_tps", "throughput.output_tps", "ttft_s.p75", "user_decode_tps.p25")


@dataclass(frozen=True, slots=True)
class Tier:
    name: str
    ttft_s: float
    speed_tps: float

    @property
    def slo(self) -> tuple[str, ...]:
        return f"ttft_p75<={self.ttft_s:g}s", f"user_decode_tps_p25>={self.speed_tps:g}"

    def public(self) -> dict[str, Any]:
        return {"name": self.name, "ttft_s": self.ttft_s, "speed_tps": self.speed_tps, "slo": list(self.slo)}


_SECONDS = re.compile(r"(\d+(?:\.\d+)?)(ms|s)?")


def parse_tiers(texts: tuple[str, ...] | list[str]) -> list[Tier]:
    """``NAME:TTFT:SPEED`` (TTFT in seconds, or with ``s``/``ms``; SPEED tokens/s per user) or a preset's name
    (``aa``); ValueError naming the one that is not."""
    tiers: list[Tier] = []
    for text in texts:
        text = text.strip()
        if text in PRESETS:
            tiers += [Tier(n, t, s) for n, t, s in PRESETS[text]]
            continue
        parts = text.split(":")
        ttft = _SECONDS.fullmatch(parts[1].strip()) if len(parts) == 3 else None
        speed = parts[2].strip() if len(parts) == 3 else ""
        if not parts[0].strip() or ttft is None or not re.fullmatch(r"\d+(?:\.\d+)?", speed):
            presets = ", ".join(PRESETS)
            raise ValueError(f"{text!r}: expected NAME:TTFT:SPEED (e.g. fast:2s:60, TTFT in s or ms, SPEED tok/s per "
                             f"user) or a preset ({presets})")  # fmt: skip
        scale = 1e-3 if ttft.group(2) == "ms" else 1.0
        tiers.append(Tier(parts[0].strip(), float(ttft.group(1)) * scale, float(speed)))
    names = [t.name for t in tiers]
    if len(set(names)) != len(names):
        raise ValueError(f"tier names must differ: {', '.join(names)}")
    return tiers


def search_tiers(
    runner: Runner,
    tiers: list[Tier],
    plan: CapacityPlan,
    on_probe: Callable[[Tier, list[Probe], bool], None] | None = None,
) -> tuple[dict[str, list[Probe]], list[Level]]:
    """Each tier's search, in order, over shared levels: ({tier: its probes}, the levels run, in the order they ran).
    ``on_probe(tier, probes, ran)``: after each probe, ``ran`` False when the level was reused."""
    levels: dict[tuple[int, int], Level] = {}
    ran: list[Level] = []
    fresh = [False]

    def shared(concurrency: int, attempt: int) -> Level:
        key = (concurrency, attempt)
        fresh[0] = key not in levels
        if fresh[0]:
            levels[key] = runner(concurrency, attempt)
            ran.append(levels[key])
        return levels[key]

    out: dict[str, list[Probe]] = {}
    for tier in tiers:

        def seen(probes: list[Probe], tier: Tier = tier) -> None:
            if on_probe:
                on_probe(tier, probes, fresh[0])

        out[tier.name] = search(shared, tuple(parse_all(tier.slo)), plan, seen)
    return out, ran


def tiers_result(plan_public: dict[str, Any], per_tier: dict[str, list[Probe]], ran: list[Level]) -> dict[str, Any]:
    """The JSON of a tiered search: per tier its answer per GPU / kW / MW / dollar-hour, its probes and uncertainty;
    every level run once, and how many runs separate searches would have made."""
    hw = Hardware.from_public(plan_public.get("hardware"))
    virtual = plan_public.get("mode") == VIRTUAL_MODE
    tiers = []
    for t in plan_public["tiers"]:
        probes, slo = per_tier[t["name"]], tuple(parse_all(t["slo"]))
        lo, hi = bracket(probes)
        tiers.append({
            **t, "max_concurrency": lo, "first_broken": hi, **per_unit(float(lo), hw), "runs": len(probes),
            "probes": [{"concurrency": p.level.concurrency, "attempt": p.level.attempt, "step": p.step, "ok": p.ok,
                        "checks": p.checks} for p in probes],
            "uncertainty": uncertainty(probes, slo, lo, hi, virtual),
        })  # fmt: skip
    return {
        **{k: v for k, v in plan_public.items() if k != "levels"},
        "tiers": tiers,
        "runs": len(ran),
        "separate_runs": sum(len(p) for p in per_tier.values()),
        "power_note": POWER_NOTE if hw.power_kw else "no accelerator power given (--power-kw): no per-kW/MW figures",
        "levels": [
            {
                "concurrency": lv.concurrency,
                "attempt": lv.attempt,
                "run_file": lv.run,
                "figures": {k: value(lv.summary, k) for k in FIGURES},
            }
            for lv in ran
        ],
    }


def write_tiers_index(path: Path, plan_public: dict[str, Any], ran: list[Level]) -> None:
    """The index: how the search was made, its tiers, and each level's run file (or summary) in the order run."""
    write_json(path, {**plan_public, "levels": [level_entry(lv, path.parent) for lv in ran]})


def load_tiers(path: Path, index: dict[str, Any]) -> dict[str, Any]:
    """A tiered search rebuilt from its index: the same searches repeated over the levels it ran (none run again)."""
    known = {
        (e["concurrency"], e.get("attempt", 1)): Level(
            e["concurrency"], level_summary(e, path), run_path(e, path), e.get("attempt", 1)
        )
        for e in index.get("levels", [])
    }

    def recorded(concurrency: int, attempt: int) -> Level:
        if (concurrency, attempt) not in known:
            raise ValueError(f"{path}: the search needs level {concurrency} (attempt {attempt}), which it never ran")
        return known[(concurrency, attempt)]

    s = index.get("search") or {}
    plan = CapacityPlan((), 0.0, 0.0, index.get("host", ""), s.get("start", 1), s.get("max", 256),
                        s.get("grow_factor", 2.0), s.get("repeats", 1))  # fmt: skip
    tiers = [Tier(t["name"], t["ttft_s"], t["speed_tps"]) for t in index["tiers"]]
    per_tier, ran = search_tiers(recorded, tiers, plan)
    return tiers_result(index, per_tier, ran)
