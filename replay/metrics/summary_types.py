"""The summary's shape: one typed value per run, made by ``summary.figures`` from the run's accumulators (the live
run, ``replay report`` and every span and window of a soak alike) and finished by ``runner.rebuild.finish``.

``to_dict()`` is the JSON of ``replay run --json`` and ``replay report --json`` (docs/metrics.md defines every
key); ``schema_version`` says which shape it is. The figures whose parts are open-ended (per error class, per
route, per bucket, a recipe's blocks) are plain JSON values here, each defined in docs/metrics.md; the rest are
typed. A ``Summary`` also reads like the dict it gives (``summary["ttft_s"]["p50"]``), so code written against
the dict keeps working; the dict is rebuilt on each read, so what a reader changes in it never changes the summary.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replay.metrics.concurrency import ConcurrencyFigures

SCHEMA_VERSION = 1  # the summary's shape; raised when a key changes meaning or goes (new keys keep it)

JSON = dict[str, Any]


@dataclass(slots=True)
class Percentiles:
    """HdrHistogram percentiles (``p50``, ``p95``, ... in ``points``, None without samples), mean and count."""

    points: dict[str, float | None]
    mean: float | None
    n: int
    not_measured: int | None = None  # the calls the figure covers that have no value of it (a per-call speed's)

    def to_dict(self) -> JSON:
        out: JSON = {**self.points, "mean": self.mean, "n": self.n}
        if self.not_measured is not None:
            out["not_measured"] = self.not_measured
        return out


@dataclass(slots=True)
class RunIdentity:
    """What the summary was made of (from the run header), so two summaries can be told apart."""

    host: str | None
    api: str | None
    model: str | None
    preset: str | None
    dialect: str | None
    host_name: str | None
    simulated_profile: str | None
    simulated_faults: str | None
    concurrency: int | None
    open_loop: JSON | None
    duration_s: float | None
    tasks: int | None
    tool_time: str | None
    seed: int | None
    workload: JSON
    created: str | None
    replay_version: str | None


@dataclass(slots=True)
class WindowFigures:
    """The steady window, in seconds after the run's start, and the calls the per-call figures cover."""

    start_s: float
    end_s: float
    steady: bool
    requests: int  # the calls the per-call figures cover
    of_requests: int  # beside every call of the run (warm-up calls aside)
    whole_run: bool  # a --tasks run: the window is the run


@dataclass(slots=True)
class TokenCounts:
    cached_input: float
    new_input: float
    output: float


@dataclass(slots=True)
class Throughput:
    """Tokens attributed to when they happened, over the window's length; per GPU when the GPUs are known."""

    total_tps: float | None
    cached_input_tps: float | None
    new_input_tps: float | None
    output_tps: float | None
    total_tokens_per_min: float | None
    output_tokens_per_min: float | None
    tokens: TokenCounts
    input_from_client_estimate: bool
    gpus: int | None = None
    total_tps_per_gpu: float | None = None
    output_tps_per_gpu: float | None = None
    power_kw: float | None = None
    total_tps_per_mw: float | None = None
    output_tps_per_mw: float | None = None


@dataclass(slots=True)
class CacheFigures:
    client_reuse_ratio: float | None
    host_hit_ratio: float | None
    efficiency: float | None
    requests_with_cached_tokens: int
    requests: int


@dataclass(slots=True)
class Totals:
    """Whole-run sums of what the host reported and of the client's estimates."""

    requests: int
    ok: int
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int
    prompt_tokens_est: int
    reusable_prefix_tokens: int


@dataclass(slots=True)
class ClientFigures:
    """Was the client itself the bottleneck (its CPU share, loop lag and send wait; per worker process)."""

    cpu_share: float | None
    loop_lag_p99_ms: float | None
    send_wait_s: Percentiles
    saturated: bool
    held_up: bool  # the loop lagged while the process used little CPU: the machine was busy, not the client
    machine_load: float | None  # the highest 1-minute load average sampled
    cores: int | None
    workers: list[JSON] | None = None  # with --workers: each worker's own figures
    gc: JSON | None = None  # the collections of every replay process, in all (each null: not counted)
    paused_calls: JSON | None = None  # the measured calls whose timing includes a client pause; the clean ones' figures

    def to_dict(self) -> JSON:
        out = {
            "cpu_share": self.cpu_share,
            "loop_lag_p99_ms": self.loop_lag_p99_ms,
            "send_wait_s": self.send_wait_s.to_dict(),
            "saturated": self.saturated,
            "held_up": self.held_up,
            "machine_load": self.machine_load,
            "cores": self.cores,
            "gc": self.gc,
            "paused_calls": self.paused_calls,
        }
        return out if self.workers is None else out | {"workers": self.workers}


@dataclass(slots=True)
class Verdict:
    """How the run is judged: ``exit_code`` 0 passed, 2 breached, 3 incomplete, 128+N a signal."""

    passed: bool
    exit_code: int
    reasons: list[str]
    warnings: list[str] = field(default_factory=list)  # said beside the verdict, no exit code changed


def as_json(summary: Mapping[str, Any]) -> JSON:
    """The JSON dict of a summary, whether it is a ``Summary`` or already its dict."""
    return summary.to_dict() if isinstance(summary, Summary) else dict(summary)


@dataclass(slots=True, eq=False)
class Summary(Mapping[str, Any]):
    """Every figure of a run (docs/metrics.md); ``to_dict()`` is its JSON."""

    run: RunIdentity
    requests: int
    attempts: int
    retries: int
    errors: int
    error_rate: float | None
    attempt_error_rate: float | None
    errors_by_class: dict[str, int]
    invalid_usage: int
    window_s: float
    window: WindowFigures
    ttft_s: Percentiles
    ttfat_s: Percentiles
    e2e_s: Percentiles
    itl_s: Percentiles
    interactivity: JSON
    interactivity_e2e: JSON  # 1 / pX of each call's e2e latency over its output tokens (InferenceX AgentX's x axis)
    user_decode_tps: Percentiles
    user_output_tps_incl_wait: Percentiles
    throughput: Throughput
    goodput: JSON  # the calls and tasks that met the per-call SLO (--slo), and their throughput (docs/metrics.md)
    cache: CacheFigures
    tasks: JSON
    totals: Totals
    client: ClientFigures
    breakdown: JSON  # by context and turn depth (docs/metrics.md, "Breakdowns")
    # What the host said of itself (docs/metrics.md, docs/providers.md), each a key at the JSON's top level:
    # server (only when the host sent timings), routes, service_tiers, speed_modes, cost, rate_limits, connections,
    # provider_limits.
    host_figures: JSON
    warmup_requests: int
    answers: JSON | None  # the answers' checks (docs/metrics.md, "Answers")
    # The open loop's and the recipes' figures (docs/recipes.md), each a key at the JSON's top level: intended, and
    # under a recipe its name (recipe), its validity, agentx, aa, beside.
    recipe_figures: JSON
    concurrency: ConcurrencyFigures | None = None  # asked and delivered side by side (metrics/concurrency.py)
    schema_version: int = SCHEMA_VERSION
    # Added when the run is finished (runner.rebuild.finish), each absent from the JSON until then:
    recorded_timeline: JSON | None = None  # breakdown.recorded_timeline: the replay beside the recorded timeline
    span: JSON | None = None  # replay report --from/--to
    truth: JSON | None = None  # against the simulated host's truth log
    segments: list[JSON] | None = None  # a resumed run's segments
    windows: list[JSON] | None = None  # a soak's figures over time
    thresholds: list[JSON] | None = None
    verdict: Verdict | None = None
    baseline: JSON | None = None
    history: JSON | None = None  # replay run --history: tonight among the nights of its history

    def to_dict(self) -> JSON:
        """The JSON of ``replay run --json`` and ``replay report --json`` (a new dict each time)."""
        breakdown = dict(self.breakdown)
        if self.recorded_timeline is not None:
            breakdown["recorded_timeline"] = self.recorded_timeline
        out: JSON = {
            "schema_version": self.schema_version,
            "run": asdict(self.run),
            "requests": self.requests,
            "attempts": self.attempts,
            "retries": self.retries,
            "errors": self.errors,
            "error_rate": self.error_rate,
            "attempt_error_rate": self.attempt_error_rate,
            "errors_by_class": dict(self.errors_by_class),
            "invalid_usage": self.invalid_usage,
            "window_s": self.window_s,
            "window": asdict(self.window),
            "ttft_s": self.ttft_s.to_dict(),
            "ttfat_s": self.ttfat_s.to_dict(),
            "e2e_s": self.e2e_s.to_dict(),
            "itl_s": self.itl_s.to_dict(),
            "interactivity": self.interactivity,
            "interactivity_e2e": self.interactivity_e2e,
            "user_decode_tps": self.user_decode_tps.to_dict(),
            "user_output_tps_incl_wait": self.user_output_tps_incl_wait.to_dict(),
            "throughput": asdict(self.throughput),
            "goodput": dict(self.goodput),
            "cache": asdict(self.cache),
            "tasks": self.tasks,
            "totals": asdict(self.totals),
            "client": self.client.to_dict(),
            **({"concurrency": self.concurrency.to_dict()} if self.concurrency is not None else {}),
            "breakdown": breakdown,
            **self.host_figures,
            "warmup_requests": self.warmup_requests,
            "answers": self.answers,
            **self.recipe_figures,
        }
        later = {
            "span": self.span,
            "truth": self.truth,
            "segments": self.segments,
            "windows": self.windows,
            "thresholds": self.thresholds,
            "verdict": asdict(self.verdict) if self.verdict is not None else None,
            "baseline": self.baseline,
            "history": self.history,
        }
        out.update((k, v) for k, v in later.items() if v is not None)
        return out

    # --- read as the dict it gives (the library's summaries were dicts) -------------------------------------------
    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Summary):
            return self.to_dict() == other.to_dict()
        if isinstance(other, Mapping):
            return self.to_dict() == dict(other)
        return NotImplemented
