"""Metrics: every figure of a run, made by one function from an accumulator of its requests.

``figures`` is the only place figures are made, as a typed ``Summary`` (``summary_types``); the live run,
``replay report`` and the window records of a soak all go through it (over an ``Accumulator``), so what a run
prints and what its file rebuilds are the same numbers. Definitions are in docs/metrics.md. Percentiles come from
HdrHistogram (3 significant digits).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from replay.histogram import Histogram, read_percentiles
from replay.metrics.accumulator import TPS_SCALE, US, Accumulator
from replay.metrics.breakdowns import breakdown_figures
from replay.metrics.client_pauses import gc_figures
from replay.metrics.concurrency import ConcurrencyFigures, concurrency_figures
from replay.metrics.goodput import CallSlo, parse_slo
from replay.metrics.host import host_signals, routes, speculation
from replay.metrics.host.cost import hourly_cost, run_cost
from replay.metrics.host.server_figures import server_figures
from replay.metrics.recipes.agentx_figures import interactivity, interactivity_e2e
from replay.metrics.recipes.recipe_figures import recipe_figures, run_seconds
from replay.metrics.summary_types import (
    CacheFigures,
    ClientFigures,
    Percentiles,
    RunIdentity,
    Summary,
    Throughput,
    TokenCounts,
    Totals,
    WindowFigures,
)
from replay.records.run_file import RequestRecord, RunData, TaskRecord

SATURATED_CPU_SHARE = 0.85
SATURATED_LAG_MS = 50.0


@dataclass(slots=True)
class Window:
    """The steady window: [start, end) on the run's monotonic clock; a resumed run's is one part per segment."""

    start: float
    end: float
    steady: bool  # False when the run stopped before warm-up ended: the window is then the whole run
    parts: tuple[tuple[float, float], ...] = ()  # a resumed run's window, segment by segment (start .. end overall)

    @property
    def seconds(self) -> float:
        if self.parts:
            return sum(max(0.0, b - a) for a, b in self.parts)
        return max(0.0, self.end - self.start)

    def __contains__(self, t: float | None) -> bool:
        if t is None:
            return False
        if self.parts:
            return any(a <= t < b for a, b in self.parts)
        return self.start <= t < self.end


# The header's workload entries the summary's ``run.workload`` repeats.
WORKLOAD_KEYS = ("paths", "digest", "fingerprint", "trajectories", "turns", "unrecorded_context", "padded_tokens",
                 "images")  # fmt: skip


def window_from(phases: dict[str, float], first_sent: float, last_done: float) -> Window:
    """From the phase marks: opens after warm-up, closes when the stop was called (the requests' own times
    stand in for marks a damaged file lacks)."""
    t0 = phases.get("start", first_sent)
    end = phases.get("stop") or phases.get("end") or last_done
    start = phases.get("steady_start")
    if start is None or start >= end:
        return Window(phases.get("all_started", t0), end, steady=False)
    return Window(start, end, steady=True)


def joined(windows: list[Window]) -> Window:
    """One window of a run's segments (each with its own window): steady if any of them is."""
    if len(windows) == 1:
        return windows[0]
    steady = [w for w in windows if w.steady] or windows
    return Window(steady[0].start, steady[-1].end, bool(steady[0].steady), tuple((w.start, w.end) for w in steady))


def steady_window(run: RunData) -> Window:
    reqs = run.requests
    first = min((r.t_sent for r in reqs), default=0.0)
    last = max((r.t_done or r.t_sent for r in reqs), default=first)
    if not run.later_phases:
        return window_from(run.phases, first, last)
    segments = [run.phases, *run.later_phases]
    starts = [p.get("start", first) for p in segments]
    windows = []
    for i, phases in enumerate(segments):
        upto = starts[i + 1] if i + 1 < len(segments) else float("inf")
        own = [r for r in reqs if starts[i] <= r.t_sent < upto]
        windows.append(window_from(phases, starts[i], max((r.t_done or r.t_sent for r in own), default=starts[i])))
    return joined(windows)


def accumulate(
    requests: Iterable[RequestRecord],
    win: Window,
    card: dict[str, Any] | None = None,
    tasks: Iterable[TaskRecord] = (),
    slo: CallSlo | None = None,
) -> Accumulator:
    """The summary's accumulator of ``requests``: per-call figures of the successful calls sent in ``win``, and
    every token keyed by whether it fell inside ``win``; each priced with the rate ``card`` and judged against the
    per-call ``slo``; and the ``tasks``."""
    acc = Accumulator(card, slo)
    acc.recipe.origin = win.start
    inside = win.__contains__
    for r in requests:
        acc.add(r, r.error is None and r.t_sent in win, inside)
    for t in tasks:
        acc.add_task(t)
    return acc


def summarize(run: RunData) -> Summary:
    """All figures of a run from its records (the shape of ``replay report --json``, less what ``finish`` adds)."""
    win = steady_window(run)
    return figures(accumulate(run.requests, win, header_card(run.header), run.tasks, header_slo(run.header)), win, run)


def figures(acc: Accumulator, win: Window, run: RunData) -> Summary:
    """The summary from an accumulator of the run's requests (``accumulate``, the stream of a live run or of its
    file, or merged window records), the steady window, and the run's header, phases and client samples (its
    requests and tasks are not read). The one place figures are made."""
    s, h = acc.sums, acc.hist
    itl = _percentiles(h["itl"], (50, 75, 90, 95, 99), US)
    t0 = run.phases.get("start", win.start)
    summary = Summary(
        run=run_identity(run.header),
        requests=s["requests"],
        attempts=s["requests"],  # every attempt is a request record
        retries=s["retries"],
        errors=s["errors"],
        error_rate=_ratio(s["finals_failed"], s["finals"]),  # calls that failed after their retries
        attempt_error_rate=_ratio(s["errors"], s["requests"]),  # attempts that failed, retried or not
        errors_by_class=dict(acc.errors_by_class),
        invalid_usage=s["invalid_usage"],  # calls whose token counts were rejected
        window_s=win.seconds,
        window=WindowFigures(
            start_s=win.start - t0,
            end_s=win.end - t0,
            steady=win.steady,
            requests=s["measured"],
            of_requests=s["requests"],
            whole_run=(run.footer or {}).get("window") == "whole",
        ),
        ttft_s=_percentiles(h["ttft"], (50, 75, 90, 95, 99), US),
        ttfat_s=_percentiles(h["ttfat"], (50, 90, 95, 99), US),
        e2e_s=_percentiles(h["e2e"], (50, 90, 95, 99), US),
        itl_s=itl,
        interactivity=interactivity(itl.to_dict()),  # 1 / ITL at p50..p95 (AgentX)
        interactivity_e2e=interactivity_e2e(acc.recipe),  # 1 / pX(e2e / output tokens) (InferenceX, aiperf)
        user_decode_tps=_speeds(h["decode"], s["measured"]),
        user_output_tps_incl_wait=_percentiles(h["with_wait"], (25, 50), TPS_SCALE),
        throughput=_throughput(acc, win.seconds, True, *run_hardware(run.header)),
        goodput=acc.goodput.figures(acc.tasks.complete, win.seconds),
        cache=_cache(acc),
        tasks=acc.tasks.figures(),
        totals=_totals(acc),
        client=_client(run.client, win, acc),
        breakdown=breakdown_figures(acc),
        host_figures=provider_figures(acc, run),
        warmup_requests=acc.recipe.counts["warmup"],  # primers and warm-up calls: in no other figure
        answers=acc.answers.figures(bool((run.header.get("request") or {}).get("force_output_length"))),
        recipe_figures={},
        concurrency=_concurrency(acc, win, run),
    )
    tp, price = summary.throughput, (run.header.get("recipe") or {}).get("price_per_hour")
    summary.host_figures["cost"]["hourly"] = hourly_cost(price, summary.run.concurrency, summary.tasks.get("wall_s"),
                                                         tp.total_tps, tp.output_tps, run_seconds(run))  # fmt: skip
    summary.recipe_figures = recipe_figures(run, summary.to_dict(), acc, win)
    return summary


def run_hardware(header: dict[str, Any]) -> tuple[int | None, float | None]:
    """The GPUs and kilowatts behind the host, for per-GPU and per-MW figures: the recipe's (--gpus, --power-kw),
    else the hosts file's."""
    recipe, host = header.get("recipe") or {}, header.get("host") or {}
    return recipe.get("gpus") or host.get("gpus"), recipe.get("power_kw") or host.get("power_kw")


def provider_figures(acc: Accumulator, run: RunData) -> dict[str, Any]:
    """What the host says about itself (docs/providers.md): its own timings (absent when it sends none), what
    served each call (models, routes, tiers), speed modes, the fallback (absent when none is found), speed by load,
    speculative decoding's acceptance (None when no call reported it: ``rebuild.finish`` then reads the host's
    counters scraped per window),
    cost from the header's rate card, rate-limit state, connections and the provider's limits."""
    t = acc.host
    server = server_figures(t)
    fallback = routes.fallback(t)
    return {
        **({"server": server} if server else {}),
        "served": routes.served_shares(t),
        "routes": routes.route_shares(t),
        "service_tiers": routes.tier_shares(t),
        "speed_modes": routes.speed_modes(t),
        **({"fallback": fallback} if fallback else {}),
        "speed_by_load": routes.speed_by_load(t, [b.decode for b in acc.by_context]),
        "speculation": speculation.figures(t.spec),
        "cost": run_cost(t, acc.tasks.complete, header_card(run.header)),
        "rate_limits": host_signals.rate_limits(t),
        "connections": host_signals.connections(t),
        "provider_limits": host_signals.provider_limits(acc.errors_by_class) | host_signals.tier_checks(run.header, t),
    }


def _percentiles(hist: Histogram, ps: tuple[int, ...], scale: float) -> Percentiles:
    got = read_percentiles(hist, ps, scale, mean=True)
    n = int(got.pop("n") or 0)
    mean = got.pop("mean")
    return Percentiles(got, mean, n)


def _speeds(hist: Histogram, calls: int) -> Percentiles:
    """Per-user decode speeds of the window's successful calls; ``not_measured``: the calls that had none (one
    output token, or all of them read at once: ``decode_tps``)."""
    p = _percentiles(hist, (25, 50, 75), TPS_SCALE)
    p.not_measured = calls - p.n
    return p


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def header_card(header: dict[str, Any]) -> dict[str, Any] | None:
    """The rate card a run was priced with (the hosts file's or --rate-card's, as its header keeps it)."""
    card = (header.get("host") or {}).get("price")
    return card if isinstance(card, dict) else None


def header_slo(header: dict[str, Any]) -> CallSlo | None:
    """The per-call SLO goodput is judged at (``replay run --slo``, as its header keeps it)."""
    return parse_slo(header.get("slo") or [])


def run_identity(header: dict[str, Any]) -> RunIdentity:
    """What a summary was made of, so two summaries can be told apart and compared without their run files."""
    host, load, workload = header.get("host") or {}, header.get("load") or {}, header.get("workload") or {}
    sim = header.get("simulated") or {}
    return RunIdentity(
        host=host.get("base_url"),
        api=host.get("api"),
        model=host.get("model"),
        preset=host.get("preset"),
        dialect=host.get("dialect"),
        host_name=host.get("name"),
        simulated_profile=header.get("simulated_host"),
        simulated_faults=sim.get("faults") if sim else header.get("simulated_faults"),
        concurrency=load.get("concurrency"),
        open_loop=header.get("open_loop"),  # arrivals and max_live: an open loop's sessions, not concurrency
        duration_s=load.get("duration_s"),
        tasks=load.get("tasks"),
        tool_time=load.get("tool_time"),
        seed=load.get("seed"),
        workload={k: workload.get(k) for k in WORKLOAD_KEYS},
        created=header.get("created"),
        replay_version=header.get("replay_version"),
    )


def _throughput(acc: Accumulator, seconds: float, key: Any, gpus: int | None, power_kw: float | None) -> Throughput:
    """Tokens attributed to when they happened (input at the first token, output per read) under ``key``."""
    cached, new, out = acc.tokens.get(key, [0.0, 0.0, 0.0])
    total = cached + new + out

    def rate(x: float) -> float | None:
        return x / seconds if seconds > 0 else None

    def per_gpu(x: float | None) -> float | None:
        return x / gpus if gpus and x is not None else None

    def per_mw(x: float | None) -> float | None:
        return x / (power_kw / 1000) if power_kw and x is not None else None

    return Throughput(
        total_tps=rate(total),
        cached_input_tps=rate(cached),
        new_input_tps=rate(new),
        output_tps=rate(out),
        total_tokens_per_min=rate(total * 60),
        output_tokens_per_min=rate(out * 60),
        tokens=TokenCounts(cached_input=cached, new_input=new, output=out),
        input_from_client_estimate=acc.estimated_input,
        gpus=gpus,
        total_tps_per_gpu=per_gpu(rate(total)),
        output_tps_per_gpu=per_gpu(rate(out)),
        power_kw=power_kw,
        total_tps_per_mw=per_mw(rate(total)),
        output_tps_per_mw=per_mw(rate(out)),
    )


def _cache(acc: Accumulator) -> CacheFigures:
    """Client reuse and host hits as ratios of their own prompt counts (tokenizers differ); the efficiency sets
    the host's hit ratio beside the client's reuse over the same calls: those the host reported cached tokens of."""
    s = acc.sums
    reuse = _ratio(s["m_reusable"], s["m_est"])
    hit = _ratio(s["m_host_cached"], s["m_host_prompt"])
    reuse_of_reported = _ratio(s["m_reported_reusable"], s["m_reported_est"])
    return CacheFigures(
        client_reuse_ratio=reuse,
        host_hit_ratio=hit,
        efficiency=(hit / reuse_of_reported) if (hit is not None and reuse_of_reported) else None,
        requests_with_cached_tokens=s["m_reported"],
        requests=s["measured"],
    )


def _totals(acc: Accumulator) -> Totals:
    s = acc.sums
    return Totals(
        requests=s["requests"],
        ok=s["ok"],
        prompt_tokens=s["prompt_tokens"],
        cached_tokens=s["cached_tokens"],
        output_tokens=s["output_tokens"],
        reasoning_tokens=s["reasoning_tokens"],
        prompt_tokens_est=s["prompt_tokens_est"],
        reusable_prefix_tokens=s["reusable_prefix_tokens"],
    )


def _client(samples: list[dict[str, Any]], win: Window, acc: Accumulator) -> ClientFigures:
    """Was the client itself the bottleneck? CPU share of one core, event-loop lag, and the wait between a
    call beginning and its bytes leaving (the client's own queue, plus opening a connection when one must).

    The client is ``saturated`` only when its own CPU says so (over SATURATED_CPU_SHARE of a core). An event loop
    that lagged over SATURATED_LAG_MS while the process used less is ``held_up``: the machine was busy (other
    processes, a host on the same machine among them, had the cores: ``machine_load``, the highest 1-minute load
    average sampled, on ``cores``), and more workers would not help.
    A run over worker processes (``--workers``) is judged per worker: its CPU share and lag are the busiest
    worker's, it is saturated (held up) when any worker is, and ``workers`` lists each one (with its collections).
    The collections (``gc``) are every process's over the whole run; ``paused_calls`` are the measured calls whose
    timing includes a client pause (``replay.metrics.client_pauses``)."""
    inside = [s for s in samples if s["t"] in win] or samples
    by_worker: dict[Any, list[dict[str, Any]]] = {}
    for s in inside:
        by_worker.setdefault(s.get("worker"), []).append(s)
    each = [{"worker": k, **_process_load(v), "gc": gc_figures(s for s in samples if s.get("worker") == k)}
            for k, v in sorted(by_worker.items(), key=lambda kv: str(kv[0]))]  # fmt: skip
    shares = [e["cpu_share"] for e in each if e["cpu_share"] is not None]
    lags = [e["loop_lag_p99_ms"] for e in each if e["loop_lag_p99_ms"] is not None]
    loads = [s["load1"] for s in inside if s.get("load1") is not None]
    return ClientFigures(
        cpu_share=max(shares, default=None),
        loop_lag_p99_ms=max(lags, default=None),
        send_wait_s=_percentiles(acc.hist["send_wait"], (50, 99), US),
        saturated=any(e["saturated"] for e in each),
        held_up=any(e["held_up"] for e in each),
        machine_load=max(loads, default=None),
        cores=max((s["cores"] for s in inside if s.get("cores")), default=None),
        workers=each if len(each) > 1 or (each and each[0]["worker"] is not None) else None,
        gc=(gc := gc_figures(samples)),
        paused_calls=acc.pauses.figures(acc.sums["measured"], timed=gc["collections"] is not None),
    )


def _concurrency(acc: Accumulator, win: Window, run: RunData) -> ConcurrencyFigures:
    """The lanes asked and what they did in the steady window (judged unless the window is the whole run)."""
    steady = win.steady and (run.footer or {}).get("window") != "whole"
    return concurrency_figures(acc.lanes, win.parts or ((win.start, win.end),), steady, run.header, run.footer)


def _process_load(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """One process's CPU share of one core and its worst event-loop lag over ``samples``."""
    wall = sum(s["wall_s"] for s in samples)
    cpu = sum(s["cpu_s"] for s in samples)
    lag = max((s["lag_p99_ms"] for s in samples), default=None)
    share = cpu / wall if wall else None
    saturated = share is not None and share > SATURATED_CPU_SHARE
    held_up = not saturated and lag is not None and lag > SATURATED_LAG_MS
    return {"cpu_share": share, "loop_lag_p99_ms": lag, "saturated": saturated, "held_up": held_up}
