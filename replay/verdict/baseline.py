"""Regression gates: tonight's run against last night's (``--baseline RUN``), the same figures, with their noise.

Each figure is compared in the direction that is better for it (throughput and speed up, latency and errors down).
A figure regressed when it is worse than the baseline's by more than the tolerance (``--baseline-tolerance``, 10 %
by default) plus twice its noise: the standard error of the figure estimated from the spread of the runs' window
figures (each run's windows give the figure's spread; a run without windows counts as noiseless). A regression fails
the run with the threshold's exit code (2).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

# (summary path, window series key or None, True when higher is better)
FIGURES = (
    (("throughput", "total_tps"), "total_tps", True),
    (("throughput", "output_tps"), "output_tps", True),
    (("ttft_s", "p50"), "ttft_p50_s", False),
    (("ttft_s", "p95"), "ttft_p95_s", False),
    (("e2e_s", "p50"), None, False),
    (("user_decode_tps", "p25"), "user_decode_tps_p25", True),
    (("user_decode_tps", "p50"), "user_decode_tps_p50", True),
    (("cache", "host_hit_ratio"), "host_hit_ratio", True),
    (("error_rate",), None, False),
)
ERROR_RATE_FLOOR = 0.005  # half a point of errors more is never noise-free worse on its own


def _get(summary: dict[str, Any], path: tuple[str, ...]) -> float | None:
    node: Any = summary
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return float(node) if isinstance(node, int | float) and not isinstance(node, bool) else None


def _noise(summary: dict[str, Any], key: str | None) -> float:
    """Relative standard error of a figure from the run's windows (0 without enough of them)."""
    values = [w[key] for w in summary.get("windows") or () if key and isinstance(w.get(key), int | float)]
    values = [v for v in values if v]
    if len(values) < 3:
        return 0.0
    return statistics.stdev(values) / statistics.fmean(values) / math.sqrt(len(values))


def compare(current: dict[str, Any], baseline: dict[str, Any], tolerance: float) -> dict[str, Any]:
    """Every figure of FIGURES side by side; ``regressed`` lists those worse beyond tolerance and noise."""
    rows = []
    for path, key, higher in FIGURES:
        now, before = _get(current, path), _get(baseline, path)
        name = ".".join(path)
        if now is None or before is None:
            rows.append({"figure": name, "baseline": before, "current": now, "regressed": False})
            continue
        noise = math.hypot(_noise(current, key), _noise(baseline, key))
        allowed = tolerance + 2 * noise
        if name == "error_rate":
            regressed = now > before * (1 + allowed) + ERROR_RATE_FLOOR
        elif higher:
            regressed = now < before * (1 - allowed)
        else:
            regressed = now > before * (1 + allowed)
        change = (now - before) / before if before else None
        rows.append({"figure": name, "baseline": before, "current": now, "change": change, "noise": noise,
                     "allowed": allowed, "regressed": regressed})  # fmt: skip
    return {"tolerance": tolerance, "figures": rows, "regressed": [r["figure"] for r in rows if r["regressed"]]}


def apply(summary: dict[str, Any], result: dict[str, Any], path: str) -> None:
    """Put the comparison in the summary and fail its verdict (code 2) when a figure regressed."""
    summary["baseline"] = {"file": path, **result}
    verdict = summary.get("verdict")
    if verdict is None or not result["regressed"]:
        return
    verdict["reasons"].append("regressed against the baseline: " + ", ".join(result["regressed"]))
    if verdict["exit_code"] in (0,):
        verdict["exit_code"], verdict["passed"] = 2, False
