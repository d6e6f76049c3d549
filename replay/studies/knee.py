"""The knee of a sweep: the load level past which more agents stop paying, named with the rule that found it.

Two rules, each stated in the output:

- **growth** (default, ``growth:10%``): the smallest level from which no higher level gains at least the stated
  fraction of total throughput per doubling of sessions. Level j counts as still growing from level i when
  ``T_j ≥ T_i × (1 + f) ^ log2(c_j / c_i)``: 10 % per doubling is 10 % from 8 to 16 sessions, about 3 % from 8 to
  10. Comparing each level with every higher one (not only its neighbour) keeps one noisy dip from passing for
  a knee. With no such level below the top one, throughput is still growing and there is no knee in the sweep.
- **slo** (``--knee slo``): the last level before the first that breaks the ``--slo`` thresholds
  (replay.verdict.thresholds), counting up from the lowest level.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from replay.metrics.level_figures import value, with_derived
from replay.verdict.thresholds import Threshold

DEFAULT_GROWTH = 0.10
THROUGHPUT = "throughput.total_tps"


@dataclass(frozen=True, slots=True)
class GrowthRule:
    fraction: float = DEFAULT_GROWTH
    figure: str = THROUGHPUT

    def describe(self) -> str:
        return (
            f"growth: the smallest level from which no higher level gains {self.fraction:.0%} or more total"
            " throughput per doubling of sessions"
        )


@dataclass(frozen=True, slots=True)
class SloRule:
    thresholds: tuple[Threshold, ...]

    def describe(self) -> str:
        return "slo: the last level before the first that breaks " + ", ".join(t.expr for t in self.thresholds)


Rule = GrowthRule | SloRule


def parse_rule(text: str, slo: tuple[Threshold, ...]) -> Rule:
    """``growth:F`` (F a fraction or a percentage) or ``slo``; ValueError naming what is wrong."""
    text = text.strip()
    if text == "slo":
        if not slo:
            raise ValueError("--knee slo needs --slo thresholds")
        return SloRule(slo)
    m = re.fullmatch(r"growth(?::(\d+(?:\.\d+)?)(%?))?", text)
    if not m:
        raise ValueError(f"--knee {text!r}: expected growth, growth:10%, growth:0.1 or slo")
    if m.group(1) is None:
        return GrowthRule()
    fraction = float(m.group(1)) / (100 if m.group(2) else 1)
    if not 0 < fraction < 10:
        raise ValueError(f"--knee {text!r}: the growth fraction must be above 0 (e.g. 10%)")
    return GrowthRule(fraction)


def slo_checks(summary: dict[str, Any], slo: tuple[Threshold, ...]) -> list[dict[str, Any]]:
    """Each threshold judged against one level's summary (``error_rate`` filled in)."""
    s = with_derived(summary)
    return [t.judge(s) for t in slo]


def find_knee(levels: list[tuple[int, dict[str, Any]]], rule: Rule) -> dict[str, Any]:
    """``{concurrency, rule, kind, note}``: the knee of ``(concurrency, summary)`` levels, or None with why."""
    ordered = sorted(levels, key=lambda lv: lv[0])
    if isinstance(rule, SloRule):
        return _slo_knee(ordered, rule)
    return _growth_knee(ordered, rule)


def _growth_knee(levels: list[tuple[int, dict[str, Any]]], rule: GrowthRule) -> dict[str, Any]:
    points = [(c, t) for c, s in levels if (t := value(s, rule.figure)) is not None]
    out: dict[str, Any] = {"concurrency": None, "rule": rule.describe(), "kind": "growth", "fraction": rule.fraction}
    if len(points) < 2:
        return out | {"note": "fewer than two levels with a throughput: no knee"}
    for i, (c_i, t_i) in enumerate(points[:-1]):
        growing = any(t_j >= t_i * (1 + rule.fraction) ** math.log2(c_j / c_i) for c_j, t_j in points[i + 1 :])
        if not growing:
            return out | {"concurrency": c_i, "note": f"throughput {t_i:,.0f} tok/s at {c_i} sessions"}
    return out | {"note": f"throughput still grows at {points[-1][0]} sessions, the top level: no knee in the sweep"}


def _slo_knee(levels: list[tuple[int, dict[str, Any]]], rule: SloRule) -> dict[str, Any]:
    out: dict[str, Any] = {"concurrency": None, "rule": rule.describe(), "kind": "slo"}
    last_ok = None
    for c, s in levels:
        broken = [j["expr"] for j in slo_checks(s, rule.thresholds) if not j["ok"]]
        if broken:
            if last_ok is None:
                return out | {"note": f"the lowest level ({c} sessions) already breaks {', '.join(broken)}"}
            return out | {"concurrency": last_ok, "note": f"{c} sessions break {', '.join(broken)}"}
        last_ok = c
    return out | {"note": "every level meets the SLO: the knee is beyond the sweep"}
