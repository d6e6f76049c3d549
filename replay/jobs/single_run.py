"""One run, end to end: load the workload, pick the host (or start the simulated one), write the run file,
run the closed loop, summarise and judge. The CLI, the library face and the tests all enter here.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

from replay import event_loop
from replay.clients.client import make_client, make_flavour
from replay.clients.flavour import RequestOptions
from replay.clients.host import DEFAULT_MAX_RESPONSE_BYTES, HostConfig, check_url
from replay.clients.transport import Transport
from replay.jobs.embedded_host import embedded_host
from replay.jobs.recipes import RecipeFacts, get_recipe, header_block
from replay.jobs.run_header import build_header
from replay.results.metrics import summarize
from replay.results.records import RunWriter
from replay.results.scrub import Scrubber
from replay.results.thresholds import ThresholdError, parse_all
from replay.results.truth_compare import compare, load_truth
from replay.results.verdict import judge
from replay.sessions.closed_loop import LoadConfig, run_load
from replay.workload.history import HistoryPolicy
from replay.workload.trajectory import Workload, default_workload_path, load_workload

SIM_MODEL = "replay-sim"
DEFAULT_RETRIES = 3  # against a real host; the simulated host gets none unless asked (its faults are the point)


class RunError(Exception):
    """A run that cannot start, with a message for the user."""


@dataclass(slots=True)
class RunSpec:
    """Everything a run needs; ``host`` None means the embedded simulated host."""

    trajectories: list[str] = field(default_factory=list)
    host: str | None = None
    model: str | None = None
    api: str = "chat"  # chat | completions | responses | anthropic
    api_key_env: str = "OPENAI_API_KEY"
    load: LoadConfig = field(default_factory=LoadConfig)
    retries: int | None = None  # None: DEFAULT_RETRIES against a real host, 0 against the simulated one
    force_output_length: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)
    request_timeout_s: float = 600.0
    stall_timeout_s: float = 120.0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    cache_control: str = "none"  # anthropic: none | auto
    responses_state: str = "none"  # responses: none | previous
    thresholds: list[str] = field(default_factory=list)  # 'ttft_p95<2s', ... (replay.results.thresholds)
    abort_on_fail: bool = False  # stop the run as soon as a threshold is breached (checked every few seconds)
    out: str | None = None
    sim_profile: str = "default"
    sim_profile_file: str | None = None  # a profile from a file (its base: sim_profile)
    sim_truth_log: str | None = None
    sim_faults: str | None = None
    sim_fault_seed: int = 0
    sim_dialect: str | None = None
    sim_fallback: str | None = None
    tokenizer: str | None = None
    history: HistoryPolicy = field(default_factory=HistoryPolicy)
    progress: bool = True
    recipe: str | None = None  # agentx | aa-agentperf (replay.jobs.recipes), already applied to the fields above
    recipe_facts: RecipeFacts = field(default_factory=RecipeFacts)  # GPUs, power, rate card, SLO tiers
    arrivals: Any = None  # an open loop's arrivals (replay.sessions.arrivals.Arrivals); None: the closed loop
    max_live: int | None = None  # open loop: sessions at once (default: the concurrency)


@dataclass(slots=True)
class RunResult:
    summary: dict[str, Any]
    header: dict[str, Any]
    path: Path
    footer: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        """0 passed, 2 a threshold breached, 3 not complete, 128+N stopped by signal N (replay.results.verdict)."""
        return int(self.summary["verdict"]["exit_code"])


def default_out_path() -> Path:
    return Path("replay-runs") / f"run-{datetime.now():%Y%m%d-%H%M%S}.jsonl"


async def detect_model(base_url: str, timeout_s: float = 10.0) -> str | None:
    """The first model a host lists at /models, for when --model is not given."""
    with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError, KeyError, IndexError, TypeError):
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as http,
            http.get(base_url.rstrip("/") + "/models") as resp,
        ):
            data = await resp.json(content_type=None)
            return str(data["data"][0]["id"])
    return None


@contextlib.contextmanager
def _host(spec: RunSpec, truth_log: Path | None) -> Iterator[tuple[str, dict[str, Any] | None]]:
    if spec.host:
        yield spec.host, None
        return
    truth = str(truth_log) if truth_log else None
    with contextlib.ExitStack() as stack:
        try:
            sim = stack.enter_context(embedded_host(spec.sim_profile, truth, spec.sim_faults, spec.sim_fault_seed,
                                                    dialect=spec.sim_dialect, fallback=spec.sim_fallback,
                                                    profile_file=spec.sim_profile_file))  # fmt: skip
        except RuntimeError as exc:
            raise RunError(str(exc)) from None
        yield sim.base_url, {"profile": _sim_profile_name(spec), "profile_file": spec.sim_profile_file,
                             "faults": spec.sim_faults, "dialect": spec.sim_dialect, "fallback": spec.sim_fallback,
                             "pid": sim.pid}  # fmt: skip


def _sim_profile_name(spec: RunSpec) -> str:
    if not spec.sim_profile_file:
        return spec.sim_profile
    from replay.sim.profile_file import resolve_profile

    return resolve_profile(spec.sim_profile, spec.sim_profile_file).name


def truth_log_path(spec: RunSpec, out: Path) -> Path | None:
    """Where the embedded host writes its truth log: as asked, or next to the run file (a real host has none).
    Every run against the sim can then say how far the client's times are from the host's own."""
    if spec.host:
        return None
    return Path(spec.sim_truth_log) if spec.sim_truth_log else out.with_suffix(".truth.jsonl")


def check_spec(spec: RunSpec) -> None:
    """Everything about ``spec`` that can be wrong before a byte is sent: RunError naming the option."""
    if spec.host:
        try:
            check_url(spec.host)
        except ValueError as exc:
            raise RunError(f"--host: {exc}") from None
    try:
        parse_all(spec.thresholds, check_figures=True)
    except ThresholdError as exc:
        raise RunError(f"--threshold: {exc}") from None
    try:
        make_flavour(spec.api, RequestOptions("m"))
    except ValueError as exc:
        raise RunError(f"--api: {exc}") from None
    if not spec.host:
        from replay.jobs.sim_options import check_sim_options

        check_sim_options(spec)


def ensure_open_files(concurrency: int) -> None:
    """Raise the soft open-file limit to cover the sessions' connections (2 per session, and room for files), or
    say before the run why it cannot: 256 sessions under a limit of 128 would otherwise fail thousands of calls."""
    import resource

    need = 2 * concurrency + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    target = need if hard == resource.RLIM_INFINITY else min(need, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < need:
        raise RunError(
            f"--concurrency {concurrency} needs about {need} open files, and this process may open only {soft} (hard"
            f" limit {hard}): raise it (ulimit -n {need}) or lower --concurrency"
        )


def _load_config(spec: RunSpec) -> LoadConfig:
    retries = spec.retries if spec.retries is not None else (DEFAULT_RETRIES if spec.host else 0)
    return dataclasses.replace(spec.load, retry=dataclasses.replace(spec.load.retry, retries=retries))


def execute(spec: RunSpec, workload: Workload | None = None) -> RunResult:
    """Run, summarise and judge; the run file is complete (footer included) when this returns."""
    check_spec(spec)
    ensure_open_files(max(spec.load.concurrency, spec.max_live or 0))
    workload = workload or load_workload(spec.trajectories or [default_workload_path()], spec.tokenizer, spec.history)
    spec = dataclasses.replace(spec, load=_load_config(spec))
    out = Path(spec.out) if spec.out else default_out_path()
    key = HostConfig("", "", api_key_env=spec.api_key_env).api_key()
    writer = RunWriter(out, Scrubber([key] if key else []))
    truth_log = truth_log_path(spec, out)
    footer: dict[str, Any] = {"stop_reason": "crashed"}
    try:
        with _host(spec, truth_log) as (base_url, sim):
            model = spec.model or (SIM_MODEL if sim else event_loop.run(detect_model(base_url)))
            if not model:
                raise RunError(f"no --model given and {base_url}/models lists no model")
            host = HostConfig(base_url, model, spec.api, spec.api_key_env, spec.request_timeout_s,
                              spec.stall_timeout_s, spec.max_response_bytes)  # fmt: skip
            options = RequestOptions(model, spec.force_output_length, spec.extra_body, spec.cache_control,
                                     spec.responses_state)  # fmt: skip
            writer.header(build_header(spec, host, workload, sim, truth_log) | _recipe_header(spec))
            try:
                footer = event_loop.run(_loop(spec, workload, host, options, writer))
            except KeyboardInterrupt:
                footer = {"stop_reason": "interrupted"}
                raise
    finally:
        with contextlib.suppress(Exception):
            writer.footer({**footer, "requests": len(writer.data.requests), "tasks": len(writer.data.tasks)})
        writer.close()
    summary = summarize(writer.data)
    if truth_log is not None and truth_log.exists():  # complete: the host has stopped
        summary["truth"] = compare(writer.data.requests, load_truth(truth_log))
    judge(summary, writer.data.header, writer.data.footer)
    return RunResult(summary, writer.data.header, out, writer.data.footer)


def _recipe_header(spec: RunSpec) -> dict[str, Any]:
    """The header's recipe entry (rules and host facts) and, for an open loop, its arrivals and cap."""
    recipe = get_recipe(spec.recipe) if spec.recipe else None
    out: dict[str, Any] = {"recipe": header_block(recipe, spec.recipe_facts)}
    if spec.arrivals is not None:
        out["open_loop"] = {"arrivals": str(spec.arrivals), "max_live": spec.max_live or spec.load.concurrency}
    return out


def _loop(spec: RunSpec, workload: Workload, host: HostConfig, options: RequestOptions, writer: RunWriter) -> Any:
    """The closed loop, or the open loop when the spec has arrivals."""
    factory = lambda transport: make_client(host, options, transport)  # noqa: E731
    check = _threshold_check(spec, writer)
    if spec.arrivals is None:
        return run_load(workload, factory, Transport(host), spec.load, writer, progress=spec.progress, check=check)
    from replay.sessions.open_loop import OpenLoopConfig, run_open_loop

    config = OpenLoopConfig(spec.arrivals, spec.max_live or spec.load.concurrency)
    return run_open_loop(workload, factory, Transport(host), spec.load, config, writer, spec.progress, check)


def _threshold_check(spec: RunSpec, writer: RunWriter) -> Any:
    """For --abort-on-fail: a check the closed loop calls every few seconds (None: no check)."""
    if not (spec.abort_on_fail and spec.thresholds):
        return None
    thresholds = parse_all(spec.thresholds)

    def check() -> str | None:
        summary = summarize(writer.data)
        if not summary["window"]["steady"]:
            return None  # before the steady window opens, figures are warm-up's
        breached = [r["expr"] for r in (t.judge(summary) for t in thresholds) if not r["ok"] and r["value"] is not None]
        return f"threshold breached: {', '.join(breached)}" if breached else None

    return check
