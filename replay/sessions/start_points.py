"""Start points: a warm start in the middle of a recorded session tree, as AgentX starts its initial lanes.

A tree's timeline is the recorded start time of every call of the root and of every subagent it spawns (the
``timestamp`` importers keep; without one, starts are rebuilt from recorded latency and tool time). A start
point t* is a share of the tree's recorded duration (first call start to last call start): every agent of the
tree resumes at its first call starting at or after t*, the call just before is sent first as a primer (with
its full prefix, so the host's cache holds the agent's context as it stood at t*), and a subagent that was
running at t* resumes beside its parent. Agents that had finished by t* are skipped; ones not yet started
start from their first call.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from replay.workload.trajectory import Spawn, Trajectory

_EPS = 1e-6


@dataclass(frozen=True, slots=True)
class StartAt:
    """``--start-at``: a fixed share of each trajectory's recorded duration, or a seeded uniform draw."""

    lo: float
    hi: float

    @classmethod
    def parse(cls, spec: str) -> StartAt:
        text = spec.strip()
        kind, _, rest = text.partition(":")
        try:
            if kind == "random":
                lo, _, hi = rest.partition(":")
                start = cls(float(lo), float(hi))
            else:
                start = cls(float(text), float(text))
        except ValueError:
            start = cls(-1.0, -1.0)
        if not (0.0 <= start.lo <= start.hi <= 1.0):
            raise ValueError(f"start point {spec!r}: expected RATIO or random:LO:HI with 0 <= LO <= HI <= 1")
        return start

    def draw(self, rng: random.Random) -> float:
        return self.lo if self.hi == self.lo else rng.uniform(self.lo, self.hi)

    def __str__(self) -> str:
        return f"{self.lo:g}" if self.lo == self.hi else f"random:{self.lo:g}:{self.hi:g}"


@dataclass(slots=True)
class AgentStart:
    """Where one agent of a tree resumes: ``resume`` is its first measured call (``len(turns)``: none left)."""

    resume: int
    finished: bool = False  # every call started before t*: only its subagents still run
    children: list[tuple[Spawn, AgentStart]] = field(default_factory=list)  # subagents running at t*

    @property
    def primer(self) -> int | None:
        """The call sent first with the full prefix (the one before ``resume``), or None."""
        return self.resume - 1 if self.resume >= 1 and not self.finished else None


@dataclass(slots=True)
class StartPlan:
    """A tree's warm start: t* (seconds from the tree's first call), its share, and the root's start."""

    t_star_s: float
    ratio: float
    duration_s: float
    root: AgentStart

    def primers(self) -> int:
        def count(a: AgentStart) -> int:
            return (a.primer is not None) + sum(count(c) for _, c in a.children)

        return count(self.root)


class Timeline:
    """Recorded call starts (absolute seconds) of every agent of a tree, and each subagent's recorded end."""

    def __init__(self, root: Trajectory, by_id: dict[str, Trajectory]) -> None:
        self.by_id = by_id
        self.starts: dict[int, list[float]] = {}  # id(trajectory run) -> start of each call
        self.ends: dict[int, float] = {}
        self.root = root
        self._walk(root, None, ())

    def _walk(self, traj: Trajectory, begin: float | None, stack: tuple[str, ...]) -> None:
        starts = _starts(traj, begin)
        self.starts[id(traj)] = starts
        last = traj.turns[-1]
        self.ends[id(traj)] = starts[-1] + _latency(last)
        for turn, t in zip(traj.turns, starts, strict=True):
            for ref in turn.spawn:
                child = self.by_id.get(ref.trajectory)
                if child is not None and ref.trajectory not in stack and id(child) not in self.starts:
                    self._walk(child, t + _latency(turn), (*stack, ref.trajectory))

    def bounds(self) -> tuple[float, float]:
        every = [t for starts in self.starts.values() for t in starts]
        return min(every), max(every)

    def background(self, parent: Trajectory, turn: int, child: Trajectory) -> bool:
        """AgentX's rule: a subagent no later parent call waits for (none starts after its recorded end)."""
        starts, end = self.starts.get(id(parent)), self.ends.get(id(child))
        if starts is None or end is None:
            return False
        return not any(t + 1.0 >= end for t in starts[turn + 1 :])  # 1 s: the loaders' join tolerance

    def plan(self, ratio: float) -> StartPlan:
        lo, hi = self.bounds()
        t_star = lo + ratio * (hi - lo)
        return StartPlan(t_star - lo, ratio, hi - lo, self._agent(self.root, t_star, ()))

    def _agent(self, traj: Trajectory, t_star: float, stack: tuple[str, ...]) -> AgentStart:
        starts = self.starts[id(traj)]
        resume = next((i for i, t in enumerate(starts) if t >= t_star - _EPS), len(starts))
        start = AgentStart(resume, finished=resume == len(starts))
        for i, turn in enumerate(traj.turns[:resume]):
            if starts[i] >= t_star:
                break
            for ref in turn.spawn:
                child = self.by_id.get(ref.trajectory)
                if child is None or ref.trajectory in stack or id(child) not in self.starts:
                    continue
                if self.starts[id(child)][-1] < t_star - _EPS:
                    continue  # finished before t*
                start.children.append((ref, self._agent(child, t_star, (*stack, ref.trajectory))))
        return start


def _latency(turn: object) -> float:
    rec = getattr(turn, "recorded", None) or {}
    value = rec.get("latency_s")
    return float(value) if isinstance(value, (int, float)) and value >= 0 else 0.0


def _starts(traj: Trajectory, begin: float | None) -> list[float]:
    """Each call's recorded start: its timestamp when every call has one, else rebuilt from latency + tool time."""
    stamps = [(t.recorded or {}).get("timestamp") for t in traj.turns]
    numbers = [float(s) for s in stamps if isinstance(s, (int, float))]
    if len(numbers) == len(stamps):
        return numbers
    t = 0.0 if begin is None else begin
    out = []
    for turn in traj.turns:
        out.append(t)
        gap = float((turn.recorded or {}).get("recorded_gap_s", turn.tool_time_s))
        t += _latency(turn) + gap
    return out
