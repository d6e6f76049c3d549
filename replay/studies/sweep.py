"""``replay sweep``: one run per concurrency level, a sweep index beside the run files, and the table, the knee and
the frontier made from them.

The index (``sweep.json``, format ``replay.sweep/1``) says how the sweep was made (host, window, warm-up, rule,
SLO, hardware) and names each level's run file, relative to itself; ``replay report sweep.json`` rebuilds every
figure from those run files, as ``replay report`` does for one run. It is rewritten after every level, so a
sweep cut short keeps what it measured. A virtual-clock sweep has run files too (an index written before it had
holds each level's summary instead).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from replay import __version__
from replay.hosts.hardware import Hardware, per_unit
from replay.metrics.level_figures import value
from replay.studies.frontier import Axis, level_points, pareto_frontier
from replay.studies.knee import Rule, SloRule, find_knee, parse_rule, slo_checks
from replay.studies.levels import Level, Runner
from replay.studies.study_files import level_entry, level_summary, read_index, run_path, write_json
from replay.verdict.thresholds import Threshold, parse_all

SWEEP_FORMAT = "replay.sweep/1"
SESSIONS_RESTARTED = (
    "restarted per level: each level is its own run (fresh sessions, the task order from the seed; the embedded"
    " simulated host restarted, a real host keeps whatever state it has)"
)


@dataclass(slots=True)
class SweepPlan:
    """How a sweep is made; ``public()`` is what its index and its JSON say about it."""

    levels: list[int]
    window_s: float
    warmup_s: float | None  # None: the recipe's warm-up (``warmup_per_lane``) opens each level's window
    host: str  # a URL, or sim:PROFILE
    mode: str = "real time"  # or "virtual clock"
    hardware: Hardware = field(default_factory=Hardware)
    knee: str = "growth"  # the rule as given (replay.studies.knee.parse_rule)
    slo: tuple[str, ...] = ()
    command: str = ""
    frontier_x: str = "user_decode_tps_p25"  # the frontier's x (replay.studies.frontier.Axis)
    goodput_slo: tuple[str, ...] = ()  # each level's per-call SLO (its run header's; the levels' goodput)
    recipe: str | None = None  # each level a run by this recipe's rules (--recipe; replay.runner.recipes)
    warmup_per_lane: int | None = None  # the recipe's warm-up: calls per lane before the barrier opens the window

    def public(self) -> dict[str, Any]:
        return {
            "format": SWEEP_FORMAT,
            "replay_version": __version__,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": self.command,
            "host": self.host,
            "mode": self.mode,
            "concurrency": self.levels,
            "window_s": self.window_s,
            "warmup_s": self.warmup_s,
            "sessions": SESSIONS_RESTARTED,
            "hardware": self.hardware.public(),
            "knee_rule": self.knee,
            "slo": list(self.slo),
            "goodput_slo": list(self.goodput_slo),
            "frontier_x": self.frontier_x,
            "recipe": self.recipe,
            "warmup_per_lane": self.warmup_per_lane,
        }


def rules(index: dict[str, Any]) -> tuple[Rule, tuple[Threshold, ...]]:
    """The knee rule and the SLO an index names (ValueError / ThresholdError when they do not parse; the frontier's
    axis too, FrontierError)."""
    slo = tuple(parse_all(index.get("slo") or []))
    Axis.parse(index.get("frontier_x"))
    return parse_rule(index.get("knee_rule") or "growth", slo), slo


def level_row(lv: Level, hw: Hardware, slo: tuple[Threshold, ...]) -> dict[str, Any]:
    """One level of the JSON: its concurrency and run file (``run_file``), its whole summary (the summary's own
    ``concurrency``, the lanes it delivered, as ``concurrency_delivered``), throughput per GPU, its SLO."""
    summary = {("concurrency_delivered" if k == "concurrency" else k): v for k, v in lv.summary.items()}
    row: dict[str, Any] = {"concurrency": lv.concurrency, "run_file": lv.run, **summary}
    row["per_gpu"] = {
        "total_tps": per_unit(value(lv.summary, "throughput.total_tps"), hw)["per_gpu"],
        "output_tps": per_unit(value(lv.summary, "throughput.output_tps"), hw)["per_gpu"],
    }
    if slo:
        checks = slo_checks(lv.summary, slo)
        row["slo_ok"], row["slo_checks"] = all(c["ok"] for c in checks), checks
    return row


def build(index: dict[str, Any], levels: list[Level]) -> dict[str, Any]:
    """The sweep's JSON: the index's facts, every level, the knee and the Pareto frontier (and with an SLO, the
    last level before it breaks: the capacity at the sweep's resolution)."""
    hw = Hardware.from_public(index.get("hardware"))
    rule, slo = rules(index)
    pairs = [(lv.concurrency, lv.summary) for lv in levels]
    extra = {"slo_knee": find_knee(pairs, SloRule(slo))} if slo else {}
    axis = Axis.parse(index.get("frontier_x"))
    return {
        **{k: v for k, v in index.items() if k != "levels"},
        "frontier_x": axis.name,  # an index written before --frontier-x has the default
        "levels": [level_row(lv, hw, slo) for lv in levels],
        "knee": find_knee(pairs, rule),
        **extra,
        "frontier": pareto_frontier(pairs, hw.gpus, axis),
        "frontier_points": level_points(pairs, hw.gpus, axis),  # every level with both figures (the page's grey)
        "frontier_axes": {
            "x": axis.path,
            "x_label": axis.label,
            "y": "throughput.total_tps per GPU" if hw.gpus else "per host",
        },
    }


def write_index(path: Path, plan: SweepPlan, levels: list[Level], created: str | None = None) -> dict[str, Any]:
    index = plan.public() | ({"created": created} if created else {})
    index["levels"] = [level_entry(lv, path.parent) for lv in levels]
    write_json(path, index)
    return index


def run_sweep(
    plan: SweepPlan, runner: Runner, index_path: Path | None, on_level: Callable[[Level], None] | None = None
) -> dict[str, Any]:
    """Every level in order; the index rewritten after each one. Returns the sweep's JSON."""
    rules(plan.public())  # a bad rule or SLO stops here, before any run
    levels: list[Level] = []
    index = plan.public()
    for c in plan.levels:
        levels.append(runner(c, 1))
        if index_path is not None:
            index = write_index(index_path, plan, levels, index["created"])
        if on_level:
            on_level(levels[-1])
    return build(index, levels)


def load_sweep(path: str | Path) -> dict[str, Any]:
    """Rebuild a sweep's JSON from its index and run files (ValueError naming the file when it cannot)."""
    path = Path(path)
    index = read_index(path, SWEEP_FORMAT)
    levels = [Level(e["concurrency"], level_summary(e, path), run_path(e, path)) for e in index.get("levels", [])]
    return build(index, levels)
