"""Regression gates: tonight's run against last night's (``--baseline RUN``), the same figures, with their noise.

Each figure is compared in the direction that is better for it (throughput and speed up, latency and errors down).
A figure regressed when it is worse than the baseline's by more than the tolerance (``--baseline-tolerance``, 10 %
by default) plus twice its noise: the standard error of the figure estimated from the spread of the runs' window
figures (each run's full windows inside its steady window, ``steady_windows``; a run with fewer than five counts
as noiseless: the tolerance alone judges it). A regression fails the run with the threshold's exit code (2).

A comparison is not judged where the client, not the host, set the figures: a baseline whose client was held up
(the machine was busy) or saturated (its own CPU) understates the host, so tonight would be flattered; tonight's
client held up or saturated makes any regression its own. Then ``judged`` is false, ``unjudged`` says why and the
run fails with exit code 3 (its comparison could not be made), not 2 (the host regressed) nor 0.
"""

from __future__ import annotations

import itertools
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
MIN_WINDOWS = 5  # fewer full steady windows give no noise estimate worth the name: the tolerance alone judges


def _get(summary: dict[str, Any], path: tuple[str, ...]) -> float | None:
    node: Any = summary
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return float(node) if isinstance(node, int | float) and not isinstance(node, bool) else None


FULL = 0.98  # a window this share of the run's window length or more is a full one
EDGE = 0.02  # of a window's length: how far past the steady window's edges a full window may reach (close jitter)


def steady_windows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's full windows inside its steady window: the ones whose spread is the figures' noise. A window
    that holds warm-up (the first) or the drain after the stop (the last, cut short) is not a sample of the steady
    state: a half-empty last window once made the noise so large that a 74 % fall passed."""
    rows = [w for w in summary.get("windows") or () if w.get("end_s") is not None and w.get("start_s") is not None]
    if not rows:
        return []
    # the windows' own length: their median (each is due at a fixed time, so one closed late is longer and the next
    # shorter; measured against the longest, one window held up by a busy machine made every other one "short")
    length = statistics.median(w["end_s"] - w["start_s"] for w in rows)
    if length <= 0:
        return []
    win = summary.get("window") or {}
    lo, hi = win.get("start_s"), win.get("end_s")
    slack = EDGE * length
    return [
        w
        for w in rows
        if w["end_s"] - w["start_s"] >= FULL * length
        and (lo is None or w["start_s"] >= lo - slack)
        and (hi is None or w["end_s"] <= hi + slack)
    ]


def _noise(summary: dict[str, Any], key: str | None) -> tuple[float, int]:
    """Relative standard error of a figure's mean over the run's full steady windows, and how many there were (0
    with fewer than ``MIN_WINDOWS``: two or three differences say little of a spread). The spread is the successive
    differences' (von Neumann: Σ (x[i+1] − x[i])² / 2(n − 1)), not the plain variance: a night's slow drift
    (contexts growing, a cache filling) is the same in both runs of a workload and is no noise between them, while
    window-to-window jitter is."""
    values = [w[key] for w in steady_windows(summary) if key and isinstance(w.get(key), int | float)]
    values = [float(v) for v in values if v]
    n = len(values)
    if n < MIN_WINDOWS:
        return 0.0, n
    spread = math.sqrt(sum((b - a) ** 2 for a, b in itertools.pairwise(values)) / (2 * (n - 1)))
    return spread / statistics.fmean(values) / math.sqrt(n), n


def _client_limited(summary: dict[str, Any]) -> str | None:
    """Why the run's figures are its client's, not its host's: held up by a busy machine, or its own CPU spent."""
    client = summary.get("client") or {}
    lag, share, load = client.get("loop_lag_p99_ms"), client.get("cpu_share"), client.get("machine_load")
    if client.get("saturated"):
        return f"its client was saturated ({100 * (share or 0):.0f} % of a core: it measured itself; --workers N)"
    if client.get("held_up"):
        busy = f", load {load:.1f}" if isinstance(load, int | float) else ""
        return f"its client was held up (event-loop lag p99 {lag or 0:.0f} ms{busy}: the machine was busy)"
    return None


def _unjudged(current: dict[str, Any], baseline: dict[str, Any], regressed: list[str]) -> str | None:
    """Why the comparison cannot be judged, or None: a limited baseline flatters tonight whatever tonight did, and a
    limited tonight explains any regression of its own."""
    if why := _client_limited(baseline):
        return f"the baseline run's figures are not the host's: {why}"
    if regressed and (why := _client_limited(current)):
        return f"tonight's figures are not the host's: {why}"
    return None


def compare(current: dict[str, Any], baseline: dict[str, Any], tolerance: float) -> dict[str, Any]:
    """Every figure of FIGURES side by side; ``regressed`` lists those worse beyond tolerance and noise, unless the
    comparison is not ``judged`` (``unjudged`` says why; ``regressed`` is then empty and each row's ``regressed`` is
    what the figures alone would say)."""
    rows: list[dict[str, Any]] = []
    for path, key, higher in FIGURES:
        now, before = _get(current, path), _get(baseline, path)
        name = ".".join(path)
        if now is None or before is None:
            rows.append({"figure": name, "baseline": before, "current": now, "regressed": False})
            continue
        (mine, n_now), (theirs, n_before) = _noise(current, key), _noise(baseline, key)
        noise = math.hypot(mine, theirs)
        allowed = tolerance + 2 * noise
        if name == "error_rate":
            regressed = now > before * (1 + allowed) + ERROR_RATE_FLOOR
        elif higher:
            regressed = now < before * (1 - allowed)
        else:
            regressed = now > before * (1 + allowed)
        change = (now - before) / before if before else None
        rows.append({"figure": name, "baseline": before, "current": now, "change": change, "noise": noise,
                     "noise_windows": {"current": n_now, "baseline": n_before} if key else None,
                     "allowed": allowed, "regressed": regressed})  # fmt: skip
    worse = [r["figure"] for r in rows if r["regressed"]]
    unjudged = _unjudged(current, baseline, worse)
    return {"tolerance": tolerance, "figures": rows, "judged": unjudged is None, "unjudged": unjudged,
            "regressed": [] if unjudged else worse}  # fmt: skip


def apply(summary: dict[str, Any], result: dict[str, Any], path: str) -> None:
    """Put the comparison in the summary and fail its verdict: code 2 when a figure regressed, 3 when the comparison
    could not be judged."""
    summary["baseline"] = {"file": path, **result}
    verdict = summary.get("verdict")
    if verdict is None:
        return
    if result.get("unjudged"):
        verdict["reasons"].append(f"the baseline comparison was not judged: {result['unjudged']}")
        if verdict["exit_code"] == 0:  # a threshold breached keeps its 2: it judged the figures as they are
            verdict["exit_code"], verdict["passed"] = 3, False
        return
    if not result["regressed"]:
        return
    verdict["reasons"].append("regressed against the baseline: " + ", ".join(result["regressed"]))
    if verdict["exit_code"] in (0,):
        verdict["exit_code"], verdict["passed"] = 2, False
