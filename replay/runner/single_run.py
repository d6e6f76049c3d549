"""One run, end to end: load the workload, pick the host (or start the simulated one), write the run file,
run the closed loop, summarise and judge. The CLI, the library face and the tests all enter here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from replay import event_loop
from replay.clients import tls
from replay.clients.client import make_client, make_flavour
from replay.clients.flavours.base import RequestOptions
from replay.clients.flavours.responses import chained_state_warning
from replay.clients.host import CONNECTIONS, TRANSPORTS, HostConfig
from replay.clients.limits import LimitError, check_ports, check_source_addresses, ensure_open_files
from replay.clients.transport import Transport
from replay.expressions import split_terms
from replay.hosts.hardware import sim_profile_of
from replay.hosts.resolve import HostError, ResolvedHost, rate_card_option, resolve
from replay.loops.closed_loop import ClosedLoop
from replay.loops.load import LoadConfig
from replay.loops.open_loop import OpenLoop, OpenLoopConfig
from replay.loops.skeleton import run_loop
from replay.metrics.goodput import SloError, parse_slo
from replay.metrics.host.cost import for_endpoint
from replay.metrics.recorded_timeline import recorded
from replay.metrics.streaming import StreamSummary
from replay.metrics.summary_types import Summary
from replay.metrics.windows import Tee, WindowRecorder
from replay.records.reader import read_run
from replay.records.run_file import RunFileError, RunWriter
from replay.records.scrub import Scrubber, header_secrets
from replay.reports.prometheus_export import PrometheusSink
from replay.runner.host_models import listed_model
from replay.runner.preflight import (
    SignalNote,
    check_out,
    check_prometheus,
    check_workers,
    footer_on_signals,
    signals_held,
)
from replay.runner.resume import Previous, ResumeError, check_same, read_previous
from replay.runner.run_error import EXIT_INCOMPLETE, EXIT_USAGE, RunError, interrupted, stopped_by
from replay.runner.run_header import build_header, recipe_header, resume_into
from replay.runner.run_spec import RunSpec
from replay.runner.run_summary import check_history, run_summary, threshold_check
from replay.runner.sim_options import run_host, sim_profile_name, truth_log_path
from replay.runner.soak_jobs import close_last_window, host_sampler, side_jobs
from replay.sessions.session import named_error
from replay.verdict.thresholds import ThresholdError, parse_all
from replay.workload.trajectory import Workload, default_workload_path, load_workload

SIM_MODEL = "replay-sim"
DEFAULT_WINDOW_S = 60.0
LONG_RUN_S = 600.0  # runs this long or longer get windows unless told otherwise
DEFAULT_RETRIES = 3  # against a real host; the simulated host gets none unless asked (its faults are the point)

__all__ = ["RunError", "RunResult", "RunSpec", "check_spec", "execute", "resolve_host", "truth_log_path"]


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
        r = dataclasses.replace(r, price=for_endpoint(r.price, r.base_url))  # a regional endpoint's premium
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
    check_transport(spec)
    try:
        parse_all(spec.thresholds, check_figures=True)
    except ThresholdError as exc:
        raise RunError(f"--threshold: {exc}") from None
    try:
        slo = parse_slo(spec.slo)
    except SloError as exc:
        raise RunError(f"--slo: {exc}") from None
    if slo is None and (gated := [t for t in split_terms(spec.thresholds) if t.strip().startswith("goodput.")]):
        raise RunError(f"--threshold {gated[0]!r}: goodput is counted against a per-call SLO: give --slo")
    try:
        make_flavour(spec.api, RequestOptions("m"))
    except ValueError as exc:
        raise RunError(f"--api: {exc}") from None
    if spec.baseline and not Path(spec.baseline).is_file():
        raise RunError(f"--baseline: {spec.baseline}: no such run file")
    if spec.history_file:
        check_history(spec.history_file)
    if spec.prometheus:
        check_prometheus(spec.prometheus)
    check_out(Path(spec.out) if spec.out else default_out_path(), "--resume" if spec.resume else "--out")
    check_workers(spec)
    try:
        check_source_addresses(spec.source_addresses)
        if not spec.ray:  # a Ray run's connections leave from the cluster's nodes, each checked by its workers
            check_ports(max(spec.load.concurrency, spec.max_live or 0), spec.source_addresses)
    except LimitError as exc:
        raise RunError(str(exc)) from None
    if not spec.host:
        from replay.runner.sim_options import check_sim_options

        check_sim_options(spec)
    return spec


def check_transport(spec: RunSpec) -> None:
    """--transport, --ca-bundle and --insecure against the resolved host: RunError naming the option where one does
    nothing or cannot work."""
    if spec.transport not in TRANSPORTS:
        raise RunError(f"--transport: expected one of {', '.join(TRANSPORTS)}, not {spec.transport!r}")
    if spec.transport == "websocket" and spec.api != "responses":
        raise RunError(f"--transport websocket does nothing here: OpenAI's WebSocket mode carries the Responses API, "
                       f"and this run's API is {spec.api} (--api responses)")  # fmt: skip
    if spec.transport == "websocket" and spec.connection != "session":
        raise RunError("--connection per-request does nothing with --transport websocket: each session keeps one "
                       "socket (a new connection per call is --transport http --connection per-request)")  # fmt: skip
    tls_options = [o for o, given in (("--ca-bundle", spec.ca_bundle), ("--insecure", spec.insecure)) if given]
    if len(tls_options) == 2:
        raise RunError("--ca-bundle does nothing with --insecure: nothing is verified (give one of them)")
    if tls_options and spec.host and not spec.host.lower().startswith("https://"):
        raise RunError(f"{tls_options[0]} does nothing here: the host's URL is not https://")
    if spec.ca_bundle:
        try:
            tls.bundle_context(spec.ca_bundle)
        except tls.TlsError as exc:
            raise RunError(str(exc)) from None


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
    try:
        ensure_open_files(max(spec.load.concurrency, spec.max_live or 0))
    except LimitError as exc:
        raise RunError(str(exc)) from None
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
    if (spec.scrape_metrics or spec.baseline or spec.history_file) and not window_s:  # host metrics, noise: by window
        window_s = DEFAULT_WINDOW_S
    windows = WindowRecorder(window_s, previous.windows if previous else 0) if window_s else None
    exporter = PrometheusSink(spec.host or f"simulated:{spec.sim_profile}") if spec.prometheus else None
    sink = Tee(*(s for s in (stream, windows, exporter) if s is not None))
    try:  # locked: a second writer (two --resume of one run) is refused before it writes a byte
        writer = RunWriter(out, Scrubber(secrets), sink=sink, append=previous is not None)
    except RunFileError as exc:
        raise RunError(f"--out: {exc}") from None
    run = _Run(spec, resolved, workload, writer, stream, windows, exporter, previous, key)
    run.truth_log = truth_log_path(spec, out, previous.segments if previous else 0)
    try:
        with footer_on_signals() as run.note:  # SIGTERM and SIGHUP noted: before the loop and after it too
            run.write()
            summary = run.judged()
            if late := run.note.take():  # after the footer: the file is whole, and the command stops as asked
                raise KeyboardInterrupt(late[0])
    except KeyboardInterrupt as exc:
        raise interrupted(stopped_by(exc), out if run.started else None) from None
    return RunResult(summary, writer.header_data, out, writer.footer_data)


@dataclass(slots=True)
class _Run:
    """One run being written: the host, the loop, the footer on every way out, and its summary judged."""

    spec: RunSpec
    resolved: ResolvedHost
    workload: Workload
    writer: RunWriter
    stream: StreamSummary
    windows: WindowRecorder | None
    exporter: PrometheusSink | None
    previous: Previous | None
    key: str | None
    truth_log: Path | None = None
    started: bool = False  # the header (or the resumed segment) is written: from here on the run has started
    note: SignalNote | None = None  # SIGTERM and SIGHUP noted outside the loop (the loop answers those before it)

    def write(self) -> None:
        """The run, its footer written whatever happens; RunError (exit 1 before the start, 3 after)."""
        spec, writer = self.spec, self.writer
        footer: dict[str, Any] = {"stop_reason": "crashed"}
        try:
            with run_host(spec, self.truth_log) as (base_url, sim):
                host, options = self._host(base_url, sim)
                self._begin(host, sim)
                sampler = host_sampler(spec, self.windows, base_url)
                jobs = side_jobs(spec, self.windows, writer, self.exporter, sampler)
                footer = event_loop.run(_loop(spec, self.workload, host, options, writer, self.stream, jobs,
                                              self.previous))  # fmt: skip
                if self.windows is not None:
                    close_last_window(self.windows, writer, sampler)  # the last one, cut at the end
        except KeyboardInterrupt as exc:  # Ctrl-C, or a signal before the loop or just after it: the footer says so
            name = stopped_by(exc)
            footer = {**footer, "stop_reason": "interrupted"}
            if name != "SIGINT":
                footer |= {"stop_reason": f"interrupted ({name})", "signal": name}
            raise
        except RunError:
            raise
        except Exception as exc:  # anything else once the run started: named, exit 3
            if not self.started:
                raise
            footer = {"stop_reason": f"crashed: {named_error(exc)}"}
            raise RunError(f"the run could not complete: {named_error(exc)}", EXIT_INCOMPLETE) from exc
        finally:
            self._end(footer)

    def _host(self, base_url: str, sim: dict[str, Any] | None) -> tuple[HostConfig, RequestOptions]:
        spec = self.spec
        model = spec.model or (SIM_MODEL if sim else listed_model(spec, base_url, self.key))
        host = spec.endpoint.host_config(base_url, model, resend_stale=spec.load.retry.retries > 0)
        options = spec.endpoint.request_options(model)
        if spec.history.output == "live":  # its conversation is the host's answers: kept (export-trajectories RUN)
            options = dataclasses.replace(options, keep_answers=True)
        return host, options

    def _begin(self, host: HostConfig, sim: dict[str, Any] | None) -> None:
        """The header written (or the resumed segment marked): the run has started."""
        spec = self.spec
        if host.insecure:  # loud: on the terminal now, and in the header (host.insecure) for every report
            print(tls.INSECURE_WARNING, file=sys.stderr, flush=True)
        if lost := chained_state_warning(spec.responses_state, self.resolved.dialect, sim is not None):
            print(lost, file=sys.stderr, flush=True)  # and in every report of the run (from its header)
        header = build_header(spec, host, self.workload, sim, self.truth_log) | recipe_header(spec)
        header["host"] |= self.resolved.public()  # preset, dialect, GPUs, power, rate card: reports and cost use them
        if spec.workers > 1 or spec.ray:
            header["load"] |= {"workers": spec.workers or "auto"} | ({"ray": spec.ray} if spec.ray else {})
        try:
            if self.previous is None:
                self.writer.header(header)
            else:
                resume_into(self.writer, self.previous, header, self.truth_log)
        except RunFileError as exc:  # nothing was run
            raise RunError(str(exc)) from None
        self.started = True

    def _end(self, footer: dict[str, Any]) -> None:
        """The footer written (signals held meanwhile), the file checked and closed; a file nothing was written to
        is removed."""
        writer = self.writer
        with signals_held():
            noted = self.note.take() if self.note is not None else []
            if noted and not footer.get("signal"):  # after the loop: the footer says so (a crash kept)
                kept = str(footer.get("stop_reason", "")).startswith(("crashed", "aborted"))
                footer = footer | {"signal": noted[0]} | ({} if kept else {"stop_reason": f"interrupted ({noted[0]})"})
            if self.started:
                with contextlib.suppress(RunFileError):
                    writer.footer({**footer, "requests": writer.requests, "tasks": writer.tasks})
                problem = writer.intact()
                writer.close()
                if problem and writer.footer_data is not None:  # deleted, replaced or truncated under the run
                    writer.footer_data.setdefault("run_file_error", problem)  # (a write that failed says more)
            else:
                writer.close()
                if self.previous is None:
                    with contextlib.suppress(OSError):
                        writer.path.unlink()

    def judged(self) -> Summary:
        """The summary and its verdict, made as ``replay report`` makes it from the file (``run_summary``), the footer
        as this run knows it when the file cannot say it (a full disk, a deleted file); the truth check only when
        the file is whole (it reads the file back)."""
        intact = not (self.writer.footer_data or {}).get("run_file_error")
        return run_summary(self.writer, self.stream, compare_truth=intact)


def _check_resume(spec: RunSpec, previous: Previous, workload: Workload, duration: float | None) -> None:
    """The resumed run's configuration against the file's (the host's own answers, such as its model, aside)."""
    model = spec.model or previous.header.get("host", {}).get("model")
    host = HostConfig(spec.host or previous.header.get("host", {}).get("base_url", ""), model, spec.api)
    sim = None if spec.host else {"profile": sim_profile_name(spec), "faults": spec.sim_faults,
                                  "dialect": spec.sim_dialect, "fallback": spec.sim_fallback}  # fmt: skip
    try:
        check_same(previous.header, build_header(spec, host, workload, sim, None), duration)
    except ResumeError as exc:
        raise RunError(str(exc)) from None


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
    except WorkerError as exc:  # the run could not complete (exit 3; 1 where nothing was sent): its footer says why
        if exc.footer is None:
            raise RunError(writer.scrub_text(str(exc)), EXIT_INCOMPLETE if exc.started else EXIT_USAGE) from None
        return {**exc.footer, "stop_reason": f"aborted: {writer.scrub_text(str(exc))}"}
