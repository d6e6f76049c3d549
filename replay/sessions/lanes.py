"""Lanes: how a run plays its session trees beyond "start each at turn 0", the AgentX way when asked.

A lane is one concurrency slot holding one session tree (root, subagents, background subagents) until the whole
tree has drained; that much is how every run works. ``LaneConfig`` adds what AgentX adds, each part optional:

- a start point for each lane's first tree (``start_at``; recycled trees start at turn 0), with its primers;
- a warm-up: after the primers, ``warmup_per_lane`` calls per lane with no pauses and ``max_tokens`` 1, then a
  barrier (every warm-up call back) where the steady window opens; warm-up calls are recorded with
  ``phase: "warmup"`` and left out of every figure;
- background subagents: a subagent no later parent call waits for does not gate its parent (it still holds the
  lane until it ends);
- idle caps (``replay.sessions.idle``): per tree and for the whole system.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from replay.sessions.idle import IdleGuard, TreeState
from replay.sessions.start_points import StartAt, StartPlan, Timeline
from replay.workload.trajectory import Trajectory

WARMUP_MAX_TOKENS = 1  # AgentX's warm-up calls ask for one token (aiperf timing/strategies/agentic_replay.py)


@dataclass(frozen=True, slots=True)
class LaneConfig:
    """What a run adds to plain lanes; every field off by default."""

    start_at: StartAt | None = None
    warmup_per_lane: int = 0
    background_subagents: bool = False
    system_idle_cap_s: float | None = None
    tree_idle_cap_s: float | None = None

    @property
    def has_warmup(self) -> bool:
        """Lanes warm up before the steady window (primers of a start point, or calls per lane): a barrier opens it."""
        return bool(self.warmup_per_lane) or self.start_at is not None

    def public(self) -> dict[str, Any]:
        return {
            "start_at": str(self.start_at) if self.start_at else None,
            "warmup_per_lane": self.warmup_per_lane,
            "background_subagents": self.background_subagents,
            "system_idle_cap_s": self.system_idle_cap_s,
            "tree_idle_cap_s": self.tree_idle_cap_s,
        }


class Warmup:
    """The warm-up of the initial lanes: primers first (all of them), then a per-lane quota, then the barrier."""

    def __init__(self, lanes: int, per_lane: int, on_done: Callable[[], None]) -> None:
        self.lanes = lanes
        self.quota = dict.fromkeys(range(lanes), per_lane)
        self.registered: set[int] = set()
        self.primers_left = 0
        self.inflight = 0
        self.primed = asyncio.Event()
        self.done = asyncio.Event()
        self._on_done = on_done

    def register(self, lane: int, primers: int) -> None:
        """Lane ``lane`` starts its first tree with this many primers (called once per lane, before any is sent)."""
        if lane in self.registered:
            return
        self.registered.add(lane)
        self.primers_left += primers
        self._check()

    def retire(self, lane: int) -> None:
        """A lane that will send nothing more (its worker ended) no longer holds the barrier."""
        self.register(lane, 0)
        self.quota[lane] = 0
        self._check()

    def _check(self) -> None:
        if len(self.registered) >= self.lanes and self.primers_left <= 0:
            self.primed.set()
        if self.primed.is_set() and self.inflight == 0 and not any(self.quota.values()) and not self.done.is_set():
            self.done.set()
            self._on_done()

    async def admit(self, lane: int, primer: bool, stop: asyncio.Event) -> str | None:
        """The phase of a lane's next call (``warmup`` or ``measured``); None when the run stopped waiting."""
        if primer and not self.done.is_set():
            self.inflight += 1
            return "warmup"
        if self.done.is_set():
            return "measured"
        if not await _either(self.primed, stop):
            return None
        if self.quota.get(lane, 0) > 0 and not self.done.is_set():
            self.quota[lane] -= 1
            self.inflight += 1
            return "warmup"
        return "measured" if await _either(self.done, stop) else None

    def returned(self, primer: bool) -> None:
        self.inflight -= 1
        if primer:
            self.primers_left -= 1
        self._check()


async def _either(event: asyncio.Event, stop: asyncio.Event) -> bool:
    """Wait for ``event`` or the stop; True when ``event`` came."""
    if event.is_set():
        return True
    waits = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(stop.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    return event.is_set()


class LaneRuntime:
    """One run's lanes: start plans of the initial trees, the warm-up, the idle guard, background subagents."""

    def __init__(self, config: LaneConfig, lanes: int, trajectories: dict[str, Trajectory], seed: int,
                 on_steady: Callable[[], None]) -> None:  # fmt: skip
        self.config = config
        self.trajectories = trajectories
        self.seed = seed
        self.started: set[int] = set()
        self.warmup = Warmup(lanes, config.warmup_per_lane, on_steady) if config.has_warmup else None
        caps = config.system_idle_cap_s is not None or config.tree_idle_cap_s is not None
        self.idle = IdleGuard(config.system_idle_cap_s, config.tree_idle_cap_s) if caps else None
        self._timelines: dict[str, Timeline] = {}
        self.plans: list[dict[str, Any]] = []  # what each initial lane started with, for the footer

    def timeline(self, traj: Trajectory) -> Timeline:
        tl = self._timelines.get(traj.id)
        if tl is None:
            tl = self._timelines[traj.id] = Timeline(traj, self.trajectories)
        return tl

    def start_plan(self, lane: int, traj: Trajectory) -> StartPlan | None:
        """The warm start of a lane's first tree (seeded per trajectory and lane); None for recycled trees."""
        first = lane not in self.started
        self.started.add(lane)
        plan = None
        if first and self.config.start_at is not None:
            rng = random.Random(f"{self.seed}:{traj.id}:{lane}")
            plan = self.timeline(traj).plan(self.config.start_at.draw(rng))
            self.plans.append({"lane": lane, "trajectory": traj.id, "ratio": plan.ratio, "t_star_s": plan.t_star_s,
                               "duration_s": plan.duration_s, "resume_turn": plan.root.resume,
                               "primers": plan.primers()})  # fmt: skip
        if first and self.warmup is not None:
            self.warmup.register(lane, plan.primers() if plan else 0)
        return plan

    def background(self, parent: Trajectory, turn: int, child: Trajectory, root: Trajectory) -> bool:
        return self.config.background_subagents and self.timeline(root).background(parent, turn, child)

    def new_tree(self) -> TreeState:
        return TreeState()

    @property
    def warming(self) -> bool:
        return self.warmup is not None and not self.warmup.done.is_set()

    def footer(self) -> dict[str, Any]:
        """What the lanes did, for the run file: each initial lane's start point and the idle caps' jumps."""
        out: dict[str, Any] = {"config": self.config.public(), "starts": self.plans}
        if self.idle is not None:
            out["idle"] = self.idle.public()
        if self.warmup is not None:
            out["warmup_passed"] = self.warmup.done.is_set()
        return out
