"""The Pareto frontier of a sweep: per-user speed against throughput per GPU (the trade-off every host makes).

Each level is a point: x the per-user decode speed after the first token at p25 (the project's headline speed:
three users in four get it or better), y the total throughput (cached input + new input + output tokens/s) per
GPU. A level is on the frontier when no other level is at least as good on both and better on one: those are
the settings worth choosing from; the rest are dominated. Without a GPU count the throughput is per host.
"""

from __future__ import annotations

from typing import Any

from replay.metrics.level_figures import value

SPEED = "user_decode_tps.p25"
THROUGHPUT = "throughput.total_tps"
OUTPUT = "throughput.output_tps"


def point(concurrency: int, summary: dict[str, Any], gpus: int | None) -> dict[str, Any]:
    """One level as a frontier point (throughput per GPU when ``gpus`` is known, else per host)."""
    div = gpus or 1
    total, out = value(summary, THROUGHPUT), value(summary, OUTPUT)
    return {
        "concurrency": concurrency,
        "user_decode_tps_p25": value(summary, SPEED),
        "total_tps_per_gpu": None if total is None else total / div,
        "output_tps_per_gpu": None if out is None else out / div,
    }


def _dominates(q: dict[str, Any], p: dict[str, Any]) -> bool:
    xs, ys = (q["user_decode_tps_p25"], p["user_decode_tps_p25"]), (q["total_tps_per_gpu"], p["total_tps_per_gpu"])
    return xs[0] >= xs[1] and ys[0] >= ys[1] and (xs[0] > xs[1] or ys[0] > ys[1])


def pareto_frontier(levels: list[tuple[int, dict[str, Any]]], gpus: int | None) -> list[dict[str, Any]]:
    """The levels no other level dominates, fastest per user first (levels missing either figure left out)."""
    points = [point(c, s, gpus) for c, s in levels]
    points = [p for p in points if p["user_decode_tps_p25"] is not None and p["total_tps_per_gpu"] is not None]
    front = [p for p in points if not any(_dominates(q, p) for q in points if q is not p)]
    return sorted(front, key=lambda p: (-p["user_decode_tps_p25"], p["concurrency"]))
