"""The open loop: sessions arrive on a schedule (``replay.loops.arrivals``) whatever the host is doing.

At most ``max_live`` sessions run at once; an arrival that finds them all busy waits in a backlog, and its first
call's latency counts from its arrival (no coordinated omission: a host that falls behind shows it as latency,
not as a lower arrival rate). The backlog is sampled every second into the footer, with the cap.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from replay.clients.client import HostClient
from replay.clients.transport import Transport
from replay.loops.arrivals import Arrivals
from replay.loops.client_monitor import ClientMonitor
from replay.loops.closed_loop import LoadConfig, RunStop, _drain, _until_stop, print_progress, run_checks, task_order
from replay.loops.live import LiveState
from replay.loops.phases import PhaseMarks
from replay.loops.signals import graceful_signals
from replay.records.run_file import RecordSink, RequestRecord, TaskRecord
from replay.sessions.rate_limit import RateLimit
from replay.sessions.session import SessionContext, replay_task
from replay.workload.trajectory import Trajectory, Workload

SAMPLE_S = 1.0


@dataclass(frozen=True, slots=True)
class OpenLoopConfig:
    arrivals: Arrivals
    max_live: int

    def public(self) -> dict[str, Any]:
        return {"arrivals": str(self.arrivals), "max_live": self.max_live}


class _Backlog:
    """Arrived sessions not yet started, and the samples of its length."""

    def __init__(self) -> None:
        self.queue: deque[tuple[int, Trajectory, float]] = deque()
        self.ready = asyncio.Event()
        self.live = 0
        self.arrived = 0
        self.samples: list[list[float]] = []  # [t, waiting, live]


async def run_open_loop(
    workload: Workload,
    client_factory: Callable[[Transport], HostClient],
    transport: Transport,
    load: LoadConfig,
    open_loop: OpenLoopConfig,
    writer: RecordSink,
    progress: bool = True,
    check: Callable[[], str | None] | None = None,
    extra: Sequence[Callable[[], Coroutine[Any, Any, None]]] = (),
) -> dict[str, Any]:
    """Run arrivals to the stop (duration, task count, or the end of a recorded schedule). Returns the footer.
    ``extra``: coroutines run beside the sessions (closing windows, serving metrics), as for the closed loop."""
    limit = load.tasks if load.tasks is not None else (None if load.duration_s else len(workload.tasks))
    stop = asyncio.Event()
    asked = RunStop(load.drain_timeout_s)
    live = LiveState(tasks_total=limit, duration_s=load.duration_s)
    backlog = _Backlog()
    marks = PhaseMarks(writer)
    mark, close_window = marks.mark, marks.close_window

    def request_done(rec: RequestRecord) -> None:
        writer.request(rec)
        live.request(rec)

    def task_done(rec: TaskRecord) -> None:
        writer.task(rec)
        live.task(rec)

    salt = uuid.uuid4().hex[:12] if load.salt_tasks else None
    async with transport:
        ctx = SessionContext(
            client=client_factory(transport), tool_time=load.tool_time, stop=stop, on_request=request_done,
            on_task=task_done, trajectories=workload.by_id(), builder=workload.builder, salt=salt,
            rate_limit=RateLimit(*load.rate_limit) if load.rate_limit else None, retry=load.retry,
            on_error=load.on_error, abort=lambda reason: asked.ask(f"aborted: {reason}"),
            rng=random.Random(load.seed), on_pause=live.pausing, on_turn=live.turn, on_call=live.calling,
        )  # fmt: skip

        async def arrive(t0: float) -> None:
            schedule = open_loop.arrivals.schedule(workload.tasks, task_order(workload.tasks, load.seed), load.seed)
            for n, (offset, traj) in enumerate(schedule):
                if limit is not None and n >= limit:
                    break
                wait = t0 + offset - perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                if stop.is_set():
                    return
                backlog.queue.append((n, traj, t0 + offset))
                backlog.arrived = n + 1
                live.tasks_started = n + 1
                backlog.ready.set()
            asked.reason = asked.reason or "arrivals"  # the window stays open: the backlog is still the window's work

        async def worker(slot: int) -> None:
            while not stop.is_set():
                if not backlog.queue:
                    if arrivals.done():
                        return
                    backlog.ready.clear()
                    wake = asyncio.ensure_future(backlog.ready.wait())
                    await asyncio.wait([wake, arrivals], return_when=asyncio.FIRST_COMPLETED)
                    wake.cancel()
                    continue
                task_index, traj, intended = backlog.queue.popleft()
                backlog.live += 1
                try:
                    await replay_task(ctx, task_index, slot, traj, intended=intended)
                finally:
                    backlog.live -= 1

        async def sample(t0: float) -> None:
            while True:
                backlog.samples.append([perf_counter() - t0, len(backlog.queue), backlog.live])
                await asyncio.sleep(SAMPLE_S)

        await ctx.client.warm(open_loop.max_live)
        t0 = perf_counter()
        live.t0 = t0
        mark("start", t0)
        mark("all_started", t0)
        mark("steady_start", t0 + (load.warmup_s or 0.0))
        arrivals = asyncio.create_task(arrive(t0), name="arrivals")
        workers = [asyncio.create_task(worker(i), name=f"session-{i}") for i in range(open_loop.max_live)]
        side = [asyncio.create_task(ClientMonitor(writer.client).run()), asyncio.create_task(sample(t0))]
        if progress:
            side.append(asyncio.create_task(print_progress(live, stop)))
        if check is not None:
            side.append(asyncio.create_task(run_checks(check, asked)))
        side += [asyncio.create_task(job()) for job in extra]
        try:
            with graceful_signals(asked.on_signal, asked.on_second_signal):
                await _until_stop(workers, asked, t0 + load.duration_s if load.duration_s else None)
                close_window()
                stop.set()
                arrivals.cancel()
                if any(not w.done() for w in workers):
                    asked.ask("duration")
                    await _drain(workers, asked)
        except asyncio.CancelledError:
            asked.ask("interrupted")
            close_window()
            stop.set()
            for task in [*workers, arrivals]:
                task.cancel()
            await asyncio.gather(*workers, arrivals, return_exceptions=True)
            raise
        finally:
            for task in side:
                task.cancel()
            await asyncio.gather(*side, arrivals, return_exceptions=True)
            mark("end")
    stopped = perf_counter()
    waits = [stopped - intended for _, _, intended in backlog.queue]  # latency the never-started sessions had so far
    return {
        "stop_reason": asked.reason or "completed",
        "tasks_started": backlog.arrived - len(backlog.queue),
        "sessions": open_loop.max_live,
        "salt": salt,
        **({"signal": asked.signal} if asked.signal else {}),
        "open_loop": {
            **open_loop.public(),
            "arrived": backlog.arrived,
            "never_started": len(backlog.queue),
            "never_started_wait_s": {"mean": sum(waits) / len(waits), "max": max(waits)} if waits else None,
            "backlog": backlog.samples,
        },
    }
