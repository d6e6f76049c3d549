"""Idle caps: a tool pause cut short when nothing is happening, as AgentX does, without changing any one pause.

Two guards, either or both:

- **per tree** (``tree_cap_s``, AgentX's ``trace_idle_gap_cap_seconds`` = 300 s): once no call of a session tree
  (root and subagents) has been in flight for that long, the tree's pending pauses end;
- **whole system** (``system_cap_s``, AgentX's ``system_idle_gap_cap_seconds`` = 10 s): once no call of the whole
  run has been in flight for that long, every pending pause is advanced by the same amount, so that the earliest
  ends now (the others keep their spacing).

Sleepers wake on a generation event whenever a count they depend on changes, and recompute their deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from replay import clock


@dataclass(slots=True)
class TreeState:
    """One session tree's calls in flight, and since when it has had none."""

    inflight: int = 0
    idle_since: float = field(default_factory=clock.now)


class IdleGuard:
    """Counts calls in flight (per tree and in all) and runs tool pauses under the caps."""

    def __init__(self, system_cap_s: float | None, tree_cap_s: float | None) -> None:
        self.system_cap_s = system_cap_s
        self.tree_cap_s = tree_cap_s
        self.inflight = 0
        self.idle_since = clock.now()
        self.shift = 0.0  # seconds every pending pause has been advanced so far (system cap)
        self.jumps = 0
        self.skipped_s = 0.0
        self._pending: dict[object, tuple[float, TreeState]] = {}  # pause -> (end before shifts, its tree)
        self._changed = asyncio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def started(self, tree: TreeState) -> None:
        self.inflight += 1
        tree.inflight += 1
        self._notify()

    def ended(self, tree: TreeState) -> None:
        now = clock.now()
        self.inflight -= 1
        tree.inflight -= 1
        if self.inflight == 0:
            self.idle_since = now
        if tree.inflight == 0:
            tree.idle_since = now
        self._notify()

    def _deadline(self, end: float, tree: TreeState) -> float:
        d = end - self.shift
        if self.tree_cap_s is not None and tree.inflight == 0:
            d = min(d, tree.idle_since + self.tree_cap_s)
        return d

    def _advance(self, now: float) -> None:
        """The whole system has idled past its cap: bring the earliest pending pause to now, the rest alike."""
        earliest = min((self._deadline(e, t) for e, t in self._pending.values()), default=now)
        if earliest > now:
            self.shift += earliest - now
            self.jumps += 1
            self.skipped_s += earliest - now
        self.idle_since = now  # one jump per idle spell: the next starts when the pause it released ends
        self._notify()

    async def pause(self, tree: TreeState, seconds: float, stop: asyncio.Event) -> float:
        """Sleep for ``seconds`` unless a cap or the stop ends it earlier; return the time actually paused."""
        start = clock.now()
        if seconds <= 0:
            return 0.0
        key = object()
        end = start + seconds + self.shift
        self._pending[key] = (end, tree)
        try:
            while not stop.is_set():
                now = clock.now()
                deadline = self._deadline(end, tree)
                if deadline <= now:
                    break
                wake = deadline
                if self.system_cap_s is not None and self.inflight == 0:
                    due = self.idle_since + self.system_cap_s
                    if due <= now:
                        self._advance(now)
                        continue
                    wake = min(wake, due)
                changed = self._changed
                with contextlib.suppress(TimeoutError):
                    waits = [asyncio.ensure_future(changed.wait()), asyncio.ensure_future(stop.wait())]
                    try:
                        await asyncio.wait(waits, timeout=max(0.0, wake - now), return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        for w in waits:
                            w.cancel()
        finally:
            del self._pending[key]
        return clock.now() - start

    def public(self) -> dict[str, float | int | None]:
        return {"system_cap_s": self.system_cap_s, "tree_cap_s": self.tree_cap_s, "system_jumps": self.jumps,
                "system_skipped_s": self.skipped_s}  # fmt: skip
