"""The open loop: sessions arrive on a schedule (``replay.loops.arrivals``) whatever the host is doing; a load model
of the one loop (``replay.loops.skeleton.run_loop``).

At most ``max_live`` sessions run at once; an arrival that finds them all busy waits in a backlog, and its first
call's latency counts from its arrival (no coordinated omission: a host that falls behind shows it as latency,
not as a lower arrival rate). The backlog is sampled every second into the footer, with the cap. The steady window
opens ``--warmup`` after the start and closes at the stop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from replay.clock import now
from replay.loops.arrivals import Arrivals
from replay.loops.load import LoadConfig, RunPlan, task_order
from replay.loops.skeleton import LoadModel, LoopRun
from replay.sessions.session import replay_task
from replay.workload.trajectory import Trajectory, Workload

SAMPLE_S = 1.0


@dataclass(frozen=True, slots=True)
class OpenLoopConfig:
    arrivals: Arrivals
    max_live: int

    def public(self) -> dict[str, Any]:
        return {"arrivals": str(self.arrivals), "max_live": self.max_live}


class OpenLoop(LoadModel):
    """Arrivals into a backlog, ``max_live`` sessions taking from it."""

    def __init__(self, config: OpenLoopConfig) -> None:
        self.config = config
        self.queue: deque[tuple[int, Trajectory, float]] = deque()  # arrived, not started: (task, trajectory, when)
        self.wake = asyncio.Event()  # something arrived, or arrivals ended, or the run stops
        self.arriving = True
        self.live = 0
        self.arrived = 0
        self.samples: list[list[float]] = []  # [t, waiting, live]

    def plan(self, load: LoadConfig, workload: Workload) -> RunPlan:
        return RunPlan(RunPlan.of(load, len(workload.tasks)).task_limit, self.config.max_live, False, False)

    def start(self, run: LoopRun) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(self._session(run, slot), name=f"session-{slot}") for slot in self.lanes_here(run)]

    def lanes_here(self, run: LoopRun) -> Sequence[int]:
        return range(self.config.max_live)

    async def _session(self, run: LoopRun, slot: int) -> None:
        while not run.stop.is_set():
            if not self.queue:
                if not self.arriving:
                    return
                self.wake.clear()
                await self.wake.wait()
                continue
            task_index, traj, intended = self.queue.popleft()
            self.live += 1
            try:
                await replay_task(run.ctx, task_index, slot, traj, intended=intended)
            finally:
                self.live -= 1

    async def _arrive(self, run: LoopRun) -> None:
        load, tasks, limit = run.load, run.workload.tasks, run.plan.task_limit
        try:
            for n, (offset, traj) in enumerate(self.config.arrivals.schedule(tasks, task_order(tasks, load.seed),
                                                                             load.seed)):  # fmt: skip
                if limit is not None and n >= limit:
                    break
                wait = run.t0 + offset - now()
                if wait > 0:
                    await asyncio.sleep(wait)
                if run.stop.is_set():
                    return
                self.queue.append((n, traj, run.t0 + offset))
                self.arrived = run.live.tasks_started = n + 1
                self.wake.set()
            run.asked.reason = run.asked.reason or "arrivals"  # the window stays open: the backlog is its work
        finally:
            self.arriving = False
            self.wake.set()

    async def _sample(self, run: LoopRun) -> None:
        while True:
            self.samples.append([now() - run.t0, len(self.queue), self.live])
            await asyncio.sleep(SAMPLE_S)

    def open_window(self, run: LoopRun) -> None:
        run.marks.mark("steady_start", run.t0 + (run.load.warmup_s or 0.0))

    def side(self, run: LoopRun) -> list[Coroutine[Any, Any, None]]:
        return [self._arrive(run), self._sample(run)]

    def stopping(self, run: LoopRun) -> None:
        self.wake.set()  # sessions waiting for an arrival see the stop

    def footer(self, run: LoopRun) -> dict[str, Any]:
        stopped = now()
        waits = [stopped - intended for _, _, intended in self.queue]  # latency the never-started sessions had so far
        return {
            "tasks_started": self.arrived - len(self.queue),
            "sessions": self.config.max_live,
            "open_loop": {
                **self.config.public(),
                "arrived": self.arrived,
                "never_started": len(self.queue),
                "never_started_wait_s": {"mean": sum(waits) / len(waits), "max": max(waits)} if waits else None,
                "backlog": self.samples,
            },
        }
