"""The Pareto frontier of a sweep: a per-user speed against throughput per GPU (the trade-off every host makes).

Each level is a point: x a per-user speed (``--frontier-x``; by default the per-user decode speed after the first
token at p25, the project's headline speed; ``interactivity_e2e_p90`` sets the point on InferenceX's AgentX chart),
y the total throughput (cached input + new input + output tokens/s) per GPU. A level is on the frontier when no
other level is at least as good on both and better on one: those are the settings worth choosing from; the rest
are dominated. Without a GPU count the throughput is per host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from replay.errors import ReplayError
from replay.metrics.level_figures import value

SPEED = "user_decode_tps.p25"
THROUGHPUT = "throughput.total_tps"
OUTPUT = "throughput.output_tps"
DEFAULT_X = "user_decode_tps_p25"

# the speeds a frontier may be drawn on: NAME_pNN is the summary's NAME.pNN (every one of them higher-is-better)
_X_FIGURES = {
    "user_decode_tps": ("per-user decode speed", (25, 50, 75)),
    "interactivity_e2e": ("E2E-normalised interactivity", (50, 75, 90, 95)),
    "interactivity": ("interactivity (1/ITL)", (50, 75, 90, 95)),
    "user_output_tps_incl_wait": ("per-user tokens/s incl. wait", (25, 50)),
}


class FrontierError(ReplayError, ValueError):
    """A --frontier-x that names no speed a frontier can be drawn on."""


@dataclass(frozen=True, slots=True)
class Axis:
    """The frontier's x: ``name`` as given (``interactivity_e2e_p90``), ``path`` in the summary, a label."""

    name: str
    path: str
    label: str

    @classmethod
    def parse(cls, name: str | None) -> Axis:
        name = name or DEFAULT_X
        m = re.fullmatch(r"(\w+?)_p(\d+)", name)
        known = ", ".join(f"{k}_p{p}" for k, (_, ps) in _X_FIGURES.items() for p in ps)
        if not m or m.group(1) not in _X_FIGURES or int(m.group(2)) not in _X_FIGURES[m.group(1)][1]:
            raise FrontierError(f"--frontier-x {name!r}: expected one of {known}")
        figure, pct = m.group(1), m.group(2)
        return cls(name, f"{figure}.p{pct}", f"{_X_FIGURES[figure][0]} p{pct} (tokens/s)")


def point(concurrency: int, summary: dict[str, Any], gpus: int | None, axis: Axis | None = None) -> dict[str, Any]:
    """One level as a frontier point (throughput per GPU when ``gpus`` is known, else per host); ``x`` is the
    chosen axis' value, also under its own name (and the decode p25 always, as before ``--frontier-x``)."""
    axis = axis or Axis.parse(None)
    div = gpus or 1
    total, out = value(summary, THROUGHPUT), value(summary, OUTPUT)
    return {
        "concurrency": concurrency,
        "x": value(summary, axis.path),
        axis.name: value(summary, axis.path),
        "user_decode_tps_p25": value(summary, SPEED),
        "total_tps_per_gpu": None if total is None else total / div,
        "output_tps_per_gpu": None if out is None else out / div,
    }


def _dominates(q: dict[str, Any], p: dict[str, Any]) -> bool:
    xs, ys = (q["x"], p["x"]), (q["total_tps_per_gpu"], p["total_tps_per_gpu"])
    return xs[0] >= xs[1] and ys[0] >= ys[1] and (xs[0] > xs[1] or ys[0] > ys[1])


def level_points(levels: list[tuple[int, dict[str, Any]]], gpus: int | None, axis: Axis) -> list[dict[str, Any]]:
    """Every level with both figures, as points."""
    points = [point(c, s, gpus, axis) for c, s in levels]
    return [p for p in points if p["x"] is not None and p["total_tps_per_gpu"] is not None]


def pareto_frontier(
    levels: list[tuple[int, dict[str, Any]]], gpus: int | None, axis: Axis | None = None
) -> list[dict[str, Any]]:
    """The levels no other level dominates, fastest per user first (levels missing either figure left out)."""
    points = level_points(levels, gpus, axis or Axis.parse(None))
    front = [p for p in points if not any(_dominates(q, p) for q in points if q is not p)]
    return sorted(front, key=lambda p: (-p["x"], p["concurrency"]))
