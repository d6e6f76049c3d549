"""What one agent (and, separately, its subagents) spent, and how a subagent's figures join its parent's."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from replay import clock
from replay.records.run_file import RequestRecord
from replay.sessions.tree import Tree


@dataclass(slots=True)
class Tally:
    """What one agent (and, separately, its subagents) spent."""

    calls: int = 0  # turns called (each once, however many attempts)
    attempts: int = 0
    errors: int = 0  # failed attempts
    failed_turns: int = 0
    model_time: float = 0.0
    tool_time: float = 0.0
    throttled: float = 0.0
    queue: float = 0.0
    ended: list[str] = field(default_factory=list)  # why the task ended early; one list shared by its whole tree
    sub_runs: int = 0
    sub_calls: int = 0
    sub_model_time: float = 0.0

    def add_attempt(self, rec: RequestRecord) -> None:
        self.attempts += 1
        self.errors += rec.error is not None
        done = rec.t_done or clock.now()
        if rec.t_call is not None:
            self.queue += max(0.0, rec.t_sent - rec.t_call)
            self.model_time += max(0.0, done - rec.t_sent)
        self.throttled += rec.wait_s + rec.throttle_s


async def run_background(coro: Any, tally: Tally, sub: Tally) -> None:
    """A background subagent: its figures join its task's when it ends."""
    try:
        await coro
    finally:
        merge(tally, sub)


def merge(tally: Tally, sub: Tally) -> None:
    tally.sub_runs += 1 + sub.sub_runs
    tally.sub_calls += sub.calls + sub.sub_calls
    tally.sub_model_time += sub.model_time + sub.sub_model_time
    tally.errors += sub.errors
    tally.failed_turns += sub.failed_turns


async def drain_background(tree: Tree) -> None:
    """The lane is free only when every background subagent of its tree has ended."""
    while tree.background:
        pending, tree.background = tree.background, []
        await asyncio.gather(*pending, return_exceptions=True)
