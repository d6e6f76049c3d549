"""Metrics: every figure of a run, computed from its records by one function.

``summarize`` is the only place figures are made; the live run and ``replay report`` both call it, so
what a run prints and what its file rebuilds are the same numbers. Definitions are in docs/metrics.md.
Percentiles come from HdrHistogram (3 significant digits); per-token values are folded in with counts
(one histogram call per distinct value), never per token.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

from replay.results.agentx_figures import interactivity
from replay.results.breakdowns import breakdown
from replay.results.recipe_figures import recipe_figures
from replay.results.records import RequestRecord, RunData
from replay.results.task_figures import task_figures

US = 1_000_000  # seconds → microseconds for latency histograms
TPS_SCALE = 1000  # tokens/s → milli-tokens/s for speed histograms
SATURATED_CPU_SHARE = 0.85
SATURATED_LAG_MS = 50.0


@dataclass(slots=True)
class Window:
    """The steady window: [start, end) on the run's monotonic clock."""

    start: float
    end: float
    steady: bool  # False when the run stopped before warm-up ended: the window is then the whole run

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)

    def __contains__(self, t: float | None) -> bool:
        return t is not None and self.start <= t < self.end


def steady_window(run: RunData) -> Window:
    """From the phase marks: opens after warm-up, closes when the stop was called."""
    p = run.phases
    t0 = p.get("start", min((r.t_sent for r in run.requests), default=0.0))
    end = p.get("stop") or p.get("end") or max((r.t_done or r.t_sent for r in run.requests), default=t0)
    start = p.get("steady_start")
    if start is None or start >= end:
        return Window(p.get("all_started", t0), end, steady=False)
    return Window(start, end, steady=True)


def _histogram(values_us: Iterable[int], counts: Iterable[int] | None = None) -> HdrHistogram | None:
    values = np.asarray(list(values_us), dtype=np.int64)
    if values.size == 0:
        return None
    weights = np.ones_like(values) if counts is None else np.asarray(list(counts), dtype=np.int64)
    values = np.clip(values, 1, None)
    uniq, inverse = np.unique(values, return_inverse=True)
    totals = np.bincount(inverse, weights=weights).astype(np.int64)
    hist = HdrHistogram(1, max(int(uniq[-1]), 2), 3)
    for v, c in zip(uniq.tolist(), totals.tolist(), strict=True):
        if c:
            hist.record_value(v, c)
    return hist


def _percentiles(hist: HdrHistogram | None, ps: tuple[int, ...], scale: float) -> dict[str, float | None]:
    if hist is None:
        return {f"p{p}": None for p in ps} | {"mean": None, "n": 0}
    out: dict[str, float | None] = {f"p{p}": hist.get_value_at_percentile(p) / scale for p in ps}
    out["mean"] = hist.get_mean_value() / scale
    out["n"] = hist.get_total_count()
    return out


def _token_scale(r: RequestRecord) -> float:
    """Tokens per streamed event: 1 unless the host's usage says events carried more (or fewer)."""
    if r.output_tokens and r.output_events:
        return r.output_tokens / r.output_events
    return 1.0


def _itl_samples(r: RequestRecord) -> tuple[list[int], list[int]]:
    """Inter-token gaps (µs) with counts: a read carrying k events after a gap g counts k gaps of g/k."""
    values: list[int] = []
    counts: list[int] = []
    ch = r.chunks
    for i in range(2, len(ch), 2):
        gap, k = ch[i] - ch[i - 2], int(ch[i + 1])
        values.append(round(gap * US / k))
        counts.append(k)
    return values, counts


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def summarize(run: RunData) -> dict[str, Any]:
    """All figures of a run, as a JSON-ready dict (the shape of ``replay report --json``)."""
    win = steady_window(run)
    reqs = [r for r in run.requests if r.phase != "warmup"]  # primers and warm-up calls are in no figure
    ok = [r for r in reqs if r.ok]
    measured = [r for r in ok if r.t_sent in win]

    ttft = [round((r.t_first_token - r.t_sent) * US) for r in measured if r.t_first_token]
    ttfat = [round((r.t_first_answer - r.t_sent) * US) for r in measured if r.t_first_answer]
    e2e = [round((r.t_done - r.t_sent) * US) for r in measured if r.t_done]
    itl_v: list[int] = []
    itl_c: list[int] = []
    decode: list[int] = []
    with_wait: list[int] = []
    for r in measured:
        v, c = _itl_samples(r)
        itl_v += v
        itl_c += c
        n_out = r.output_tokens if r.output_tokens is not None else r.output_events
        if n_out >= 2 and r.t_first_token and r.t_last_token and r.t_last_token > r.t_first_token:
            decode.append(round((n_out - 1) / (r.t_last_token - r.t_first_token) * TPS_SCALE))
        if n_out and r.t_done and r.t_done > r.t_sent:
            with_wait.append(round(n_out / (r.t_done - r.t_sent) * TPS_SCALE))

    throughput = _throughput(reqs, win)
    errors_by_class: dict[str, int] = {}
    for r in reqs:
        if r.error:
            errors_by_class[r.error] = errors_by_class.get(r.error, 0) + 1

    errors = sum(errors_by_class.values())
    finals = [r for r in reqs if r.final]  # one per call, after its retries
    itl = _percentiles(_histogram(itl_v, itl_c), (50, 75, 90, 95, 99), US)
    summary = {
        "run": run_identity(run.header),
        "requests": len(reqs),
        "attempts": len(reqs),  # every attempt is a request record
        "retries": sum(r.attempt > 1 for r in reqs),
        "errors": errors,
        "error_rate": _ratio(sum(not r.ok for r in finals), len(finals)),  # calls that failed after their retries
        "attempt_error_rate": _ratio(errors, len(reqs)),  # attempts that failed, retried or not
        "errors_by_class": errors_by_class,
        "invalid_usage": sum(r.usage_raw is not None for r in reqs),  # calls whose token counts were rejected
        "window_s": win.seconds,
        "window": {
            "start_s": win.start - run.phases.get("start", win.start),
            "end_s": win.end - run.phases.get("start", win.start),
            "steady": win.steady,
            "requests": len(measured),
        },
        "ttft_s": _percentiles(_histogram(ttft), (50, 75, 90, 95, 99), US),
        "ttfat_s": _percentiles(_histogram(ttfat), (50, 90, 95, 99), US),
        "e2e_s": _percentiles(_histogram(e2e), (50, 90, 95, 99), US),
        "itl_s": itl,
        "interactivity": interactivity(itl),  # 1 / ITL at p50..p95 (AgentX)
        "user_decode_tps": _percentiles(_histogram(decode), (25, 50, 75), TPS_SCALE),
        "user_output_tps_incl_wait": _percentiles(_histogram(with_wait), (25, 50), TPS_SCALE),
        "throughput": throughput,
        "cache": _cache(measured),
        "tasks": task_figures(run.tasks),
        "totals": _totals(reqs),
        "client": _client(run.client, win, measured),
        "breakdown": breakdown(measured),
        "warmup_requests": len(run.requests) - len(reqs),
    }
    return summary | recipe_figures(run, summary, measured, win)


def run_identity(header: dict[str, Any]) -> dict[str, Any]:
    """What a summary was made of, so two summaries can be told apart and compared without their run files."""
    host, load, workload = header.get("host") or {}, header.get("load") or {}, header.get("workload") or {}
    sim = header.get("simulated") or {}
    return {
        "host": host.get("base_url"),
        "api": host.get("api"),
        "model": host.get("model"),
        "simulated_profile": header.get("simulated_host"),
        "simulated_faults": sim.get("faults") if sim else header.get("simulated_faults"),
        "concurrency": load.get("concurrency"),
        "duration_s": load.get("duration_s"),
        "tasks": load.get("tasks"),
        "tool_time": load.get("tool_time"),
        "seed": load.get("seed"),
        "workload": {k: workload.get(k) for k in ("paths", "digest", "trajectories", "turns")},
        "created": header.get("created"),
        "replay_version": header.get("replay_version"),
    }


def _throughput(reqs: list[RequestRecord], win: Window) -> dict[str, Any]:
    """Tokens attributed to when they happened: input at first token (prefill done), output per read."""
    cached = new = out = 0.0
    estimated_input = False
    for r in reqs:
        if r.t_first_token in win:
            if r.prompt_tokens is not None:
                c = r.cached_tokens or 0
                cached += c
                new += r.prompt_tokens - c
            else:
                new += r.prompt_tokens_est
                estimated_input = True
        if r.chunks:
            scale = _token_scale(r)
            ch = r.chunks
            for i in range(0, len(ch), 2):
                if (r.t_sent + ch[i]) in win:
                    out += ch[i + 1] * scale
    secs = win.seconds
    total = cached + new + out

    def rate(x: float) -> float | None:
        return x / secs if secs > 0 else None

    return {
        "total_tps": rate(total),
        "cached_input_tps": rate(cached),
        "new_input_tps": rate(new),
        "output_tps": rate(out),
        "total_tokens_per_min": rate(total * 60),
        "output_tokens_per_min": rate(out * 60),
        "tokens": {"cached_input": cached, "new_input": new, "output": out},
        "input_from_client_estimate": estimated_input,
    }


def _cache(measured: list[RequestRecord]) -> dict[str, Any]:
    """Client reuse and host hits as ratios of their own prompt counts (tokenizers differ)."""
    est = sum(r.prompt_tokens_est for r in measured)
    reusable = sum(r.reusable_prefix_tokens for r in measured)
    reported = [r for r in measured if r.prompt_tokens is not None and r.cached_tokens is not None]
    host_prompt = sum(r.prompt_tokens or 0 for r in reported)
    host_cached = sum(r.cached_tokens or 0 for r in reported)
    reuse = _ratio(reusable, est)
    hit = _ratio(host_cached, host_prompt)
    return {
        "client_reuse_ratio": reuse,
        "host_hit_ratio": hit,
        "efficiency": (hit / reuse) if (hit is not None and reuse) else None,
        "requests_with_cached_tokens": len(reported),
        "requests": len(measured),
    }


def _totals(reqs: list[RequestRecord]) -> dict[str, int]:
    return {
        "requests": len(reqs),
        "ok": sum(r.ok for r in reqs),
        "prompt_tokens": sum(r.prompt_tokens or 0 for r in reqs),
        "cached_tokens": sum(r.cached_tokens or 0 for r in reqs),
        "output_tokens": sum(r.output_tokens or 0 for r in reqs),
        "reasoning_tokens": sum(r.reasoning_tokens or 0 for r in reqs),
        "prompt_tokens_est": sum(r.prompt_tokens_est for r in reqs),
        "reusable_prefix_tokens": sum(r.reusable_prefix_tokens for r in reqs),
    }


def _client(samples: list[dict[str, Any]], win: Window, measured: list[RequestRecord]) -> dict[str, Any]:
    """Was the client itself the bottleneck? CPU share of one core, event-loop lag, and the wait between a
    call beginning and its bytes leaving (the client's own queue, plus opening a connection when one must)."""
    send_wait = [round((r.t_sent - r.t_call) * US) for r in measured if r.t_call is not None]
    inside = [s for s in samples if s["t"] in win] or samples
    wall = sum(s["wall_s"] for s in inside)
    cpu = sum(s["cpu_s"] for s in inside)
    lag = max((s["lag_p99_ms"] for s in inside), default=None)
    share = cpu / wall if wall else None
    saturated = bool(
        (share is not None and share > SATURATED_CPU_SHARE) or (lag is not None and lag > SATURATED_LAG_MS)
    )
    return {
        "cpu_share": share,
        "loop_lag_p99_ms": lag,
        "send_wait_s": _percentiles(_histogram(send_wait), (50, 99), US),
        "saturated": saturated,
    }
