"""The closed loop: N lanes at once, each taking the next task of the seeded order when its last one ends
(``ClosedLoop``), with the recipe lanes when the load asks (start points, a warm-up barrier, idle caps, background
subagents: ``replay.sessions.lanes``); and a shard of a sharded run (``ShardLoop``: this process's lanes, the run's
task counter and stop from its parent, ``replay.scale.workers``). Both are load models of the one loop
(``replay.loops.skeleton.run_loop``).

The steady window opens after ``--warmup``, at the warm-up barrier, or once every lane's first call is back; a run
of N tasks with none of those is measured whole. When the run has taken its last task the window closes and the
other lanes finish the tasks they hold (the drain).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Sequence
from typing import Any, Protocol

from replay.clock import now
from replay.loops.live import LiveState
from replay.loops.load import LoadConfig, RunPlan, TaskOrder, task_order
from replay.loops.skeleton import LoadModel, LoopRun
from replay.loops.stop import RunStop
from replay.sessions.lanes import LaneRuntime
from replay.sessions.session import replay_task
from replay.workload.trajectory import Workload

__all__ = ["ClosedLoop", "LoadConfig", "Shard", "ShardLoop", "TaskOrder", "task_order"]


class ClosedLoop(LoadModel):
    """N lanes in this process; ``first_task``: a resumed run goes on from this task of the seeded order."""

    def __init__(self, first_task: int = 0) -> None:
        self.first_task = first_task

    def plan(self, load: LoadConfig, workload: Workload) -> RunPlan:
        return RunPlan.of(load, len(workload.tasks), self.first_task)

    def lanes(self, run: LoopRun) -> LaneRuntime | None:
        if run.load.lanes is None:
            return None
        marks = run.marks

        def on_steady() -> None:  # the warm-up barrier passed
            if marks.window_open and not run.stop.is_set():
                marks.mark("steady_start")

        return LaneRuntime(run.load.lanes, run.plan.sessions, run.workload.by_id(), run.load.seed, on_steady)

    def start(self, run: LoopRun) -> list[asyncio.Task[None]]:
        run.started = self.first_task
        return [asyncio.create_task(self._lane(run, slot), name=f"session-{slot}") for slot in self.lanes_here(run)]

    async def take(self, run: LoopRun) -> int | None:
        """The next task's index in the seeded order, None when the run has started all it may."""
        limit = run.plan.task_limit
        if limit is not None and run.started >= limit:
            return None
        run.started += 1
        run.live.tasks_started = run.started
        return run.started - 1

    async def _lane(self, run: LoopRun, slot: int) -> None:
        try:
            ramp = run.load.ramp_up(run.plan.sessions)
            if ramp and slot:  # lane k of N starts k/N of the ramp-up after the start (or at the stop)
                due = run.t0 + ramp * slot / run.plan.sessions
                while not run.stop.is_set() and (left := due - now()) > 0:  # a loop's timer may fire a little early
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(run.stop.wait(), left)
            while not run.stop.is_set():
                index = await self.take(run)
                if index is None:
                    run.asked.reason = run.asked.reason or "tasks"
                    if not run.plan.whole:
                        run.close_window()  # the other lanes finish the tasks they hold (the drain)
                    return
                await replay_task(run.ctx, index, slot, run.order.at(index))
        finally:
            if run.lanes is not None and run.lanes.warmup is not None:
                run.lanes.warmup.retire(slot)  # a lane that sends nothing more does not hold the warm-up barrier

    def open_window(self, run: LoopRun) -> None:
        marks = run.marks
        if run.plan.whole:
            marks.mark("steady_start", run.t0)
        if run.load.warmup_s is not None:

            def open_steady() -> None:
                if marks.window_open:
                    marks.mark("steady_start")

            asyncio.get_running_loop().call_later(run.load.warmup_s, open_steady)

    async def deadline(self, run: LoopRun, workers: list[asyncio.Task[None]]) -> float | None:
        """Counted from the warm-up barrier when the run has one (AgentX's profiling phase is its duration)."""
        duration = run.load.duration_s
        if not duration or run.lanes is None or run.lanes.warmup is None:
            return await super().deadline(run, workers)
        barrier = asyncio.create_task(run.lanes.warmup.done.wait())
        wake = asyncio.create_task(run.asked.requested.wait())
        await asyncio.wait([barrier, wake, *workers], return_when=asyncio.FIRST_COMPLETED)
        barrier.cancel()
        wake.cancel()
        return now() + duration

    def footer(self, run: LoopRun) -> dict[str, Any]:
        out = super().footer(run)
        if run.plan.whole:
            out["window"] = "whole"  # the figures cover every call of the tasks (docs/metrics.md)
        if run.lanes is not None:
            out["lanes"] = run.lanes.footer()
        if ramp := run.load.ramp_up(run.plan.sessions):
            out["ramp_up_s"] = ramp
        return out


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


class ShardLoop(ClosedLoop):
    """A shard's lanes: tasks, start and stop from the parent, which marks the phases and times the duration."""

    def __init__(self, shard: Shard) -> None:
        super().__init__()
        self.shard = shard

    def plan(self, load: LoadConfig, workload: Workload) -> RunPlan:
        return RunPlan.of(load, len(workload.tasks))

    def lanes_here(self, run: LoopRun) -> Sequence[int]:
        return self.shard.lanes

    def salt(self, load: LoadConfig) -> str | None:
        return self.shard.salt

    def rng(self, load: LoadConfig) -> random.Random:
        return random.Random(f"{load.seed}/{self.shard.index}")

    async def ready(self) -> None:
        await self.shard.ready()

    async def take(self, run: LoopRun) -> int | None:
        index = await self.shard.take()
        run.started += index is not None
        return index

    def side(self, run: LoopRun) -> list[Any]:
        return [self.shard.listen(run.asked, run.live)]

    async def deadline(self, run: LoopRun, workers: list[asyncio.Task[None]]) -> float | None:
        return None  # the parent times the run

    def stopped(self, run: LoopRun) -> None:
        self.shard.stopped(run.asked.reason or "stop")
