"""Where a probe pass runs: the run machinery's closed loop against a host (its client and records), or the same
loop on the virtual clock against the simulated engine in this process (the tests' known profiles, in seconds of CPU).

Both run a pass (a workload and a concurrency, closed loop, no tool pauses, no task salt: the pass's own prompts are
already new to the host) with a time budget as the same ``LoadConfig`` (``pass_load``), and give back the
``RequestRecord`` of every call, so the probe reads one kind of record whichever ran it. A pass stops starting calls
when its budget is spent; calls in flight then get ``DRAIN_S`` to finish.
"""

from __future__ import annotations

import dataclasses
import signal
from pathlib import Path
from time import perf_counter
from typing import Any, Protocol

from replay import event_loop
from replay.clients import tls
from replay.clients.client import make_client, make_flavour
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.clients.transport import Transport
from replay.clock import VIRTUAL_START_S, run_virtual
from replay.errors import ReplayError
from replay.loops.closed_loop import ClosedLoop
from replay.loops.load import LoadConfig
from replay.loops.skeleton import run_loop
from replay.records.reader import read_run
from replay.records.run_file import RequestRecord, RunWriter
from replay.records.scrub import Scrubber
from replay.runner.run_header import build_header
from replay.runner.virtual_host import VirtualHost
from replay.sessions.tool_time import ToolTimePolicy
from replay.sim.core.engine import EngineCore
from replay.sim.core.profiles import SimProfile
from replay.sim.core.prompt import WireIds
from replay.twin.host_facts import HostFacts, read_host_facts
from replay.workload.trajectory import Workload

DRAIN_S = 5.0


class ProbeInterrupted(ReplayError):
    """A pass was stopped by a signal (Ctrl-C, SIGTERM): the probe stops too, with that exit code."""

    def __init__(self, exit_code: int) -> None:
        super().__init__(f"interrupted (exit {exit_code})")
        self.exit_code = exit_code


class Runner(Protocol):
    @property
    def elapsed(self) -> float: ...

    def run(self, workload: Workload, concurrency: int, budget_s: float) -> list[RequestRecord]: ...

    def host_facts(self) -> HostFacts: ...


class HttpRunner:
    """Each pass is one closed-loop run of the run machinery against the host (``run_loop`` over the host's own
    client and transport, as ``execute`` runs it), its run file kept in ``directory``. The host, its model and
    its key are resolved once; no summary is made per pass (a pass's records are all the probe reads)."""

    def __init__(self, base: Any, directory: Path) -> None:
        from replay.runner.host_models import detect_model
        from replay.runner.single_run import RunError, resolve_host

        spec, _ = resolve_host(base)  # RunSpec: host, model, API, key variable, timeouts (kept on the spec)
        if spec.host is None:  # the probe starts the embedded simulated host before its passes
            raise RunError("a probe's passes need a host URL")
        url: str = spec.host
        key = HostConfig("", "", api_key_env=spec.api_key_env).api_key()
        model = spec.model
        if not model:
            auth = make_flavour(spec.api, RequestOptions("m")).headers(key)
            model = event_loop.run(detect_model(url, headers=auth, ssl=tls.context(spec.ca_bundle, spec.insecure)))
            if not model:
                raise RunError(f"no --model given and {spec.host}/models lists no model")
        self.spec, self.model = (
            dataclasses.replace(spec, endpoint=dataclasses.replace(spec.endpoint, model=model)),
            model,
        )
        self.host = spec.endpoint.host_config(url, model)
        self.options = spec.endpoint.request_options(model)
        self.scrub = Scrubber([key] if key else [])
        self.directory, self.passes, self.started = directory, 0, perf_counter()

    @property
    def elapsed(self) -> float:
        return perf_counter() - self.started

    def host_facts(self) -> HostFacts:
        """What the host states about its KV cache, block and served context (replay.twin.host_facts)."""
        key = HostConfig("", "", api_key_env=self.spec.api_key_env).api_key()
        auth = make_flavour(self.spec.api, RequestOptions("m")).headers(key)
        return read_host_facts(
            self.spec.host or "", self.model, auth, tls.context(self.spec.ca_bundle, self.spec.insecure)
        )

    def run(self, workload: Workload, concurrency: int, budget_s: float) -> list[RequestRecord]:
        self.passes += 1
        path = self.directory / f"run-{self.passes:02d}.jsonl"
        load = pass_load(workload, concurrency, budget_s)
        endpoint = dataclasses.replace(self.spec.endpoint, retries=0)
        spec = dataclasses.replace(self.spec, load=load, out=str(path), progress=False, endpoint=endpoint)
        writer = RunWriter(path, self.scrub)
        footer: dict[str, Any] = {"stop_reason": "crashed"}
        try:
            writer.header(build_header(spec, self.host, workload, None, None))
            factory = lambda t: make_client(self.host, self.options, t)  # noqa: E731
            footer = event_loop.run(run_loop(workload, factory, Transport(self.host), load, ClosedLoop(), writer,
                                             progress=False))  # fmt: skip
        finally:
            writer.footer({**footer, "requests": writer.requests, "tasks": writer.tasks})
            writer.close()
        if footer.get("signal"):
            raise ProbeInterrupted(128 + signal.Signals[footer["signal"]].value)
        return read_run(path, notes=lambda _: None).requests


def pass_load(workload: Workload, concurrency: int, budget_s: float) -> LoadConfig:
    """A pass as the loop runs it: its tasks once, at ``concurrency``, for at most ``budget_s``, no pauses, no salt."""
    return LoadConfig(concurrency=concurrency, tasks=len(workload.tasks), duration_s=max(budget_s, 1.0), warmup_s=0.0,
                      tool_time=ToolTimePolicy.parse("none"), salt_tasks=False, drain_timeout_s=DRAIN_S)  # fmt: skip


class _Records:
    """Where a virtual pass's loop writes: the records kept for the probe (no file, no summary)."""

    def __init__(self) -> None:
        self.requests: list[RequestRecord] = []

    def request(self, rec: RequestRecord) -> None:
        self.requests.append(rec)

    def task(self, rec: Any) -> None:
        """Tasks are not what a probe reads."""

    def phase(self, name: str, t: float) -> None:
        """Nor are phases."""

    def client(self, sample: dict[str, Any]) -> None:
        """Nor the client's samples (the virtual clock takes none)."""


class VirtualRunner:
    """Each pass is the same closed loop on the virtual clock, against the simulated engine of ``profile`` in this
    process, kept across passes (its cache too) as a host is, and its clock going on from pass to pass. It is sent
    what the simulated host would be sent and answers as it would (``replay.runner.virtual_host``)."""

    def __init__(self, profile: SimProfile, seed: int = 0) -> None:
        self.profile = profile
        self.core = EngineCore(profile, seed)
        self.prompts = WireIds()
        self.t = VIRTUAL_START_S

    @property
    def elapsed(self) -> float:
        return self.t - VIRTUAL_START_S

    def host_facts(self) -> HostFacts:
        return HostFacts()  # the engine states nothing: the probe measures it, as a host that says nothing

    def run(self, workload: Workload, concurrency: int, budget_s: float) -> list[RequestRecord]:
        records = _Records()
        host = VirtualHost(self.profile, "replay-sim", self.prompts, self.core)
        run = run_loop(workload, lambda h: h, host, pass_load(workload, concurrency, budget_s), ClosedLoop(), records,
                       progress=False, client_samples=False)  # fmt: skip
        _, self.t = run_virtual(run, self.t)
        return records.requests
