"""One run, end to end: load the workload, pick the host (or start the simulated one), write the run file,
run the closed loop, summarise and judge. The CLI, the library face and the tests all enter here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

from replay import event_loop
from replay.clients.client import make_client, make_flavour
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import CONNECTIONS, HostConfig
from replay.clients.transport import Transport
from replay.hosts.hardware import sim_profile_of
from replay.hosts.resolve import HostError, ResolvedHost, rate_card_option, resolve
from replay.loops.closed_loop import ClosedLoop
from replay.loops.load import LoadConfig
from replay.loops.open_loop import OpenLoop, OpenLoopConfig
from replay.loops.skeleton import run_loop
from replay.metrics.recorded_timeline import recorded
from replay.metrics.streaming import StreamSummary
from replay.metrics.summary_types import Summary
from replay.metrics.windows import Tee, WindowRecorder
from replay.records.reader import read_run
from replay.records.run_file import RunWriter
from replay.records.scrub import Scrubber, header_secrets
from replay.reports.prometheus_export import PrometheusSink
from replay.runner.embedded_host import embedded_host
from replay.runner.recipes import get_recipe, header_block
from replay.runner.resume import Previous, ResumeError, check_same, read_previous
from replay.runner.run_error import RunError
from replay.runner.run_header import build_header
from replay.runner.run_spec import RunSpec
from replay.runner.run_summary import run_summary, threshold_check
from replay.runner.soak_jobs import close_last_window, host_sampler, side_jobs
from replay.verdict.judge import EXIT_INCOMPLETE
from replay.verdict.thresholds import ThresholdError, parse_all
from replay.workload.trajectory import Workload, default_workload_path, load_workload

SIM_MODEL = "replay-sim"
DEFAULT_WINDOW_S = 60.0
LONG_RUN_S = 600.0  # runs this long or longer get windows unless told otherwise
DEFAULT_RETRIES = 3  # against a real host; the simulated host gets none unless asked (its faults are the point)


@dataclass(slots=True)
class RunResult:
    summary: Summary  # reads as the dict of `replay run --json` too; to_dict() is that dict
    header: dict[str, Any]
    path: Path
    footer: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        """0 passed, 2 a threshold breached, 3 not complete, 128+N stopped by signal N (replay.verdict.judge)."""
        verdict = self.summary.verdict
        return verdict.exit_code if verdict is not None else EXIT_INCOMPLETE


def default_out_path() -> Path:
    return Path("replay-runs") / f"run-{datetime.now():%Y%m%d-%H%M%S}.jsonl"


async def detect_model(base_url: str, timeout_s: float = 10.0, headers: dict[str, str] | None = None) -> str | None:
    """The first model a host lists at /models, for when --model is not given (``headers``: its auth)."""
    with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError, KeyError, IndexError, TypeError):
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as http,
            http.get(base_url.rstrip("/") + "/models", headers=headers, allow_redirects=False) as resp,  # auth stays
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
    from replay.sim.core.profile_file import resolve_profile

    return resolve_profile(spec.sim_profile, spec.sim_profile_file).name


def truth_log_path(spec: RunSpec, out: Path, segment: int = 0) -> Path | None:
    """Where the embedded host writes its truth log: as asked, or next to the run file (a real host has none);
    a resumed run's later segments each write their own. Every run against the sim can then say how far the
    client's times are from the host's own."""
    if spec.host:
        return None
    path = Path(spec.sim_truth_log) if spec.sim_truth_log else out.with_suffix(".truth.jsonl")
    return path.with_suffix(f".{segment}.jsonl") if segment else path


def resolve_host(spec: RunSpec) -> tuple[RunSpec, ResolvedHost]:
    """``spec`` with its host resolved (a preset or hosts-file name becomes its URL, model, flavour, key variable,
    body and headers) and the resolved host itself; RunError naming the file and field, or the option. Once per
    run: a spec already resolved (``spec.endpoint.resolved``) is returned as it is."""
    if spec.endpoint.resolved is not None:
        return spec, spec.endpoint.resolved
    try:
        r = resolve(spec)
        if spec.rate_card:
            r = dataclasses.replace(r, price=rate_card_option(spec.rate_card))
        facts = spec.recipe_facts  # --gpus and --power-kw over the hosts file's; the recipe's figures and the header's
        gpus = facts.gpus or r.gpus
        if gpus is None and not spec.host:  # the embedded simulated host: its profile's GPUs
            profile = sim_profile_of(spec.sim_profile, spec.sim_profile_file)
            gpus = profile.gpus if profile is not None else None
        r = dataclasses.replace(r, gpus=gpus, power_kw=facts.power_kw or r.power_kw)
    except HostError as exc:
        raise RunError(str(exc)) from None
    if spec.connection not in CONNECTIONS:
        raise RunError(f"--connection: expected one of {', '.join(CONNECTIONS)}, not {spec.connection!r}")
    endpoint = dataclasses.replace(spec.endpoint, host=r.base_url, model=r.model, api=r.api, api_key_env=r.key_env,
                                   extra_body=r.body, headers=r.headers, resolved=r)  # fmt: skip
    recipe = dataclasses.replace(spec.recipe_spec, facts=dataclasses.replace(facts, gpus=r.gpus, power_kw=r.power_kw))
    return dataclasses.replace(spec, endpoint=endpoint, recipe_spec=recipe), r


def check_spec(spec: RunSpec) -> RunSpec:
    """Everything about ``spec`` that can be wrong before a byte is sent (RunError naming the option); returns it with
    its host resolved, for the run to use as it is."""
    spec, _ = resolve_host(spec)
    flavoured = (
        ("--cache-control", spec.cache_control, "anthropic", "Anthropic's cache breakpoints"),
        ("--responses-state", spec.responses_state, "responses", "the Responses API's previous_response_id"),
    )
    for option, value, api, what in flavoured:
        if value != "none" and spec.api != api:
            raise RunError(
                f"{option} {value} does nothing here: {what}, and this run's API is {spec.api} (--api {api})"
            )
    try:
        parse_all(spec.thresholds, check_figures=True)
    except ThresholdError as exc:
        raise RunError(f"--threshold: {exc}") from None
    try:
        make_flavour(spec.api, RequestOptions("m"))
    except ValueError as exc:
        raise RunError(f"--api: {exc}") from None
    if spec.baseline and not Path(spec.baseline).is_file():
        raise RunError(f"--baseline: {spec.baseline}: no such run file")
    if spec.prometheus and not re.fullmatch(r"[\w.\-]*:\d{1,5}", spec.prometheus):
        raise RunError(f"--prometheus: expected HOST:PORT, such as 127.0.0.1:9464; got {spec.prometheus!r}")
    check_workers(spec)
    if not spec.host:
        from replay.runner.sim_options import check_sim_options

        check_sim_options(spec)
    return spec


def check_workers(spec: RunSpec) -> None:
    """``--workers``: 1 or more; more than 1 (or ``--ray``) shards the closed loop, so what needs one process is
    refused."""
    if spec.workers < (0 if spec.ray else 1):
        raise RunError(f"--workers: expected 1 or more, not {spec.workers}")
    if spec.workers == 1 and not spec.ray:
        return
    sharded = "--ray" if spec.ray else f"--workers {spec.workers}"
    one_process = [("--resume", spec.resume), ("an open loop (--arrivals)", spec.arrivals is not None),
                   ("--max-rpm (one limiter for every session)", spec.load.rate_limit is not None),
                   ("--start-at and the recipes' lanes (warm-up barrier, background subagents, idle caps)",
                    spec.load.lanes is not None)]  # fmt: skip
    for name, asked in one_process:
        if asked:
            raise RunError(f"{sharded}: {name} runs in one process; leave {sharded.split()[0]} out")
    if spec.ray and importlib.util.find_spec("ray") is None:  # before a byte is written
        raise RunError("--ray needs Ray here and on the cluster: pip install 'agentic-replay[ray]'")


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


def _load_config(spec: RunSpec, previous: Previous | None = None) -> LoadConfig:
    retries = spec.retries if spec.retries is not None else (DEFAULT_RETRIES if spec.host else 0)
    load = dataclasses.replace(spec.load, retry=dataclasses.replace(spec.load.retry, retries=retries))
    if previous is not None and load.duration_s is not None:  # a resumed soak runs for what is left of it
        load = dataclasses.replace(load, duration_s=max(load.duration_s - previous.elapsed_s, 1.0))
    return load


def load_run_workload(spec: RunSpec) -> Workload:
    """The run's workload, loaded under its history policy and ``--unrecorded-context``; RunError when the API
    flavour cannot send what it holds (image parts to a text-prompt flavour)."""
    try:
        workload = load_workload(
            spec.trajectories or [default_workload_path()], spec.tokenizer, spec.history, spec.unrecorded_context
        )
    except ValueError as exc:
        raise RunError(str(exc)) from None
    check_images(workload, spec.api)
    return workload


def check_images(workload: Workload, api: str) -> None:
    images = workload.images
    if images and not make_flavour(api, RequestOptions("m")).takes_images:
        raise RunError(
            f"--api {api}: its prompts are text, and the workload holds {images} image parts "
            "(use chat, responses or anthropic, which send them as image parts)"
        )


def execute(spec: RunSpec, workload: Workload | None = None) -> RunResult:
    """Run, summarise and judge; the run file is complete (footer included) when this returns."""
    spec = check_spec(spec)  # the host resolved here, once (a spec the caller checked already is used as it is)
    resolved = spec.endpoint.resolved
    assert resolved is not None
    ensure_open_files(max(spec.load.concurrency, spec.max_live or 0))
    out = Path(spec.out) if spec.out else default_out_path()
    try:
        previous = read_previous(out) if spec.resume else None
    except (ResumeError, ValueError) as exc:
        raise RunError(str(exc)) from None
    workload = workload or load_run_workload(spec)
    check_images(workload, spec.api)  # a workload handed in too
    asked_duration = spec.load.duration_s
    spec = dataclasses.replace(spec, load=_load_config(spec, previous))
    if previous is not None:  # before anything is written: a refused resume leaves the file as it was
        _check_resume(spec, previous, workload, asked_duration)
    key = HostConfig("", "", api_key_env=spec.api_key_env).api_key()
    secrets = ([key] if key else []) + header_secrets(spec.headers)  # a header whose name says it holds a secret
    # The run's summary is made as its records are written, by the same StreamSummary `replay report` reads the file
    # back with; a resumed run's earlier segments go into it first, as the report would read them.
    stream = StreamSummary(recorded=lambda header: recorded(out, header, workload))
    if previous is not None:
        read_run(out, notes=lambda _: None, sink=stream)  # (read_previous has said what it skipped)
    window_s = spec.window_s or (DEFAULT_WINDOW_S if (spec.load.duration_s or 0) >= LONG_RUN_S else None)
    if (spec.scrape_metrics or spec.baseline) and not window_s:  # the host's metrics and the noise: by window
        window_s = DEFAULT_WINDOW_S
    windows = WindowRecorder(window_s, previous.windows if previous else 0) if window_s else None
    exporter = PrometheusSink(spec.host or f"simulated:{spec.sim_profile}") if spec.prometheus else None
    sink = Tee(*(s for s in (stream, windows, exporter) if s is not None))
    writer = RunWriter(out, Scrubber(secrets), sink=sink, append=previous is not None)
    truth_log = truth_log_path(spec, out, previous.segments if previous else 0)
    footer: dict[str, Any] = {"stop_reason": "crashed"}
    try:
        with _host(spec, truth_log) as (base_url, sim):
            auth = make_flavour(spec.api, RequestOptions("m")).headers(key)  # a hosted API lists its models
            model = spec.model or (SIM_MODEL if sim else event_loop.run(detect_model(base_url, headers=auth)))
            if not model:
                raise RunError(f"no --model given and {base_url}/models lists no model")
            host = spec.endpoint.host_config(base_url, model, resend_stale=spec.load.retry.retries > 0)
            options = spec.endpoint.request_options(model)
            header = build_header(spec, host, workload, sim, truth_log) | _recipe_header(spec)
            header["host"] |= resolved.public()  # preset, dialect, GPUs, power, rate card: reports and cost use them
            if spec.workers > 1 or spec.ray:
                header["load"] |= {"workers": spec.workers or "auto"} | ({"ray": spec.ray} if spec.ray else {})
            if previous is None:
                writer.header(header)
            else:
                _resume_into(writer, previous, header, truth_log)
            try:
                sampler = host_sampler(spec, windows, base_url)
                jobs = side_jobs(spec, windows, writer, exporter, sampler)
                footer = event_loop.run(_loop(spec, workload, host, options, writer, stream, jobs, previous))
                if windows is not None:
                    close_last_window(windows, writer, sampler)
            except KeyboardInterrupt:
                footer = {"stop_reason": "interrupted"}
                raise
    finally:
        with contextlib.suppress(Exception):
            writer.footer({**footer, "requests": writer.requests, "tasks": writer.tasks})
        writer.close()
    return RunResult(run_summary(writer, stream), writer.header_data, out, writer.footer_data)


def _check_resume(spec: RunSpec, previous: Previous, workload: Workload, duration: float | None) -> None:
    """The resumed run's configuration against the file's (the host's own answers, such as its model, aside)."""
    model = spec.model or previous.header.get("host", {}).get("model")
    host = HostConfig(spec.host or previous.header.get("host", {}).get("base_url", ""), model, spec.api)
    sim = None if spec.host else {"profile": _sim_profile_name(spec), "faults": spec.sim_faults,
                                  "dialect": spec.sim_dialect, "fallback": spec.sim_fallback}  # fmt: skip
    try:
        check_same(previous.header, build_header(spec, host, workload, sim, None), duration)
    except ResumeError as exc:
        raise RunError(str(exc)) from None


def _resume_into(writer: RunWriter, previous: Previous, header: dict[str, Any], truth_log: Path | None) -> None:
    writer.resumed(previous.header)
    writer.mark("segment", {"index": previous.segments, "created": header["created"], "clock": header["clock"],
                            "after": previous.stop_reason or "killed (no footer)", "elapsed_before_s":
                            previous.elapsed_s, "tasks_before": previous.tasks_started,
                            "simulated_truth_log": str(truth_log) if truth_log else None})  # fmt: skip


def _recipe_header(spec: RunSpec) -> dict[str, Any]:
    """The header's recipe entry (rules and host facts) and, for an open loop, its arrivals and cap."""
    recipe = get_recipe(spec.recipe) if spec.recipe else None
    out: dict[str, Any] = {"recipe": header_block(recipe, spec.recipe_facts)}
    if spec.arrivals is not None:
        out["open_loop"] = {
            "arrivals": str(spec.arrivals),
            "max_live": spec.max_live or spec.load.concurrency,
        }
    return out


def _loop(spec: RunSpec, workload: Workload, host: HostConfig, options: RequestOptions, writer: RunWriter,
          stream: StreamSummary, jobs: list[Any], previous: Any) -> Any:  # fmt: skip
    """The closed loop, or the open loop when the spec has arrivals."""
    factory = lambda transport: make_client(host, options, transport)  # noqa: E731
    check = threshold_check(spec, stream, writer)
    if spec.arrivals is None and (spec.workers > 1 or spec.ray):
        return _sharded(spec, workload, host, options, writer, check, jobs)
    model = ClosedLoop(previous.tasks_started if previous else 0) if spec.arrivals is None else OpenLoop(
        OpenLoopConfig(spec.arrivals, spec.max_live or spec.load.concurrency))  # fmt: skip
    return run_loop(workload, factory, Transport(host), spec.load, model, writer, spec.progress, check, jobs)


async def _sharded(spec: RunSpec, workload: Workload, host: HostConfig, options: RequestOptions, writer: RunWriter,
                   check: Any, jobs: list[Any]) -> dict[str, Any]:  # fmt: skip
    """The closed loop's lanes over ``spec.workers`` processes, this one writing the run file."""
    from replay.scale.workers import ShardedRun, WorkerError, run_workers

    plan = ShardedRun(workload, host, options, spec.load, spec.workers)
    try:
        if spec.ray:  # the same workers as Ray actors (replay.scale.ray_workers: Ray is imported there only)
            from replay.scale.ray_workers import run_on_ray

            return await run_on_ray(spec.ray, spec.ray_listen, plan, writer, spec.progress, check, jobs)
        return await run_workers(plan, writer, spec.progress, check, jobs)
    except WorkerError as exc:
        raise RunError(writer.scrub_text(str(exc))) from None
