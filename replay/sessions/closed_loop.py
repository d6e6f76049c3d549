"""Runner: the closed loop. N sessions run at once; each takes the next trajectory when it finishes.

It also decides the steady window (opened after warm-up once all N sessions run, closed when the stop is
called), stops on duration or task count, drains in-flight calls, and measures the client itself so a
report can say when the client, not the host, was the bottleneck.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

from asyncio_throttle import Throttler

from replay.clients.client import HostClient
from replay.clients.transport import Transport
from replay.results.records import RequestRecord, RunWriter, TaskRecord
from replay.sessions.session import SessionContext, replay_task
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.trajectory import Trajectory, Workload

CLIENT_SAMPLE_S = 5.0
LAG_PROBE_S = 0.05


@dataclass(frozen=True, slots=True)
class LoadConfig:
    """How hard and how long to push."""

    concurrency: int = 12
    duration_s: float | None = None  # stop after this long ...
    tasks: int | None = None  # ... or after this many trajectories (default: one pass over the workload)
    warmup_s: float | None = None  # None: until every session has finished its first call
    tool_time: ToolTimePolicy = field(default_factory=ToolTimePolicy)
    seed: int = 0
    drain_timeout_s: float = 60.0
    salt_tasks: bool = True  # every task run a distinct conversation (no cross-session cache sharing of copies)
    rate_limit: tuple[int, float] | None = None  # at most N calls started per period (s), across all sessions

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
        }


def task_order(trajectories: list[Trajectory], seed: int) -> Iterator[Trajectory]:
    """Seeded, reproducible order: a shuffled pass over the workload, then another, and so on."""
    rng = random.Random(seed)
    while True:
        batch = list(trajectories)
        rng.shuffle(batch)
        yield from batch


class _Progress:
    """Counters the runner keeps as records arrive (cheap: no per-token work)."""

    def __init__(self) -> None:
        self.requests = self.errors = self.output_tokens = self.tasks = 0


class _ClientMonitor:
    """Event-loop lag and CPU use of this process, sampled while the run goes on."""

    def __init__(self, write: Callable[[dict[str, Any]], None]) -> None:
        self.write = write
        self.lags: list[float] = []

    async def run(self) -> None:
        loop_t = perf_counter()
        cpu0, wall0 = time.process_time(), loop_t
        while True:
            await asyncio.sleep(LAG_PROBE_S)
            now = perf_counter()
            self.lags.append(max(0.0, now - loop_t - LAG_PROBE_S))
            loop_t = now
            if now - wall0 >= CLIENT_SAMPLE_S:
                self.flush(now, cpu0, wall0)
                cpu0, wall0 = time.process_time(), now

    def flush(self, now: float, cpu0: float, wall0: float) -> None:
        lags = sorted(self.lags) or [0.0]
        self.write(
            {
                "t": now,
                "wall_s": now - wall0,
                "cpu_s": time.process_time() - cpu0,
                "lag_p99_ms": 1000 * lags[min(len(lags) - 1, int(0.99 * len(lags)))],
                "lag_max_ms": 1000 * lags[-1],
            }
        )
        self.lags.clear()


async def run_load(
    workload: Workload,
    client_factory: Callable[[Transport], HostClient],
    transport: Transport,
    load: LoadConfig,
    writer: RunWriter,
    on_request: Callable[[RequestRecord], None] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the closed loop to its stop; every record goes to ``writer`` as it happens. Returns the footer."""
    task_limit = load.tasks if load.tasks is not None else (None if load.duration_s else len(workload.tasks))
    slots = load.concurrency if task_limit is None else min(load.concurrency, task_limit)
    order = task_order(workload.tasks, load.seed)
    stop = asyncio.Event()
    state = _Progress()
    first_call_done: set[int] = set()
    started = 0
    stop_reason = "completed"

    def mark(name: str, t: float | None = None) -> None:
        writer.phase(name, perf_counter() if t is None else t)

    def request_done(rec: RequestRecord) -> None:
        writer.request(rec)
        state.requests += 1
        state.errors += rec.error is not None
        state.output_tokens += rec.output_tokens or rec.output_events
        if on_request:
            on_request(rec)
        if rec.session not in first_call_done:
            first_call_done.add(rec.session)
            if load.warmup_s is None and len(first_call_done) == slots and not stop.is_set():
                mark("steady_start")

    def task_done(rec: TaskRecord) -> None:
        writer.task(rec)
        state.tasks += rec.complete

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
            throttle=Throttler(rate_limit=load.rate_limit[0], period=load.rate_limit[1]) if load.rate_limit else None,
        )

        window_open = True

        def close_window(reason: str) -> None:
            """The stop is called: no new work from here on, so the steady window ends now."""
            nonlocal window_open, stop_reason
            if window_open:
                window_open = False
                stop_reason = reason
                mark("stop")

        async def worker(slot: int) -> None:
            nonlocal started
            while not stop.is_set():
                if task_limit is not None and started >= task_limit:
                    close_window("tasks")  # the other sessions finish the trajectories they hold
                    return
                task_index = started
                started += 1
                await replay_task(ctx, task_index, slot, next(order))

        await ctx.client.warm(slots)
        monitor = _ClientMonitor(writer.client)
        t0 = perf_counter()
        mark("start", t0)
        workers = [asyncio.create_task(worker(i), name=f"session-{i}") for i in range(slots)]
        mark("all_started")
        if load.warmup_s is not None:
            asyncio.get_running_loop().call_later(load.warmup_s, lambda: window_open and mark("steady_start"))
        side = [asyncio.create_task(monitor.run())]
        if progress:
            side.append(asyncio.create_task(_print_progress(state, t0, stop)))
        try:
            _, pending = await asyncio.wait(workers, timeout=load.duration_s)
            if pending:
                # Duration reached: no new calls; in-flight calls finish (the drain, outside the window),
                # tool pauses end at once, and what is still running after the drain timeout is cancelled.
                close_window("duration")
                stop.set()
                _, pending = await asyncio.wait(pending, timeout=load.drain_timeout_s)
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                if pending:
                    stop_reason += f"+drain_timeout({len(pending)} sessions cancelled)"
        except asyncio.CancelledError:
            close_window("interrupted")
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
    return {"stop_reason": stop_reason, "tasks_started": started, "sessions": slots, "salt": salt}


async def _print_progress(state: _Progress, t0: float, stop: asyncio.Event) -> None:
    last_tokens, last_t = 0, t0
    while True:
        await asyncio.sleep(5.0)
        now = perf_counter()
        rate = (state.output_tokens - last_tokens) / (now - last_t)
        last_tokens, last_t = state.output_tokens, now
        tag = " (draining)" if stop.is_set() else ""
        print(
            f"  {now - t0:6.0f}s  requests {state.requests}  errors {state.errors}  tasks {state.tasks}"
            f"  output {rate:,.0f} tok/s{tag}",
            file=sys.stderr,
            flush=True,
        )
