"""Where a probe pass runs: against a host through the run machinery (its closed loop, client and records), or
against the simulated engine on a virtual clock (the tests' known profiles, in seconds of CPU).

Both take a pass (a workload and a concurrency, closed loop, no tool pauses, no task salt: the pass's own
prompts are already new to the host) with a time budget, and give back the ``RequestRecord`` of every call,
so the probe reads one kind of record whichever ran it. A pass stops starting calls when its budget is
spent; calls in flight then get ``DRAIN_S`` to finish.
"""

from __future__ import annotations

import dataclasses
import heapq
import signal
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any, Protocol

from replay import event_loop
from replay.clients.client import make_client, make_flavour
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.clients.transport import Transport
from replay.errors import ReplayError
from replay.loops.closed_loop import ClosedLoop
from replay.loops.load import LoadConfig
from replay.loops.skeleton import run_loop
from replay.records.reader import read_run
from replay.records.run_file import RequestRecord, RunWriter
from replay.records.scrub import Scrubber
from replay.runner.run_header import build_header
from replay.sessions.tool_time import ToolTimePolicy
from replay.sim.core.engine import FINISHED, EngineCore, Seq
from replay.sim.core.profiles import SimProfile
from replay.sim.core.virtual import _Prompts
from replay.twin.host_facts import HostFacts, read_host_facts
from replay.workload.trajectory import Trajectory, Workload

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
        from replay.runner.single_run import RunError, detect_model, request_options, resolve_host

        spec, resolved = resolve_host(base)  # RunSpec: host, model, API, key variable, timeouts
        if spec.host is None:  # the probe starts the embedded simulated host before its passes
            raise RunError("a probe's passes need a host URL")
        url: str = spec.host
        key = HostConfig("", "", api_key_env=spec.api_key_env).api_key()
        model = spec.model
        if not model:
            auth = make_flavour(spec.api, RequestOptions("m")).headers(key)
            model = event_loop.run(detect_model(url, headers=auth))
            if not model:
                raise RunError(f"no --model given and {spec.host}/models lists no model")
        self.spec, self.model = dataclasses.replace(spec, model=model), model
        self.host = HostConfig(url, model, spec.api, spec.api_key_env, spec.request_timeout_s,
                               spec.stall_timeout_s, spec.max_response_bytes, resolved.dialect, spec.headers,
                               spec.connection)  # fmt: skip
        self.options = request_options(spec, model)
        self.scrub = Scrubber([key] if key else [])
        self.directory, self.passes, self.started = directory, 0, perf_counter()

    @property
    def elapsed(self) -> float:
        return perf_counter() - self.started

    def host_facts(self) -> HostFacts:
        """What the host states about its KV cache, block and served context (replay.twin.host_facts)."""
        key = HostConfig("", "", api_key_env=self.spec.api_key_env).api_key()
        auth = make_flavour(self.spec.api, RequestOptions("m")).headers(key)
        return read_host_facts(self.spec.host or "", self.model, auth)

    def run(self, workload: Workload, concurrency: int, budget_s: float) -> list[RequestRecord]:
        self.passes += 1
        path = self.directory / f"run-{self.passes:02d}.jsonl"
        load = LoadConfig(concurrency=concurrency, tasks=len(workload.tasks), duration_s=max(budget_s, 1.0),
                          warmup_s=0.0, tool_time=ToolTimePolicy.parse("none"), salt_tasks=False,
                          drain_timeout_s=DRAIN_S)  # fmt: skip
        spec = dataclasses.replace(self.spec, load=load, out=str(path), progress=False, retries=0)
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


@dataclass(slots=True)
class _Session:
    slot: int
    traj: Trajectory | None = None
    task: int = -1
    turn: int = 0
    context: list[Any] = field(default_factory=list)


class VirtualRunner:
    """The simulated engine of ``profile`` on a virtual clock, kept across passes (its cache too), as a host is.

    It sends what the server would be sent (the same prompt token ids, ``max_tokens`` and ``ignore_eos``),
    refuses what the server refuses (prompt + answer over the context: ``context_overflow``), and stamps
    every token when the step that sampled it ends: the truth the real-time server's client would measure,
    without the HTTP path's millisecond.
    """

    def __init__(self, profile: SimProfile, seed: int = 0) -> None:
        self.core = EngineCore(profile, seed)
        self.prompts = _Prompts()
        self.t = 0.0
        self.calls = 0

    @property
    def elapsed(self) -> float:
        return self.t

    def host_facts(self) -> HostFacts:
        return HostFacts()  # the engine states nothing: the probe measures it, as a host that says nothing

    def run(self, workload: Workload, concurrency: int, budget_s: float) -> list[RequestRecord]:
        core, limit = self.core, self.core.profile.model_len_limit
        deadline, hard = self.t + budget_s, self.t + budget_s + DRAIN_S
        tasks = deque(workload.tasks)
        sessions = [_Session(i) for i in range(min(concurrency, len(tasks)))]
        events = [(self.t, i, s.slot) for i, s in enumerate(sessions)]
        heapq.heapify(events)
        tiebreak = len(events)
        done: list[RequestRecord] = []
        live: dict[int, tuple[Seq, RequestRecord, _Session]] = {}
        task_count = 0

        def send(s: _Session, t: float) -> None:
            nonlocal tiebreak, task_count
            if s.traj is None or s.turn >= len(s.traj.turns):
                if not tasks:
                    return
                s.traj, s.turn, s.context, s.task = tasks.popleft(), 0, [], task_count
                task_count += 1
            turn = s.traj.turns[s.turn]
            if turn.truncate_to is not None:
                del s.context[turn.truncate_to :]
            s.context.extend(turn.append)
            ids = self.prompts.ids(s.context)
            self.calls += 1
            rec = RequestRecord(id=f"v{self.calls}", session=s.slot, task=s.task, trajectory=s.traj.id, turn=s.turn,
                                t_sent=t, max_tokens=turn.output_tokens, prompt_tokens_est=turn.prompt_tokens_est,
                                reusable_prefix_tokens=turn.reusable_prefix_tokens)  # fmt: skip
            if len(ids) + turn.output_tokens > limit:
                rec.status, rec.error, rec.t_done = 400, "context_overflow", t
                done.append(rec)
                end_turn(s, t)
                return
            target, reason = core.plan_output(turn.output_tokens, True, turn.output_tokens)
            seq = core.new_seq(rec.id, ids, target, reason)
            live[id(seq)] = (seq, rec, s)
            core.add(seq, t)

        def end_turn(s: _Session, t: float) -> None:
            nonlocal tiebreak
            assert s.traj is not None
            s.context.append(s.traj.turns[s.turn].output_message)
            s.turn += 1
            heapq.heappush(events, (t, tiebreak, s.slot))
            tiebreak += 1

        step, t_end, t = None, float("inf"), self.t
        while True:
            t_event = events[0][0] if events else float("inf")
            if t_event < deadline and (step is None or t_event < t_end):
                t, _, slot = heapq.heappop(events)
                send(sessions[slot], t)
                if step is None:
                    step = core.schedule(t)
                    t_end = t + step.duration if step is not None else float("inf")
                continue
            if step is None or t_end > hard:
                break
            t = t_end
            core.complete(step, t)
            for seq, _ in step.items:
                entry = live.get(id(seq))
                if entry is None:
                    continue
                _, rec, s = entry
                if seq.num_output > rec.output_events:
                    rec.output_events = seq.num_output
                    rec.chunks += [t - rec.t_sent, 1]
                    rec.t_first_token = rec.t_first_answer = rec.t_first_token or t
                    rec.t_last_token = t
                if seq.state == FINISHED:
                    del live[id(seq)]
                    rec.t_done, rec.status, rec.finish_reason = t, 200, seq.finish_reason
                    rec.prompt_tokens, rec.cached_tokens = seq.prompt_len, seq.cached_tokens
                    rec.output_tokens = seq.num_output
                    done.append(rec)
                    end_turn(s, t)
            step = core.schedule(t)
            t_end = t + step.duration if step is not None else float("inf")
        for seq, rec, _ in live.values():  # past the drain: given up, as the client gives them up
            core.abort(seq)
            rec.error, rec.t_done = "cancelled", t
            done.append(rec)
        self.t = max(t, self.t)
        return sorted(done, key=lambda r: r.t_sent)
