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
from typing import Any

from replay.clients.client import HostClient
from replay.clients.transport import Transport
from replay.results.records import RequestRecord, RunWriter, TaskRecord
from replay.sessions.client_monitor import ClientMonitor
from replay.sessions.live import LiveState, RichView, progress_view
from replay.sessions.rate_limit import RateLimit
from replay.sessions.retry import RetryPolicy
from replay.sessions.session import SessionContext, replay_task
from replay.sessions.signals import graceful_signals
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
        }


def task_order(trajectories: list[Trajectory], seed: int) -> Iterator[Trajectory]:
    """Seeded, reproducible order: a shuffled pass over the workload, then another, and so on."""
    rng = random.Random(seed)
    while True:
        batch = list(trajectories)
        rng.shuffle(batch)
        yield from batch


class _Stop:
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
    writer: RunWriter,
    progress: bool = True,
    check: Callable[[], str | None] | None = None,
    extra: Sequence[Callable[[], Coroutine[Any, Any, None]]] = (),
    first_task: int = 0,
) -> dict[str, Any]:
    """Run the closed loop to its stop; every record goes to ``writer`` as it happens. Returns the footer.

    ``check`` is called every few seconds; a reason it returns stops the run (thresholds with --abort-on-fail).
    ``extra`` are coroutines run beside the sessions for the run's length (closing windows, serving metrics).
    ``first_task``: a resumed run goes on from this task of the seeded order (the tasks before it were started).
    """
    task_limit = load.tasks if load.tasks is not None else (None if load.duration_s else len(workload.tasks))
    left = None if task_limit is None else max(task_limit - first_task, 0)
    slots = load.concurrency if left is None else max(min(load.concurrency, left), 1)
    order = task_order(workload.tasks, load.seed)
    for _ in range(first_task):  # the tasks a resumed run's earlier segments took
        next(order)
    stop = asyncio.Event()
    asked = _Stop(load.drain_timeout_s)
    live = LiveState(tasks_total=task_limit, duration_s=load.duration_s)
    first_call_done: set[int] = set()
    started = first_task
    window_open = True

    def mark(name: str, t: float | None = None) -> None:
        writer.phase(name, perf_counter() if t is None else t)

    def close_window() -> None:
        """The stop is called: no new work from here on, so the steady window ends now."""
        nonlocal window_open
        if window_open:
            window_open = False
            mark("stop")

    def request_done(rec: RequestRecord) -> None:
        writer.request(rec)
        live.request(rec)
        if rec.session not in first_call_done:
            first_call_done.add(rec.session)
            if load.warmup_s is None and len(first_call_done) == slots and not stop.is_set():
                mark("steady_start")

    def task_done(rec: TaskRecord) -> None:
        writer.task(rec)
        live.task(rec)

    salt = uuid.uuid4().hex[:12] if load.salt_tasks else None
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
            abort=lambda reason: asked.ask(f"aborted: {reason}"),
            rng=random.Random(load.seed),
            on_pause=live.pausing,
            on_turn=live.turn,
            on_call=live.calling,
        )

        async def worker(slot: int) -> None:
            nonlocal started
            while not stop.is_set():
                if task_limit is not None and started >= task_limit:
                    asked.reason = asked.reason or "tasks"
                    close_window()  # the other sessions finish the trajectories they hold
                    return
                task_index = started
                started += 1
                live.tasks_started = started
                await replay_task(ctx, task_index, slot, next(order))

        await ctx.client.warm(slots)
        t0 = perf_counter()
        live.t0 = t0
        mark("start", t0)
        workers = [asyncio.create_task(worker(i), name=f"session-{i}") for i in range(slots)]
        mark("all_started")
        if load.warmup_s is not None:
            asyncio.get_running_loop().call_later(load.warmup_s, lambda: window_open and mark("steady_start"))
        side = [asyncio.create_task(ClientMonitor(writer.client).run())]
        if progress:
            side.append(asyncio.create_task(_print_progress(live, stop)))
        if check is not None:
            side.append(asyncio.create_task(_checks(check, asked)))
        side += [asyncio.create_task(job()) for job in extra]
        try:
            with graceful_signals(asked.on_signal, asked.on_second_signal):
                await _until_stop(workers, asked, t0 + load.duration_s if load.duration_s else None)
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
    return footer


async def _until_stop(workers: list[asyncio.Task[None]], asked: _Stop, deadline: float | None) -> None:
    """Return when every worker is done, the deadline passes, or a stop is asked for."""
    while any(not w.done() for w in workers) and not asked.requested.is_set():
        timeout = None if deadline is None else deadline - perf_counter()
        if timeout is not None and timeout <= 0:
            return
        wake = asyncio.create_task(asked.requested.wait())
        await asyncio.wait([*(w for w in workers if not w.done()), wake], timeout=timeout,
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        wake.cancel()


async def _drain(workers: list[asyncio.Task[None]], asked: _Stop) -> None:
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


async def _print_progress(state: LiveState, stop: asyncio.Event) -> None:
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


async def _checks(check: Callable[[], str | None], asked: _Stop) -> None:
    while True:
        await asyncio.sleep(CHECK_S)
        reason = check()
        if reason:
            asked.ask(reason)
            return
