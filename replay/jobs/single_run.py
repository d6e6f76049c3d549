"""One run, end to end: load the workload, pick the host (or start the simulated one), write the run file,
run the closed loop, and summarise. The CLI and the tests both enter here.
"""

from __future__ import annotations

import contextlib
import platform
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import numpy
import orjson

from replay import __version__, event_loop
from replay.clients.client import make_client, make_flavour
from replay.clients.flavour import RequestOptions
from replay.clients.host import DEFAULT_MAX_RESPONSE_BYTES, HostConfig
from replay.clients.transport import Transport
from replay.jobs.embedded_host import embedded_host
from replay.results.metrics import summarize
from replay.results.records import RunWriter, clock_anchor
from replay.results.truth_compare import compare, load_truth
from replay.sessions.closed_loop import LoadConfig, run_load
from replay.workload.history import HistoryPolicy
from replay.workload.trajectory import Workload, default_workload_path, load_workload

SECRET_HINTS = ("key", "token", "secret", "auth", "password")
SIM_MODEL = "replay-sim"


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
    force_output_length: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)
    request_timeout_s: float = 600.0
    stall_timeout_s: float = 120.0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    cache_control: str = "none"  # anthropic: none | auto
    responses_state: str = "none"  # responses: none | previous
    out: str | None = None
    sim_profile: str = "default"
    sim_truth_log: str | None = None
    sim_faults: str | None = None
    sim_fault_seed: int = 0
    tokenizer: str | None = None
    history: HistoryPolicy = field(default_factory=HistoryPolicy)
    progress: bool = True


@dataclass(slots=True)
class RunResult:
    summary: dict[str, Any]
    header: dict[str, Any]
    path: Path


def default_out_path() -> Path:
    return Path("replay-runs") / f"run-{datetime.now():%Y%m%d-%H%M%S}.jsonl"


def _redact(body: dict[str, Any]) -> dict[str, Any]:
    return {k: ("***" if any(h in k.lower() for h in SECRET_HINTS) else v) for k, v in body.items()}


def _versions() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "aiohttp": aiohttp.__version__,
        "numpy": numpy.__version__,
        "orjson": orjson.__version__,
        "platform": platform.platform(),
        "event_loop": event_loop.loop_factory()[0],
    }


async def detect_model(base_url: str, timeout_s: float = 10.0) -> str | None:
    """The first model a host lists at /models, for when --model is not given."""
    with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError, KeyError, IndexError):
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as http,
            http.get(base_url.rstrip("/") + "/models") as resp,
        ):
            data = await resp.json(content_type=None)
            return data["data"][0]["id"]
    return None


@contextlib.contextmanager
def _host(spec: RunSpec, truth_log: Path | None) -> Iterator[tuple[str, str | None]]:
    if spec.host:
        yield spec.host, None
    else:
        truth = str(truth_log) if truth_log else None
        with embedded_host(spec.sim_profile, truth, spec.sim_faults, spec.sim_fault_seed) as sim:
            yield sim.base_url, spec.sim_profile


def truth_log_path(spec: RunSpec, out: Path) -> Path | None:
    """Where the embedded host writes its truth log: as asked, or next to the run file (a real host has none).
    Every run against the sim can then say how far the client's times are from the host's own."""
    if spec.host:
        return None
    return Path(spec.sim_truth_log) if spec.sim_truth_log else out.with_suffix(".truth.jsonl")


def execute(spec: RunSpec, workload: Workload | None = None) -> RunResult:
    """Run and return the live summary; the run file is complete (footer included) when this returns."""
    workload = workload or load_workload(spec.trajectories or [default_workload_path()], spec.tokenizer, spec.history)
    out = Path(spec.out) if spec.out else default_out_path()
    writer = RunWriter(out)
    truth_log = truth_log_path(spec, out)
    footer: dict[str, Any] = {"stop_reason": "crashed"}
    try:
        with _host(spec, truth_log) as (base_url, sim_profile):
            model = spec.model or (SIM_MODEL if sim_profile else event_loop.run(detect_model(base_url)))
            if not model:
                raise RunError(f"no --model given and {base_url}/models lists no model")
            host = HostConfig(
                base_url,
                model,
                spec.api,
                spec.api_key_env,
                spec.request_timeout_s,
                spec.stall_timeout_s,
                spec.max_response_bytes,
            )
            options = RequestOptions(
                model, spec.force_output_length, spec.extra_body, spec.cache_control, spec.responses_state
            )
            try:
                make_flavour(spec.api, options)  # an unknown flavour fails here, before the header is written
            except ValueError as exc:
                raise RunError(str(exc)) from None
            writer.header(
                {
                    "replay_version": __version__,
                    "created": datetime.now(UTC).isoformat(timespec="seconds"),
                    "clock": {"name": "perf_counter", **clock_anchor()},
                    "host": host.public(),
                    "simulated_host": sim_profile,
                    "simulated_faults": spec.sim_faults if sim_profile else None,
                    "simulated_truth_log": str(truth_log) if truth_log else None,
                    "request": {
                        "history": spec.history.public(),
                        "force_output_length": spec.force_output_length,
                        "cache_control": spec.cache_control,
                        "responses_state": spec.responses_state,
                        "extra_body": _redact(spec.extra_body),
                    },
                    "load": spec.load.public(),
                    "workload": {
                        "paths": workload.paths,
                        "digest": workload.digest,
                        "trajectories": len(workload.trajectories),
                        "turns": workload.turns,
                        "tokenizer": workload.tokenizer,
                    },
                    "versions": _versions(),
                }
            )
            try:
                footer = event_loop.run(
                    run_load(
                        workload,
                        lambda transport: make_client(host, options, transport),
                        Transport(host),
                        spec.load,
                        writer,
                        progress=spec.progress,
                    )
                )
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
    return RunResult(summary, writer.data.header, out)
