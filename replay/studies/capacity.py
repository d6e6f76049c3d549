"""``replay capacity --slo ...``: the most concurrent agents a host serves while every SLO threshold holds.

An adaptive search rather than a sweep: it **grows** the concurrency (×2 by default) from ``start`` until a level
breaks the SLO or ``limit`` is reached, **bisects** between the highest level that held and the lowest that
broke until they are one agent apart, then **repeats** the boundary level; if a repeat breaks, that level counts
as broken and the search goes on below it. A level holds only if every run of it held. The answer is the highest
level that held below the lowest that broke (``bracket``), a pure function of the probes, so ``replay report``
recomputes it from the run files. It assumes that a host that breaks the SLO at N agents breaks it at more; a
level above the boundary that held anyway is reported, not hidden.

The answer is also given per GPU, per kW and per MW of accelerator power, and per dollar-hour, where the hardware
is known (replay.hosts.hardware).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from replay import __version__
from replay.hosts.hardware import POWER_NOTE, Hardware, per_unit
from replay.metrics.level_figures import value
from replay.studies.knee import slo_checks
from replay.studies.levels import VIRTUAL_MODE, Level, Runner
from replay.studies.study_files import level_entry, level_summary, read_index, run_path, write_json
from replay.verdict.thresholds import Threshold, parse_all

CAPACITY_FORMAT = "replay.capacity/1"


@dataclass(slots=True)
class CapacityPlan:
    slo: tuple[str, ...]
    window_s: float
    warmup_s: float
    host: str
    start: int = 1
    limit: int = 256
    factor: float = 2.0
    repeats: int = 1
    mode: str = "real time"
    hardware: Hardware = field(default_factory=Hardware)
    command: str = ""
    goodput_slo: tuple[str, ...] = ()  # each probe's per-call SLO (its run header's; the probes' goodput)
    tiers: tuple[dict[str, Any], ...] = ()  # --tier: each tier's public form (replay.studies.tiers), searched at once

    def public(self) -> dict[str, Any]:
        tiers = {"tiers": list(self.tiers)} if self.tiers else {}
        return {
            "format": CAPACITY_FORMAT,
            "replay_version": __version__,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": self.command,
            "host": self.host,
            "mode": self.mode,
            "slo": list(self.slo),
            "goodput_slo": list(self.goodput_slo),
            "window_s": self.window_s,
            "warmup_s": self.warmup_s,
            "search": {"start": self.start, "max": self.limit, "grow_factor": self.factor, "repeats": self.repeats},
            "hardware": self.hardware.public(),
            **tiers,
        }


@dataclass(slots=True)
class Probe:
    level: Level
    step: str  # grow | bisect | repeat
    checks: list[dict[str, Any]]

    @property
    def ok(self) -> bool:
        return all(c["ok"] for c in self.checks)


def bracket(probes: list[Probe]) -> tuple[int, int | None]:
    """(highest level that always held below the lowest that broke, that lowest broken level or None)."""
    broken = [p.level.concurrency for p in probes if not p.ok]
    hi = min(broken) if broken else None
    held = {p.level.concurrency for p in probes if hi is None or p.level.concurrency < hi}
    held -= set(broken)
    return (max(held) if held else 0), hi


def search(
    runner: Runner,
    slo: tuple[Threshold, ...],
    plan: CapacityPlan,
    on_probe: Callable[[list[Probe]], None] | None = None,
) -> list[Probe]:
    """Grow, bisect, repeat the boundary; every probe in the order it ran (``on_probe`` sees them after each)."""
    probes: list[Probe] = []

    def probe(c: int, step: str) -> bool:
        attempt = 1 + sum(p.level.concurrency == c for p in probes)
        level = runner(c, attempt)
        probes.append(Probe(level, step, slo_checks(level.summary, slo)))
        if on_probe:
            on_probe(probes)
        return probes[-1].ok

    c = max(1, min(plan.start, plan.limit))
    while probe(c, "grow") and c < plan.limit:
        c = min(plan.limit, max(c + 1, math.ceil(c * plan.factor)))
    while True:
        lo, hi = bracket(probes)
        while hi is not None and hi - lo > 1:
            probe((lo + hi) // 2, "bisect")
            lo, hi = bracket(probes)
        runs_at_lo = sum(p.level.concurrency == lo for p in probes)
        if lo == 0 or runs_at_lo > plan.repeats:
            return probes
        probe(lo, "repeat")


def probe_row(p: Probe, slo: tuple[Threshold, ...]) -> dict[str, Any]:
    s = p.level.summary
    return {
        "concurrency": p.level.concurrency,
        "attempt": p.level.attempt,
        "step": p.step,
        "ok": p.ok,
        "checks": p.checks,
        "run_file": p.level.run,
        "figures": {
            k: value(s, k)
            for k in ("throughput.total_tps", "throughput.output_tps", "ttft_s.p95", "user_decode_tps.p25")
        },
    }


def _margin(check: dict[str, Any], t: Threshold) -> float | None:
    """How far a value is inside its threshold, as a share of the threshold (negative: outside)."""
    v = check["value"]
    if v is None or not t.value:
        return None
    return (t.value - v) / abs(t.value) if t.op in ("<", "<=") else (v - t.value) / abs(t.value)


def uncertainty(
    probes: list[Probe], slo: tuple[Threshold, ...], lo: int, hi: int | None, virtual: bool = False
) -> dict[str, Any]:
    """What the answer rests on: the bracket, the boundary's runs and their headroom, levels out of order. On the
    virtual clock a level run again is the same run (deterministic): no repeat is evidence of anything."""
    at_lo = [p for p in probes if p.level.concurrency == lo]
    margins = [[_margin(c, t) for c, t in zip(p.checks, slo, strict=True)] for p in at_lo]
    out_of_order = sorted({p.level.concurrency for p in probes if p.ok and hi is not None and p.level.concurrency > hi})
    words = []
    if hi is None:
        words.append(f"every probe held up to the search's --max: the capacity is at least {lo}")
    elif lo == 0:
        words.append(f"no level held: {hi} agent(s) already break the SLO")
    else:
        words.append(f"{lo} held and {hi} broke: the answer is exact to {hi - lo} agent(s) at this window")
    if virtual:
        again = f" ({lo} was run {len(at_lo)} times: the same run each time)" if len(at_lo) > 1 else ""
        words.append(
            f"the virtual clock is deterministic: each level ran once, with no run-to-run noise to show{again}"
        )
    elif len(at_lo) > 1:
        words.append(f"{lo} was run {len(at_lo)} times and held every time")
    if out_of_order:
        words.append(f"levels {out_of_order} above the boundary held anyway: the SLO is not monotone here")
    return {
        "bracket": [lo, hi],
        "boundary_runs": len(at_lo),
        "boundary_margins": margins,
        "levels_out_of_order": out_of_order,
        "text": "; ".join(words) + ".",
    }


def result(plan_public: dict[str, Any], probes: list[Probe]) -> dict[str, Any]:
    """The capacity JSON: the answer, per GPU / kW / MW / dollar-hour, every probe, and its uncertainty."""
    slo = tuple(parse_all(plan_public.get("slo") or []))
    hw = Hardware.from_public(plan_public.get("hardware"))
    lo, hi = bracket(probes)
    full = hi if hi is not None else plan_public.get("search", {}).get("max", lo)
    return {
        **{k: v for k, v in plan_public.items() if k != "probes"},
        "max_concurrency": lo,
        "first_broken": hi,
        **per_unit(float(lo), hw),
        "power_note": POWER_NOTE if hw.power_kw else "no accelerator power given (--power-kw): no per-kW/MW figures",
        "runs": len(probes),
        "full_sweep_runs": full,
        "probes": [probe_row(p, slo) for p in probes],
        "uncertainty": uncertainty(probes, slo, lo, hi, plan_public.get("mode") == VIRTUAL_MODE),
    }


def write_index(path: Path, plan_public: dict[str, Any], probes: list[Probe]) -> None:
    """The search's index: how it was made and each probe's run file (or summary), in the order they ran."""
    entries = [level_entry(p.level, path.parent) | {"step": p.step} for p in probes]
    write_json(path, {**plan_public, "probes": entries})


def load_capacity(path: str | Path) -> dict[str, Any]:
    """Rebuild a capacity search's JSON from its index and run files, judging each probe again (a search of
    several tiers: ``replay.studies.tiers.load_tiers``)."""
    path = Path(path)
    index = read_index(path, CAPACITY_FORMAT)
    slo = tuple(parse_all(index.get("slo") or []))
    probes = []
    for e in index.get("probes", []):
        level = Level(e["concurrency"], level_summary(e, path), run_path(e, path), e.get("attempt", 1))
        probes.append(Probe(level, e.get("step", "grow"), slo_checks(level.summary, slo)))
    return result(index, probes)
