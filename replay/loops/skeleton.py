"""The one loop every run goes through, whatever its load model (the way vegeta's pacers and k6's executors sit behind
one attacker): the closed loop (``ClosedLoop``: N lanes, recipe lanes, a resumed run), the shard of a sharded run
(``ShardLoop``), the open loop (``OpenLoop``: arrivals under a live cap). In real time and on the virtual clock alike
(``replay.loops.virtual_clock``): the loop reads ``replay.clock``.

A load model says only what differs: the plan (task limit, sessions, the window's rule), how its sessions get tasks,
when its window opens, when its duration ends, its jobs beside the sessions and its part of the footer. The loop does
the rest, the same for all: the session context, the phase marks (``start``, ``all_started``, ``steady_start``,
``stop``, ``end``), the side jobs (client samples, progress, checks, the run's own jobs), the signals, the stop, the
drain and the footer's common keys.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from replay.clients.client import ModelClient
from replay.clock import now
from replay.loops.client_monitor import ClientMonitor
from replay.loops.live import LiveState, print_progress
from replay.loops.load import LoadConfig, RunPlan, TaskOrder, run_nonce
from replay.loops.phases import PhaseMarks
from replay.loops.signals import graceful_signals
from replay.loops.stop import RunStop, drain, run_checks, until_stop
from replay.metrics.recipes.recipe_tally import decode_tps
from replay.records.run_file import RecordSink, RequestRecord, TaskRecord
from replay.sessions.agent import SessionContext
from replay.sessions.lanes import LaneRuntime
from replay.sessions.rate_limit import RateLimit
from replay.workload.trajectory import Workload

Job = Callable[[], Coroutine[Any, Any, None]]


@dataclass(slots=True)
class LoopRun:
    """One run as its load model sees it: the plan, the sessions' context, the stop, the marks, the live view."""

    workload: Workload
    load: LoadConfig
    plan: RunPlan
    writer: RecordSink  # the RunWriter, or a worker's pipe to its parent
    order: TaskOrder
    live: LiveState
    asked: RunStop
    marks: PhaseMarks
    stop: asyncio.Event = field(default_factory=asyncio.Event)  # no new work from here on
    ctx: SessionContext = field(init=False)
    lanes: LaneRuntime | None = None
    started: int = 0  # tasks taken so far (a resumed run: counted from its first task)
    t0: float = 0.0

    def close_window(self) -> None:
        """The steady window ends now (once): the stop, or the run's last task taken (the others drain)."""
        self.marks.close_window()


class LoadModel:
    """How one run keeps its sessions busy (a model is made for one run); ``run_loop`` does everything else. The
    defaults are the closed loop's in one process; a model overrides what differs."""

    nonce: str | None = None  # the run's salt, when the caller chooses it (a virtual run: from its seed)

    def plan(self, load: LoadConfig, workload: Workload) -> RunPlan:
        """The task limit, the sessions at once and the window's rule."""
        return RunPlan.of(load, len(workload.tasks))

    def lanes_here(self, run: LoopRun) -> Sequence[int]:
        """The run's lane numbers this process runs (records name these)."""
        return range(run.plan.sessions)

    def salt(self, load: LoadConfig) -> str | None:
        """The run's nonce (every task a distinct conversation), or None when tasks are not salted."""
        if self.nonce is not None and load.salt_tasks and load.salt_nonce is None:
            return self.nonce
        return run_nonce(load)

    def rng(self, load: LoadConfig) -> random.Random:
        """The sessions' seeded draws (backoff jitter, drawn tool pauses)."""
        return random.Random(load.seed)

    def lanes(self, run: LoopRun) -> LaneRuntime | None:
        """The run's lanes when it asks for more than plain ones (start points, warm-up, idle caps, background)."""
        return None

    async def ready(self) -> None:
        """Connections warmed; return at the start (a shard waits for its parent's)."""

    def start(self, run: LoopRun) -> list[asyncio.Task[None]]:
        """Start the sessions at ``run.t0``; the tasks that run them."""
        raise NotImplementedError

    def open_window(self, run: LoopRun) -> None:
        """Mark or schedule the steady window's opening when the plan's rule (first calls back) is not the one."""

    def side(self, run: LoopRun) -> list[Coroutine[Any, Any, None]]:
        """Jobs beside the sessions for the run's length (arrivals, samples, a shard's link to its parent)."""
        return []

    async def deadline(self, run: LoopRun, workers: list[asyncio.Task[None]]) -> float | None:
        """When the duration ends (None: the run has none, or another process times it)."""
        return run.t0 + run.load.duration_s if run.load.duration_s else None

    def stopped(self, run: LoopRun) -> None:
        """The run stopped taking work here (its window closed, or --on-error abort): a shard tells its parent."""

    def stopping(self, run: LoopRun) -> None:
        """The stop: no new work of the model's own (an open loop's arrivals end)."""

    def footer(self, run: LoopRun) -> dict[str, Any]:
        """``tasks_started`` and ``sessions``, then the model's own keys."""
        return {"tasks_started": run.started, "sessions": run.plan.sessions}


async def run_loop(
    workload: Workload,
    client_factory: Callable[[Any], ModelClient],
    transport: AbstractAsyncContextManager[Any],
    load: LoadConfig,
    model: LoadModel,
    writer: RecordSink,
    progress: bool = True,
    check: Callable[[], str | None] | None = None,
    extra: Sequence[Job] = (),
    client_samples: bool = True,
) -> dict[str, Any]:
    """Run ``model`` to its stop; every record goes to ``writer`` as it happens. Returns the footer.

    ``check`` is called every few seconds; a reason it returns stops the run (thresholds with --abort-on-fail).
    ``extra`` are coroutines run beside the sessions for the run's length (closing windows, serving metrics).
    ``client_samples``: the client's own loop lag and CPU, sampled (not on the virtual clock: it has none)."""
    run = _new_run(workload, load, model, writer)
    monitor = ClientMonitor(writer.client) if client_samples else None
    async with transport:
        client = client_factory(transport)
        run.ctx = _context(run, model, client, monitor)
        await client.warm(len(model.lanes_here(run)))
        await model.ready()
        run.t0 = run.live.t0 = now()
        run.marks.mark("start", run.t0)
        workers = model.start(run)
        run.marks.mark("all_started")
        if monitor is not None:
            monitor.sessions_started()
        model.open_window(run)
        jobs = [monitor.run()] if monitor is not None else []
        jobs += [print_progress(run.live, run.stop)] if progress else []
        jobs += [run_checks(check, run.asked)] if check is not None else []
        side = [asyncio.create_task(job) for job in [*jobs, *(j() for j in extra), *model.side(run)]]
        try:
            with graceful_signals(run.asked.on_signal, run.asked.on_second_signal):
                await until_stop(workers, run.asked, await model.deadline(run, workers))
                running = any(not w.done() for w in workers)
                if running:
                    run.asked.ask("duration")
                _stop(run, model)
                if running:
                    await drain(workers, run.asked)
        except asyncio.CancelledError:
            run.asked.ask("interrupted")
            _stop(run, model)
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        finally:
            for task in side:
                task.cancel()
            await asyncio.gather(*side, return_exceptions=True)
            run.marks.mark("end")
    return _footer(run, model)


def _new_run(workload: Workload, load: LoadConfig, model: LoadModel, writer: RecordSink) -> LoopRun:
    plan = model.plan(load, workload)
    asked = RunStop(load.drain_timeout_s)
    run = LoopRun(workload, load, plan, writer, TaskOrder(workload.tasks, load.seed),
                  LiveState(tasks_total=plan.task_limit, duration_s=load.duration_s), asked,
                  PhaseMarks(writer))  # fmt: skip
    run.marks.on_close = lambda: model.stopped(run)
    run.lanes = model.lanes(run)
    return run


def _context(run: LoopRun, model: LoadModel, client: ModelClient, monitor: ClientMonitor | None) -> SessionContext:
    """What every session of the run shares; each record goes to the writer and the live view as it happens, with
    the client's own pauses its timing overlapped (``client_pause_ms``)."""
    load, live, plan, workload = run.load, run.live, run.plan, run.workload
    first_back: set[int] = set()

    def request_done(rec: RequestRecord) -> None:
        rec.user_decode_tps = decode_tps(rec)  # the record says what the summary counts (None: no speed)
        if monitor is not None:
            rec.client_pause_ms = monitor.pause_ms(rec.t_sent, rec.t_last_token or rec.t_done or rec.t_sent)
        run.writer.request(rec)
        live.request(rec)
        if rec.session not in first_back:  # the window's own rule: every lane's first call is back
            first_back.add(rec.session)
            if plan.auto_window and len(first_back) == plan.sessions and not run.stop.is_set():
                run.marks.mark("steady_start")

    def task_done(rec: TaskRecord) -> None:
        run.writer.task(rec)
        live.task(rec)

    return SessionContext(
        client=client, tool_time=load.tool_time, stop=run.stop, on_request=request_done, on_task=task_done,
        trajectories=workload.by_id(), builder=workload.builder, salt=model.salt(load),
        rate_limit=RateLimit(*load.rate_limit) if load.rate_limit else None, retry=load.retry,
        on_error=load.on_error, abort=lambda reason: _abort(run, model, reason), rng=model.rng(load),
        on_pause=live.pausing, on_turn=live.turn, on_call=live.calling, lanes=run.lanes,
    )  # fmt: skip


def _abort(run: LoopRun, model: LoadModel, reason: str) -> None:
    """--on-error abort: the run stops (a shard's parent hears it before this lane asks for its next task)."""
    run.asked.ask(f"aborted: {reason}")
    model.stopped(run)


def _stop(run: LoopRun, model: LoadModel) -> None:
    """No new work from here on: the window closes (a run measured whole has none to close)."""
    if not run.plan.whole:
        run.close_window()
    run.stop.set()
    model.stopping(run)


def _footer(run: LoopRun, model: LoadModel) -> dict[str, Any]:
    own = model.footer(run)
    footer: dict[str, Any] = {"stop_reason": run.asked.reason or "completed", "tasks_started": own.pop("tasks_started"),
                              "sessions": own.pop("sessions"), "salt": run.ctx.salt}  # fmt: skip
    if run.asked.signal:
        footer["signal"] = run.asked.signal
    return footer | own
