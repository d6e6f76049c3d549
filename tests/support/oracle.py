"""An independent recount of a run's headline figures from the raw lines of its run file (issue 24).

Written from the definitions in docs/metrics.md and the run file's JSON alone: it imports nothing of ``replay``
(the standard library only), keeps every value (no histogram), and uses its own percentile (the nearest rank: the
smallest value with at least p % of the values at or below it). ``replay report --json`` must agree with it: counts
exactly, sums and rates to float precision, percentiles within HdrHistogram's stated precision (3 significant
digits: 0.1 %, on values kept in whole microseconds and milli-tokens per second).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def nearest_rank(values: list[float], p: float) -> float | None:
    """The smallest value with at least ``p`` % of ``values`` at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    k = max(1, math.ceil(round(p * len(ordered) / 100, 9)))  # (rounded first: p95 of 20 is the 19th, by a float's bit)
    return ordered[min(k, len(ordered)) - 1]


@dataclass
class RawRun:
    header: dict[str, Any]
    requests: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    segments: list[dict[str, float]]  # each segment's phase marks, in file order
    footer: dict[str, Any] | None
    windows: list[dict[str, Any]] = field(default_factory=list)
    # per request and per task, in order: how many window records came before its line (the window it was written in)
    request_windows: list[int] = field(default_factory=list)
    task_windows: list[int] = field(default_factory=list)


def read(path: str | Path) -> RawRun:
    """The run file's lines by type (a torn last line, from a kill, is left out)."""
    header: dict[str, Any] = {}
    requests, tasks, segments, windows = [], [], [], []
    request_windows, task_windows = [], []
    footer = None
    for line in Path(path).read_bytes().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        kind = rec.get("type")
        if kind == "header":
            header = rec
        elif kind == "request":
            requests.append(rec)
            request_windows.append(len(windows))
        elif kind == "task":
            tasks.append(rec)
            task_windows.append(len(windows))
        elif kind == "phase":
            if rec["name"] == "start" or not segments:
                segments.append({})
            segments[-1][rec["name"]] = rec["t"]
        elif kind == "window":
            windows.append(rec)
        elif kind == "footer":
            footer = rec
    return RawRun(header, requests, tasks, segments, footer, windows, request_windows, task_windows)


def steady_parts(run: RawRun) -> tuple[list[tuple[float, float]], bool]:
    """The steady window, one [start, end) part per segment, and whether it is steady (docs/metrics.md, Windows):
    from the end of warm-up to the stop; a segment that stopped before warm-up ended counts whole."""
    parts, steady = [], []
    for i, seg in enumerate(run.segments):
        start = seg.get("start")
        later = run.segments[i + 1].get("start") if i + 1 < len(run.segments) else math.inf
        own = [r for r in run.requests if (start is None or r["t_sent"] >= start) and r["t_sent"] < later]
        last = max((r["t_done"] or r["t_sent"] for r in own), default=start or 0.0)
        end = seg.get("stop") or seg.get("end") or last
        opened = seg.get("steady_start")
        if opened is None or opened >= end:
            parts.append((seg.get("all_started", start), end))
            steady.append(False)
        else:
            parts.append((opened, end))
            steady.append(True)
    if any(steady):
        parts = [p for p, s in zip(parts, steady, strict=True) if s]
    return parts, any(steady)


def _inside(t: float | None, parts: list[tuple[float, float]]) -> bool:
    return t is not None and any(a <= t < b for a, b in parts)


def _out_tokens(r: dict[str, Any]) -> int:
    return r["output_tokens"] if r["output_tokens"] is not None else r["output_events"]


def _itl(r: dict[str, Any]) -> list[float]:
    """A read carrying k events after a gap g since the previous token-bearing read: k samples of g / k."""
    ch = r["chunks"]
    out = []
    for i in range(2, len(ch), 2):
        gap, k = ch[i] - ch[i - 2], ch[i + 1]
        out += [gap / k] * int(k)
    return out


MAX_DECODE_TPS = 20_000  # docs/metrics.md: a speed above it times reads that came at once, not a decode


def _decode(r: dict[str, Any]) -> float | None:
    n = _out_tokens(r)
    first, last = r["t_first_token"], r["t_last_token"]
    if n >= 2 and first and last and last > first and (n - 1) / (last - first) <= MAX_DECODE_TPS:
        return (n - 1) / (last - first)
    return None


def figures(run: RawRun) -> dict[str, Any]:
    """The headline figures, recounted."""
    parts, steady = steady_parts(run)
    seconds = sum(b - a for a, b in parts)
    counted = [r for r in run.requests if r.get("phase") != "warmup"]
    calls = [r for r in counted if r["error"] is None and _inside(r["t_sent"], parts)]
    cached = new = out = 0.0
    for r in counted:  # tokens when they happened: input at the first token, output at the reads that carried it
        if _inside(r["t_first_token"], parts):
            if r["prompt_tokens"] is not None:
                cached += r["cached_tokens"] or 0
                new += r["prompt_tokens"] - (r["cached_tokens"] or 0)
            else:
                new += r["prompt_tokens_est"]
        scale = r["output_tokens"] / r["output_events"] if r["output_tokens"] and r["output_events"] else 1.0
        ch = r["chunks"]
        out += sum(ch[i + 1] * scale for i in range(0, len(ch), 2) if _inside(r["t_sent"] + ch[i], parts))
    reported = [r for r in calls if r["prompt_tokens"] is not None and r["cached_tokens"] is not None]
    finals = [r for r in counted if r["final"]]
    errors: dict[str, int] = {}
    for r in counted:
        if r["error"] is not None:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    est = sum(r["prompt_tokens_est"] for r in calls)
    host_prompt = sum(r["prompt_tokens"] for r in reported)
    reported_est = sum(r["prompt_tokens_est"] for r in reported)
    return {
        "window_s": seconds,
        "steady": steady,
        "requests": len(counted),
        "measured": len(calls),
        "errors": sum(errors.values()),
        "errors_by_class": errors,
        "error_rate": sum(r["error"] is not None for r in finals) / len(finals) if finals else None,
        "tokens": {"cached_input": cached, "new_input": new, "output": out},
        "total_tps": (cached + new + out) / seconds if seconds else None,
        "output_tps": out / seconds if seconds else None,
        "ttft": [r["t_first_token"] - r["t_sent"] for r in calls if r["t_first_token"]],
        "ttfat": [r["t_first_answer"] - r["t_sent"] for r in calls if r["t_first_answer"]],
        "e2e": [r["t_done"] - r["t_sent"] for r in calls if r["t_done"]],
        "itl": [g for r in calls for g in _itl(r)],
        "decode": [d for r in calls if (d := _decode(r)) is not None],
        "decode_not_measured": sum(_decode(r) is None for r in calls),
        "client_reuse_ratio": sum(r["reusable_prefix_tokens"] for r in calls) / est if est else None,
        "host_hit_ratio": sum(r["cached_tokens"] for r in reported) / host_prompt if host_prompt else None,
        "with_cached_count": len(reported),
        "reported_reuse_ratio": sum(r["reusable_prefix_tokens"] for r in reported) / reported_est
        if reported_est
        else None,
    }
