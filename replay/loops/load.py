"""What a run's load is: how hard and how long to push (``LoadConfig``), the seeded task order, and what follows from
them before the run starts (``RunPlan``: the task limit, the sessions, whether the run is measured whole).

Every loop reads these the same way: the one loop (``replay.loops.skeleton``), each of its load models, and the parent
of a sharded run (``replay.scale.workers``), which decides the phases for its workers.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from replay.sessions.lanes import LaneConfig
from replay.sessions.retry import RetryPolicy
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.trajectory import Trajectory

# --ramp-up auto: up to RAMP_FREE sessions start at once; more start RAMP_PER_SESSION_S apart, over RAMP_MAX_S at most
RAMP_FREE, RAMP_PER_SESSION_S, RAMP_MAX_S = 256, 0.002, 30.0


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
    # The run's nonce in those tags (None: a fresh one). Hosts compared side by side share one, so they get
    # identical prompts and their answers can be compared (replay.metrics.agreement); they never share a cache.
    salt_nonce: str | None = None
    rate_limit: tuple[int, float] | None = None  # at most N calls started per period (s), across all sessions
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    on_error: str = "continue"  # continue | end-task | abort
    lanes: LaneConfig | None = None  # start points, warm-up, idle caps, background subagents (sessions/lanes.py)
    ramp_up_s: float | None = None  # lane k of N starts k/N of this after the start; None: auto (ramp_up)

    def ramp_up(self, sessions: int) -> float:
        """Over how long the ``sessions`` lanes' first calls are spread (``--ramp-up``; 0: all at once)."""
        if self.ramp_up_s is not None:
            return self.ramp_up_s
        return 0.0 if sessions <= RAMP_FREE else min(sessions * RAMP_PER_SESSION_S, RAMP_MAX_S)

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
            "ramp_up_s": self.ramp_up_s if self.ramp_up_s is not None else "auto",
        }


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What the load decides before the run starts.

    ``task_limit``: the tasks the run may start (None: it stops on time); ``sessions``: the lanes at once (never
    more than the tasks left); ``whole``: a run of N tasks with no stated warm-up is measured whole, every call of
    it, warm-up and drain included (the window is the run); ``auto_window``: the steady window opens when every
    lane's first call is back (no ``--warmup`` and no warm-up barrier says otherwise)."""

    task_limit: int | None
    sessions: int
    whole: bool
    auto_window: bool

    @classmethod
    def of(cls, load: LoadConfig, workload_tasks: int, first_task: int = 0) -> RunPlan:
        limit = load.tasks if load.tasks is not None else (None if load.duration_s else workload_tasks)
        left = None if limit is None else max(limit - first_task, 0)
        sessions = load.concurrency if left is None else max(min(load.concurrency, left), 1)
        barrier = load.lanes is not None and load.lanes.has_warmup
        whole = limit is not None and load.duration_s is None and load.warmup_s is None and not barrier
        return cls(limit, sessions, whole, load.warmup_s is None and not whole and not barrier)


def task_order(trajectories: list[Trajectory], seed: int) -> Iterator[Trajectory]:
    """Seeded, reproducible order: a shuffled pass over the workload, then another, and so on."""
    rng = random.Random(seed)
    while True:
        batch = list(trajectories)
        rng.shuffle(batch)
        yield from batch


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


def run_nonce(load: LoadConfig) -> str | None:
    """The nonce of the run's tags (replay.sessions.agent._salted): given, or fresh; None without tags."""
    return (load.salt_nonce or uuid.uuid4().hex[:12]) if load.salt_tasks else None
