"""One run on the virtual clock: the same loop, sessions, run file and summary as ``replay run`` against the simulated
host, with the simulated engine in this process (``replay.runner.virtual_host``) and time that jumps from event to
event (``replay.clock``), so a 90-second level takes the CPU its calls need instead of 90 seconds.

Every record is the one the real-time run would write (its stamps on the virtual clock), written to the run file and
fed to the same accumulator, so every figure of a real-time run exists here too and is computed by the same code, and
``replay report`` reads the file like any other (header ``clock.name``: ``virtual``). What the virtual clock has
not got is refused, naming the option: a host other than the simulated one, the simulated host's HTTP face (faults,
dialects, fallback routes, other API flavours), worker processes, a resumed run, and the live services (Prometheus,
a host's metrics). It has no client of its own to measure (no loop lag, no CPU samples) and no truth log: the
engine's own counters are in the footer (``engine``).
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

from replay.clients.host import HostConfig
from replay.clock import now, run_virtual
from replay.loops.closed_loop import ClosedLoop
from replay.loops.open_loop import OpenLoop, OpenLoopConfig
from replay.loops.skeleton import LoadModel, run_loop
from replay.metrics.recorded_timeline import recorded
from replay.metrics.streaming import StreamSummary
from replay.metrics.windows import Tee, WindowRecorder
from replay.records.run_file import RunWriter
from replay.runner.run_error import RunError
from replay.runner.run_header import build_header, recipe_header
from replay.runner.run_summary import run_summary, threshold_check
from replay.runner.single_run import (
    DEFAULT_WINDOW_S,
    SIM_MODEL,
    RunResult,
    RunSpec,
    _load_config,
    check_spec,
    default_out_path,
    load_run_workload,
)
from replay.runner.soak_jobs import side_jobs
from replay.runner.virtual_host import VirtualHost
from replay.sim.core.profile_file import resolve_profile
from replay.sim.core.profiles import SimProfile, get_profile
from replay.sim.core.prompt import WireIds
from replay.workload.trajectory import Workload


def check_virtual(spec: RunSpec) -> None:
    """RunError naming the first option the virtual clock cannot honour, and why."""
    refused = [
        ("--host", spec.host, "the virtual clock runs the simulated engine in this process, not a host"),
        ("--api", spec.api != "chat", "the engine is sent the chat messages themselves: no API flavour to choose"),
        ("--sim-faults", spec.sim_faults, "faults are the simulated host's HTTP face, which the virtual clock skips"),
        ("--sim-dialect", spec.sim_dialect or spec.dialect, "dialects are the simulated host's HTTP face"),
        ("--sim-fallback", spec.sim_fallback, "fallback routes are the simulated host's HTTP face"),
        ("--workers", spec.workers != 1 or spec.ray, "one process runs the whole virtual clock"),
        ("--resume", spec.resume, "a virtual run is repeated, not resumed: it takes seconds and gives the same"),
        ("--prometheus", spec.prometheus, "live figures need a run in real time"),
        ("--scrape-metrics", spec.scrape_metrics, "the engine's own counters are in the footer"),
    ]
    for option, asked, why in refused:
        if asked:
            raise RunError(f"{option} with the virtual clock: {why}")


def sim_profile(spec: RunSpec) -> SimProfile:
    try:
        if spec.sim_profile_file:
            return resolve_profile(spec.sim_profile, spec.sim_profile_file)
        return get_profile(spec.sim_profile)
    except ValueError as exc:
        raise RunError(f"{'--sim-profile-file' if spec.sim_profile_file else '--sim-profile'}: {exc}") from None


def execute_virtual(spec: RunSpec, workload: Workload | None = None, prompts: WireIds | None = None,
                    profile: SimProfile | None = None) -> RunResult:  # fmt: skip
    """``execute`` on the virtual clock: run, summarise and judge; the run file is complete when this returns.
    ``prompts``: prompt ids kept from earlier runs of the same workload (a study's levels share them); ``profile``:
    the engine's profile itself, over the spec's ``--sim-profile``/``--sim-profile-file``."""
    check_virtual(spec)
    check_spec(spec)
    profile = profile or sim_profile(spec)
    workload = workload or load_run_workload(spec)  # as execute loads it (--unrecorded-context included)
    spec = dataclasses.replace(spec, load=_load_config(spec))
    out = Path(spec.out) if spec.out else default_out_path()
    stream = StreamSummary(recorded=lambda header: recorded(out, header, workload))  # as execute's
    window_s = spec.window_s or (DEFAULT_WINDOW_S if (spec.baseline or spec.history_file) else None)
    windows = WindowRecorder(window_s, 0) if window_s else None
    writer = RunWriter(out, sink=Tee(*(s for s in (stream, windows) if s is not None)))
    try:
        host = VirtualHost(profile, SIM_MODEL, prompts, seed=spec.load.seed,
                           force_output_length=spec.force_output_length)  # fmt: skip
    except ValueError as exc:
        writer.close()
        raise RunError(f"--sim-profile: {exc}") from None
    footer: dict[str, Any] = {"stop_reason": "crashed"}
    try:
        footer, _ = run_virtual(_run(spec, workload, host, profile, writer, stream, windows))
    except KeyboardInterrupt:
        footer = {"stop_reason": "interrupted"}
        raise
    finally:
        writer.footer({**footer, "requests": writer.requests, "tasks": writer.tasks})
        writer.close()
    return RunResult(run_summary(writer, stream), writer.header_data, out, writer.footer_data)


async def _run(spec: RunSpec, workload: Workload, host: VirtualHost, profile: SimProfile, writer: RunWriter,
               stream: StreamSummary, windows: WindowRecorder | None) -> dict[str, Any]:  # fmt: skip
    """The header (its clock anchor on the virtual clock), the loop, the last window: on the virtual clock."""
    config = HostConfig(f"virtual:{profile.name}", SIM_MODEL, "chat", spec.api_key_env)
    sim = {"profile": profile.name, "profile_file": spec.sim_profile_file, "faults": None, "dialect": None,
           "fallback": None, "pid": None}  # fmt: skip
    header = build_header(spec, config, workload, sim, None) | recipe_header(spec)
    header["clock"]["name"] = "virtual"
    writer.header(header)
    model = virtual_model(spec)
    jobs = side_jobs(spec, windows, writer, None, None)
    footer = await run_loop(workload, lambda h: h, host, spec.load, model, writer, progress=False,
                            check=threshold_check(spec, stream, writer), extra=jobs, client_samples=False)  # fmt: skip
    if windows is not None:
        writer.mark("window", windows.close(now()))  # the last one, cut at the end
    core = host.core
    footer["engine"] = {"steps": core.steps, "busy_s": core.busy_s, "preemptions": core.preemptions,
                        "evicted_blocks": core.pool.evicted_blocks, "aborted": core.aborted}  # fmt: skip
    return footer


def virtual_model(spec: RunSpec) -> LoadModel:
    """The spec's load model, salted by a nonce drawn from its seed: a repeated virtual run gives the same figures."""
    if spec.arrivals is None:
        model: LoadModel = ClosedLoop()
    else:
        model = OpenLoop(OpenLoopConfig(spec.arrivals, spec.max_live or spec.load.concurrency))
    model.nonce = f"{random.Random(spec.load.seed).getrandbits(48):012x}"
    return model
