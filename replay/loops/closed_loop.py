"""The closed loop: N sessions run at once; each takes the next trajectory when it finishes.

It also decides the steady window (opened after warm-up once all N sessions run, closed when the stop is called),
and stops on whichever comes first: the duration, the task count, a signal, a failure with ``--on-error abort``, or a
check that says so (``--abort-on-fail``). Then no new call starts, tool pauses and waits end at once, the calls in
flight get a grace (the drain, outside the window), and what still runs after it is cancelled.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, Protocol

from replay.clients.client import HostClient
from replay.clients.transport import Transport
from replay.loops.client_monitor import ClientMonitor
from replay.loops.live import LiveState, RichView, progress_view
from replay.loops.phases import PhaseMarks
from replay.loops.signals import graceful_signals
from replay.records.run_file import RecordSink, RequestRecord, TaskRecord
from replay.sessions.lanes import LaneConfig, LaneRuntime
from replay.sessions.rate_limit import RateLimit
from replay.sessions.retry import RetryPolicy
from replay.sessions.session import SessionContext, replay_task
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.trajectory import Trajectory, Workload

PROGRESS_S = 5.0
FIRST_PROGRESS_S = 2.0  # a newcomer sees live figures at once
CHECK_S = 5.0
SIGNAL_GRACE_S = 10.0  # after a signal, in-flight calls get at most this long (and at most the drain timeout)


@dataclass(frozen=True, slots=True)
class LoadConfig:
    """How hard and how long to push, and what to do when calls fail."""

    concurrency: int = 12
    duration_s: float | None = None  # stop after this long ...
    tasks: int | None = None  # ... or after this many trajectories (default: one pass over the workload)
    warmup_s: float | None = None  # None: until every session has finished its first call
    tool_time: ToolTimePolicy = field(default_factory=ToolTimePolicy)
    seed: int = 0
    drain_timeout_s: float = 60.0
    salt_tasks: bool = True  # every task run a distinct conversation (no cross-session cache sharing of copies)
    rate_limit: tuple[int, float] | None = None  # at most N calls started per period (s), across all sessions
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    on_error: str = "continue"  # continue | end-task | abort
    lanes: LaneConfig | None = None  # start points, warm-up, idle caps, background subagents (sessions/lanes.py)

    def public(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "duration_s": self.duration_s,
            "tasks": self.tasks,
            "warmup_s": self.warmup_s if self.warmup_s is not None else "auto",
            "tool_time": str(self.tool_time),
            "seed": self.seed,
            "drain_timeout_s": self.drain_timeout_s,
            "salt_tasks": self.salt_tasks,
            "rate_limit": list(self.rate_limit) if self.rate_limit else None,
            "retry": self.retry.public(),
            "on_error": self.on_error,
            "lanes": self.lanes.public() if self.lanes else None,
        }


def task_order(trajectories: list[Trajectory], seed: int) -> Iterator[Trajectory]:
    """Seeded, reproducible order: a shuffled pass over the workload, then another, and so on."""
    rng = random.Random(seed)
    while True:
        batch = list(trajectories)
        rng.shuffle(batch)
        yield from batch


class Shard(Protocol):
    """This process's part of a run sharded over worker processes (``replay.scale.workers``): its lanes, the run's
    shared task counter and the parent's stop. The parent decides the run's phase marks; a shard tells it when
    one of its lanes ran out of tasks or its own run stopped (``stopped``)."""

    index: int
    lanes: tuple[int, ...]  # the run's lane numbers this process runs (records name these)
    salt: str | None  # the run's nonce, the same in every shard

    async def ready(self) -> None:
        """Connections warmed: wait for the parent's start."""

    async def take(self) -> int | None:
        """The run's next task index (None: the run has taken all it may)."""

    def stopped(self, reason: str) -> None:
        """This shard's steady window ended (tasks ran out, or its run was asked to stop)."""

    async def listen(self, stop: RunStop, live: LiveState) -> None:
        """Until cancelled: the parent's stop, signal and cut, passed on to ``stop``; ``live`` for its live view."""


class TaskOrder:
    """The seeded order looked up by a task's index in it (indices increase): a shard takes the run's indices."""

    def __init__(self, trajectories: list[Trajectory], seed: int) -> None:
        self._order, self._next = task_order(trajectories, seed), 0

    def at(self, index: int) -> Trajectory:
        while self._next < index:
            next(self._order)
            self._next += 1
        self._next += 1
        return next(self._order)


class RunStop:
    """The one place a run's stop is asked for, whoever asks: a reason, a grace for calls in flight, a wake-up."""

    def __init__(self, drain_timeout_s: float) -> None:
        self.requested = asyncio.Event()
        self.reason: str | None = None
        self.grace = drain_timeout_s
        self.cut = False  # a second signal: cancel what is in flight now
        self.signal: str | None = None

    def ask(self, reason: str, grace: float | None = None) -> None:
        if self.reason is None:
            self.reason = reason
            if grace is not None:
                self.grace = min(self.grace, grace)
        self.requested.set()

    def on_signal(self, name: str) -> None:
        self.signal = name
        self.reason = None  # a signal says more than a softer reason already noted ("tasks")
        self.ask(f"interrupted ({name})", SIGNAL_GRACE_S)

    def on_second_signal(self) -> None:
        self.cut = True
        self.grace = 0.0
        self.requested.set()


async def run_load(
    workload: Workload,
    client_factory: Callable[[Transport], HostClient],
    transport: Transport,
    load: LoadConfig,
    writer: RecordSink,
    progress: bool = True,
    check: Callable[[], str | None] | None = None,
    extra: Sequence[Callable[[], Coroutine[Any, Any, None]]] = (),
    first_task: int = 0,
    shard: Shard | None = None,
) -> dict[str, Any]:
    """Run the closed loop to its stop; every record goes to ``writer`` as it happens. Returns the footer.

    ``check`` is called every few seconds; a reason it returns stops the run (thresholds with --abort-on-fail).
    ``extra`` are coroutines run beside the sessions for the run's length (closing windows, serving metrics).
    ``first_task``: a resumed run goes on from this task of the seeded order (the tasks before it were started).
    ``shard``: this process runs only the shard's lanes and takes task indices from the run's shared counter; the
    parent process marks the phases and the stop (``replay.scale.workers``).
    """
    task_limit = load.tasks if load.tasks is not None else (None if load.duration_s else len(workload.tasks))
    left = None if task_limit is None else max(task_limit - first_task, 0)
    slots = load.concurrency if left is None else max(min(load.concurrency, left), 1)
    order = TaskOrder(workload.tasks, load.seed)
    stop = asyncio.Event()
    asked = RunStop(load.drain_timeout_s)
    live = LiveState(tasks_total=task_limit, duration_s=load.duration_s)
    first_call_done: set[int] = set()
    started = first_task
    # the stop is called: no new work from here on, so the steady window ends now (a shard tells its parent)
    marks = PhaseMarks(writer, None if shard is None else lambda: shard.stopped(asked.reason or "stop"))
    mark, close_window = marks.mark, marks.close_window

    def request_done(rec: RequestRecord) -> None:
        writer.request(rec)
        live.request(rec)
        if rec.session not in first_call_done:
            first_call_done.add(rec.session)
            auto = load.warmup_s is None and not whole and (lanes is None or lanes.warmup is None)  # else marked
            if auto and len(first_call_done) == slots and not stop.is_set():
                mark("steady_start")

    def task_done(rec: TaskRecord) -> None:
        writer.task(rec)
        live.task(rec)

    def abort(reason: str) -> None:
        """--on-error abort: the run stops (a shard's parent hears it before this lane asks for its next task)."""
        asked.ask(f"aborted: {reason}")
        if shard is not None:
            shard.stopped(asked.reason or "aborted")

    salt = shard.salt if shard is not None else uuid.uuid4().hex[:12] if load.salt_tasks else None
    lanes = _lane_runtime(
        load, slots, workload, lambda: marks.window_open and not stop.is_set() and mark("steady_start")
    )
    # A run of N tasks is measured whole: every call of them, warm-up and drain included (the window is the run).
    whole = task_limit is not None and load.duration_s is None and load.warmup_s is None and (
        lanes is None or lanes.warmup is None)  # fmt: skip
    async with transport:
        ctx = SessionContext(
            client=client_factory(transport),
            tool_time=load.tool_time,
            stop=stop,
            on_request=request_done,
            on_task=task_done,
            trajectories=workload.by_id(),
            builder=workload.builder,
            salt=salt,
            rate_limit=RateLimit(*load.rate_limit) if load.rate_limit else None,
            retry=load.retry,
            on_error=load.on_error,
            abort=abort,
            rng=random.Random(load.seed if shard is None else f"{load.seed}/{shard.index}"),
            on_pause=live.pausing,
            on_turn=live.turn,
            on_call=live.calling,
            lanes=lanes,
        )

        async def take() -> int | None:
            """The next task's index in the seeded order, None when the run has started all it may."""
            nonlocal started
            if shard is not None:
                index = await shard.take()
                started += index is not None
                return index
            if task_limit is not None and started >= task_limit:
                return None
            started += 1
            live.tasks_started = started
            return started - 1

        async def worker(slot: int) -> None:
            try:
                while not stop.is_set():
                    task_index = await take()
                    if task_index is None:
                        asked.reason = asked.reason or "tasks"
                        if not whole:
                            close_window()  # the other sessions finish the trajectories they hold (the drain)
                        return
                    await replay_task(ctx, task_index, slot, order.at(task_index))
            finally:
                if lanes is not None and lanes.warmup is not None:
                    lanes.warmup.retire(slot)  # a lane that sends nothing more does not hold the warm-up barrier

        lane_ids = shard.lanes if shard is not None else tuple(range(slots))
        await ctx.client.warm(len(lane_ids))
        if shard is not None:
            await shard.ready()
        t0 = perf_counter()
        live.t0 = t0
        mark("start", t0)
        workers = [asyncio.create_task(worker(i), name=f"session-{i}") for i in lane_ids]
        mark("all_started")
        if whole:
            mark("steady_start", t0)
        if load.warmup_s is not None:
            asyncio.get_running_loop().call_later(load.warmup_s, lambda: marks.window_open and mark("steady_start"))
        side = [asyncio.create_task(ClientMonitor(writer.client).run())]
        if progress:
            side.append(asyncio.create_task(print_progress(live, stop)))
        if check is not None:
            side.append(asyncio.create_task(run_checks(check, asked)))
        side += [asyncio.create_task(job()) for job in extra]
        if shard is not None:
            side.append(asyncio.create_task(shard.listen(asked, live)))
        try:
            with graceful_signals(asked.on_signal, asked.on_second_signal):
                deadline = None if shard is not None else await _deadline(load, lanes, workers, asked, t0)
                await _until_stop(workers, asked, deadline)
                if any(not w.done() for w in workers):
                    asked.ask("duration")
                    close_window()
                    stop.set()
                    await _drain(workers, asked)
        except asyncio.CancelledError:
            asked.ask("interrupted")
            close_window()
            stop.set()
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        finally:
            for task in side:
                task.cancel()
            await asyncio.gather(*side, return_exceptions=True)
            mark("end")
    footer: dict[str, Any] = {"stop_reason": asked.reason or "completed", "tasks_started": started, "sessions": slots,
                              "salt": salt}  # fmt: skip
    if asked.signal:
        footer["signal"] = asked.signal
    if whole:
        footer["window"] = "whole"  # the figures cover every call of the tasks (docs/metrics.md)
    if lanes is not None:
        footer["lanes"] = lanes.footer()
    return footer


def _lane_runtime(load: LoadConfig, slots: int, workload: Workload, on_steady: Callable[[], Any]) -> LaneRuntime | None:
    """The run's lanes when it asks for more than plain ones (start points, warm-up, idle caps, background)."""
    if load.lanes is None:
        return None
    return LaneRuntime(load.lanes, slots, workload.by_id(), load.seed, on_steady)


async def _deadline(
    load: LoadConfig, lanes: LaneRuntime | None, workers: list[asyncio.Task[None]], asked: RunStop, t0: float
) -> float | None:
    """When the duration ends: counted from the warm-up barrier when the run has one (AgentX's profiling phase is
    its duration), else from the start."""
    if not load.duration_s:
        return None
    if lanes is None or lanes.warmup is None:
        return t0 + load.duration_s
    barrier = asyncio.create_task(lanes.warmup.done.wait())
    wake = asyncio.create_task(asked.requested.wait())
    await asyncio.wait([barrier, wake, *workers], return_when=asyncio.FIRST_COMPLETED)
    barrier.cancel()
    wake.cancel()
    return perf_counter() + load.duration_s


async def _until_stop(workers: list[asyncio.Task[None]], asked: RunStop, deadline: float | None) -> None:
    """Return when every worker is done, the deadline passes, or a stop is asked for."""
    while any(not w.done() for w in workers) and not asked.requested.is_set():
        timeout = None if deadline is None else deadline - perf_counter()
        if timeout is not None and timeout <= 0:
            return
        wake = asyncio.create_task(asked.requested.wait())
        await asyncio.wait([*(w for w in workers if not w.done()), wake], timeout=timeout,
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        wake.cancel()


async def _drain(workers: list[asyncio.Task[None]], asked: RunStop) -> None:
    """Calls in flight finish within the grace (a second signal ends it at once); the rest is cancelled."""
    pending = {w for w in workers if not w.done()}
    end = perf_counter() + asked.grace
    while pending and not asked.cut:
        left = end - perf_counter()
        if left <= 0:
            break
        asked.requested.clear()
        wake = asyncio.create_task(asked.requested.wait())
        await asyncio.wait([*pending, wake], timeout=left, return_when=asyncio.FIRST_COMPLETED)
        wake.cancel()
        pending = {w for w in pending if not w.done()}
        end = min(end, perf_counter() + asked.grace)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    if pending:
        asked.reason = f"{asked.reason}+drain_timeout({len(pending)} sessions cancelled)"


async def print_progress(state: LiveState, stop: asyncio.Event) -> None:
    view = progress_view(state)
    every = 1.0 if isinstance(view, RichView) else PROGRESS_S
    try:
        await asyncio.sleep(min(FIRST_PROGRESS_S, every))
        while True:
            view.print(stop.is_set())
            await asyncio.sleep(every)
    finally:
        if isinstance(view, RichView):
            view.print(stop.is_set())
            view.stop()


async def run_checks(check: Callable[[], str | None], asked: RunStop) -> None:
    while True:
        await asyncio.sleep(CHECK_S)
        reason = check()
        if reason:
            asked.ask(reason)
            return
