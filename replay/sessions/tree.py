"""A session tree: a root agent and every subagent it spawns, played in one lane.

The tree holds what its agents share: its idle state (for the idle caps), the background subagents that must end
before the lane is free, and the prefixes its agents have sent, for the theoretical prefix-cache hit (a call's
leading messages already sent by any agent of the tree: what an infinite prefix cache would serve).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from replay.sessions.idle import TreeState
from replay.workload.trajectory import CountedContext, Trajectory


@dataclass(slots=True)
class Tree:
    root: Trajectory
    state: TreeState = field(default_factory=TreeState)
    background: list[asyncio.Task[None]] = field(default_factory=list)
    _seen: set[int] = field(default_factory=set)

    def prefix_seen(self, context: CountedContext) -> int:
        """Tokens of ``context``'s leading messages some earlier call of the tree already sent; then note them.

        Each prefix is keyed by a chain of the messages' byte hashes (CPython keeps a bytes object's hash), so a
        call costs one tuple hash per message, never a pass over its text."""
        h = 0
        hit = 0
        matching = True
        sums = 0
        for m in context.messages:
            h = hash((h, m.wire))
            sums += m.tokens
            if matching and h in self._seen:
                hit = sums
            else:
                matching = False
                self._seen.add(h)
        return hit
