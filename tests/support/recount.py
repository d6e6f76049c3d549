"""An independent recount, from the raw lines of a run file, of the figures the public leaderboards read (issue 27):
E2E-normalised interactivity, goodput at a per-call SLO, and the InferenceX/AIPerf aggregate fields.

Written from the definitions in docs/metrics.md and the run file's JSON alone: the standard library only, nothing of
``replay``, every value kept (no histogram). Percentiles are the order statistic of nearest rank ⌈p·n/100⌉ (at least
1), the definition docs/metrics.md gives; replay holds values at 3 significant digits, so its figure is within 0.1 % of
this one.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from tests.support import oracle
from tests.support.oracle import nearest_rank


def rank_percentile(values: list[float], p: float) -> float | None:
    """The value of nearest rank ⌈p·n/100⌉, at least 1, among ``values`` (the oracle's one rank)."""
    return nearest_rank(values, p)


def read(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], dict[str, float]]:
    """(header, request records, task records, the first segment's phase marks) of a run file, as the oracle reads
    it (tests/support/oracle.py: a torn last line left out)."""
    run = oracle.read(path)
    return run.header, run.requests, run.tasks, run.segments[0] if run.segments else {}


def window(phases: dict[str, float], requests: list[dict[str, Any]]) -> tuple[float, float]:
    """The steady window [start, end) of a one-segment run that reached it: warm-up's end to the stop."""
    end = phases.get("stop") or phases.get("end") or max(r["t_done"] or r["t_sent"] for r in requests)
    return phases["steady_start"], end


def _out(r: dict[str, Any]) -> int:
    return r["output_tokens"] if r["output_tokens"] is not None else r["output_events"]


def _in(r: dict[str, Any]) -> int:
    return r["prompt_tokens"] if r["prompt_tokens"] is not None else r["prompt_tokens_est"]


def measured(path: str | Path) -> list[dict[str, Any]]:
    """The calls every per-call figure covers: not warm-up, successful, sent inside the steady window."""
    _, requests, _, phases = read(path)
    lo, hi = window(phases, requests)
    return [r for r in requests if r.get("phase") != "warmup" and r["error"] is None and lo <= r["t_sent"] < hi]


def seconds_per_token(calls: list[dict[str, Any]]) -> list[float]:
    """Each call's end-to-end latency over its output tokens, if its latency, output, TTFT and input are all > 0."""
    out = []
    for r in calls:
        if r["t_done"] is None or r["t_first_token"] is None:
            continue
        e2e, ttft, n = r["t_done"] - r["t_sent"], r["t_first_token"] - r["t_sent"], _out(r)
        if e2e > 0 and ttft > 0 and n > 0 and _in(r) > 0:
            out.append(e2e / n)
    return out


def interactivity_e2e(path: str | Path) -> dict[str, float | int | None]:
    """1 / pX of seconds per output token (the slow tail inverted after the percentile), 1 / the mean, the spread
    of the per-call speeds, and the calls counted."""
    ratios = seconds_per_token(measured(path))
    out: dict[str, float | int | None] = {}
    for p in (50, 75, 90, 95):
        v = rank_percentile(ratios, p)
        out[f"p{p}"] = 1 / v if v else None
    out["mean"] = 1 / statistics.fmean(ratios) if ratios else None
    out["std"] = statistics.pstdev([1 / x for x in ratios]) if ratios else None
    out["n"] = len(ratios)
    return out


def pareto(points: list[tuple[int, float, float]]) -> list[int]:
    """The levels (concurrency, x, y) no other level matches or beats on both and beats on one, by concurrency."""
    front = []
    for c, x, y in points:
        beaten = any(x2 >= x and y2 >= y and (x2 > x or y2 > y) for c2, x2, y2 in points if c2 != c)
        if not beaten:
            front.append(c)
    return sorted(front)


def ttft(path: str | Path) -> list[float]:
    """Each measured call's time to first token (first token − sent)."""
    return [r["t_first_token"] - r["t_sent"] for r in measured(path) if r["t_first_token"] is not None]


def agentx_throughput(path: str | Path, gpus: int) -> dict[str, float]:
    """AgentX's throughput (docs/recipes.md): the measured calls' host-counted input and output tokens over the
    profiling span (the steady window's start to the last measured response), in total and per GPU."""
    _, requests, _, phases = read(path)
    calls = measured(path)
    span = max(r["t_done"] for r in calls) - window(phases, requests)[0]
    total = sum(_in(r) + _out(r) for r in calls) / span
    return {"span_s": span, "total_tps": total, "total_tps_per_gpu": total / gpus}


def _call_figure(r: dict[str, Any], figure: str) -> float | None:
    """One call's own figure, from its stamps and counts (docs/metrics.md, "Goodput")."""
    sent, n = r["t_sent"], _out(r)
    first, last, done = r["t_first_token"], r["t_last_token"], r["t_done"]
    if figure == "ttft":
        return first - sent if first is not None else None
    if figure == "ttfat":
        return r["t_first_answer"] - sent if r["t_first_answer"] is not None else None
    if figure == "e2e":
        return done - sent if done is not None else None
    if figure == "itl":
        return (done - first) / (n - 1) if n >= 2 and first is not None and done is not None else None
    if figure == "user_decode_tps":
        ok = n >= 2 and first is not None and last is not None and last > first
        speed = (n - 1) / (last - first) if ok else None
        return speed if speed is not None and speed <= 20_000 else None  # above: tokens read at once (no speed)
    raise ValueError(figure)


_BOUNDS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _met(r: dict[str, Any], slo: list[tuple[str, str, float]]) -> bool:
    values = [(_call_figure(r, figure), op, bound) for figure, op, bound in slo]
    return all(v is not None and _BOUNDS[op](v, bound) for v, op, bound in values)


def _shares(calls: list[dict[str, Any]], whole: list[int], missed: set[int], slo: list[tuple[str, str, float]],
            seconds: float) -> dict[str, Any]:  # fmt: skip
    good = [r for r in calls if _met(r, slo)]
    kept = [t for t in whole if t not in missed]
    out_tokens = sum(_out(r) for r in good)
    return {
        "calls": len(calls),
        "calls_met": len(good),
        "calls_met_share": len(good) / len(calls) if calls else None,
        "tasks": len(whole),
        "tasks_met": len(kept),
        "tasks_met_share": len(kept) / len(whole) if whole else None,
        "output_tps": out_tokens / seconds if seconds > 0 else None,
        "total_tps": (out_tokens + sum(_in(r) for r in good)) / seconds if seconds > 0 else None,
    }


def window_goodput(path: str | Path, slo: list[tuple[str, str, float]]) -> list[dict[str, Any]]:
    """Goodput per window record at ``slo``: the successful calls (not warm-up) whose record was written in the
    window (after the window record before it, up to its own), the complete tasks (replayed whole) written in it,
    each missed if any successful call of it, in any window, missed; the met calls' tokens over the window's
    seconds (t_end - t_start)."""
    run = oracle.read(path)
    ok = [(r, w) for r, w in zip(run.requests, run.request_windows, strict=True)
          if r.get("phase") != "warmup" and r["error"] is None]  # fmt: skip
    missed = {r["task"] for r, _ in ok if not _met(r, slo)}
    out = []
    for i, w in enumerate(run.windows):
        calls = [r for r, at in ok if at == i]
        whole = [t["task"] for t, at in zip(run.tasks, run.task_windows, strict=True)
                 if at == i and t["complete"] and not t.get("start_turn")]  # fmt: skip
        out.append({"index": w["index"], **_shares(calls, whole, missed, slo, w["t_end"] - w["t_start"])})
    return out


def goodput(path: str | Path, slo: list[tuple[str, str, float]]) -> dict[str, Any]:
    """Goodput at ``slo`` ([(figure, op, value)], every term on each call): the share of the window's successful calls
    that met every term, the share of complete tasks (replayed whole) none of whose successful calls missed, and the
    met calls' output and total (input + output) tokens over the window's seconds."""
    _, requests, tasks, phases = read(path)
    lo, hi = window(phases, requests)
    succeeded = [r for r in requests if r.get("phase") != "warmup" and r["error"] is None]
    inside = [r for r in succeeded if lo <= r["t_sent"] < hi]
    missed = {r["task"] for r in succeeded if not _met(r, slo)}
    whole = [t["task"] for t in tasks if t["complete"] and not t.get("start_turn")]
    return _shares(inside, whole, missed, slo, hi - lo)
