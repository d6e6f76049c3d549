"""``--workers N``: one run's lanes sharded over N worker processes, each with its own event loop and connection
pool, when one process's CPU is the limit.

Lane k runs in worker k mod N, so the lanes are the run's lanes, split as evenly as can be. This process (the
parent) keeps everything that defines the run: it hands out the task indices of the one seeded order (so the tasks,
their numbers and the task limit are those of a single process), marks the phases (start; the steady window opening
when every lane's first call is back, after ``--warmup``, or at the start of a run of N tasks; the stop) by the same
rules as the single-process closed loop, times the duration, and is the only writer of the run file: every record
reaches it over a socket as it happens and is written, flushed, summarised and checked (thresholds, windows) there,
so the summary is the same function of the same records. The client's self-measurements carry their worker's
number, and the report's saturation check looks at each worker (``results.metrics``).

Any stop (duration, signal, ``--abort-on-fail``, a worker's ``--on-error abort``) is passed to every worker with its
grace; a second signal cuts. When the parent exits, whatever way, no worker outlives it: they are killed here, and a
worker whose parent died (kill -9) finds its socket closed and cuts its calls at once. The parent's bookkeeping (the
workers, their messages, the task counter, the stop, the footer) is ``parent``'s; here is the run to its stop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from time import perf_counter
from typing import Any

from replay.loops.live import LiveState, print_progress
from replay.loops.load import LoadConfig
from replay.loops.signals import graceful_signals
from replay.loops.stop import run_checks
from replay.records.run_file import RunWriter
from replay.scale.parent import (
    EXIT_MARGIN_S,
    START_TIMEOUT_S,
    Launched,
    Launcher,
    Parent,
    ShardedRun,
    WorkerError,
    shard_lanes,
)

__all__ = [  # the sharded run's values are the parent's (parent.py), imported from here too
    "EXIT_MARGIN_S",
    "START_TIMEOUT_S",
    "Launched",
    "Launcher",
    "ShardedRun",
    "WorkerError",
    "run_workers",
    "shard_lanes",
]


async def run_workers(
    plan: ShardedRun,
    writer: RunWriter,
    progress: bool = True,
    check: Callable[[], str | None] | None = None,
    extra: Sequence[Callable[[], Coroutine[Any, Any, None]]] = (),
) -> dict[str, Any]:
    """The sharded closed loop to its stop, every record written by ``writer`` here; returns the footer (the
    single-process footer's fields, and ``workers``: each worker's lanes, requests, tasks and stop)."""
    live = LiveState(tasks_total=None, duration_s=plan.load.duration_s)
    parent = Parent(plan, writer, live)
    live.tasks_total = parent.task_limit
    try:
        with graceful_signals(parent.asked.on_signal, parent.cut):
            await parent.start()
            ready = await parent.until(parent.all_ready, START_TIMEOUT_S)
            if parent.error or not ready or parent.asked_to_stop():
                if not ready and not parent.error:
                    parent.error = f"the workers did not start within {START_TIMEOUT_S:.0f} s"
                return parent.footer()  # nothing was sent: the workers are stopped by close()
            await _run(parent, plan.load, progress, check, extra)
    finally:
        await parent.close()
        if parent.error:
            raise WorkerError(parent.error, parent.footer())
    return parent.footer()


async def _run(parent: Parent, load: LoadConfig, progress: bool, check: Any, extra: Sequence[Any]) -> None:
    """Start every worker at once, stop them when the run ends, wait for their footers."""
    marks, live = parent.marks, parent.live
    t0 = perf_counter()
    live.t0 = t0
    marks.mark("start", t0)
    parent.broadcast(("go",))
    marks.mark("all_started")
    if parent.whole:
        marks.mark("steady_start", t0)
    if load.warmup_s is not None:

        def open_steady() -> None:
            if marks.window_open:
                marks.mark("steady_start")

        asyncio.get_running_loop().call_later(load.warmup_s, open_steady)
    shown = asyncio.Event()
    side = [asyncio.create_task(print_progress(live, shown))] if progress else []
    if check is not None:
        side.append(asyncio.create_task(run_checks(check, parent.asked)))
    side += [asyncio.create_task(job()) for job in extra]
    try:
        deadline = load.duration_s
        await parent.until(lambda: parent.done() or parent.asked_to_stop(), deadline)
        if not parent.done():
            parent.stop()
            shown.set()
            await parent.until(parent.done, parent.asked.grace + EXIT_MARGIN_S)
    finally:
        for task in side:
            task.cancel()
        await asyncio.gather(*side, return_exceptions=True)
        marks.mark("end")
