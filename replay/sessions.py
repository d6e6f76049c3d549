"""Sessions: one simulated agent replaying one trajectory, turn by turn.

Each turn's request is the context so far; after the call the recorded output is appended (so the next
request's prefix is exactly what the recorded agent sent, whatever the host answered), then the agent
"runs its tools" for the pause the tool-time policy gives.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter

from replay.client_openai import OpenAIChatClient
from replay.records import RequestRecord, TaskRecord
from replay.requests import RequestOptions, build_chat_body
from replay.trajectory import Message, Trajectory


@dataclass(frozen=True, slots=True)
class ToolTimePolicy:
    """How long the agent pauses between calls: ``recorded | scale:X | fixed:S | none``."""

    kind: str = "recorded"
    value: float = 1.0

    @classmethod
    def parse(cls, spec: str) -> ToolTimePolicy:
        kind, _, arg = spec.strip().partition(":")
        if kind in ("recorded", "none") and not arg:
            return cls(kind, 1.0 if kind == "recorded" else 0.0)
        if kind in ("scale", "fixed") and arg:
            try:
                value = float(arg)
            except ValueError:
                value = -1.0
            if value >= 0:
                return cls(kind, value)
        raise ValueError(f"tool time policy {spec!r}: expected recorded, none, scale:X or fixed:SECONDS (X, S >= 0)")

    def pause(self, recorded_s: float) -> float:
        if self.kind == "recorded":
            return recorded_s
        if self.kind == "scale":
            return recorded_s * self.value
        if self.kind == "fixed":
            return self.value
        return 0.0

    def __str__(self) -> str:
        return self.kind if self.kind in ("recorded", "none") else f"{self.kind}:{self.value:g}"


@dataclass(slots=True)
class SessionContext:
    """What every session of a run shares: the client, request options and where records go."""

    client: OpenAIChatClient
    options: RequestOptions
    fixed_fields: bytes
    tool_time: ToolTimePolicy
    stop: asyncio.Event
    on_request: Callable[[RequestRecord], None]
    on_task: Callable[[TaskRecord], None]


async def _pause(stop: asyncio.Event, seconds: float) -> float:
    """Sleep for the tool pause unless the run stops first; return the time actually paused."""
    if seconds <= 0:
        return 0.0
    start = perf_counter()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    return perf_counter() - start


async def replay_task(ctx: SessionContext, task: int, slot: int, traj: Trajectory) -> TaskRecord:
    """Replay one trajectory; the task record is emitted even when the run stops or cancels it."""
    context: list[Message] = []
    model_time = tool_time = 0.0
    calls = errors = 0
    t_start = perf_counter()
    complete = False
    try:
        for turn in traj.turns:
            if ctx.stop.is_set():
                break
            if turn.truncate_to is not None:
                del context[turn.truncate_to :]
            context.extend(turn.append)
            body = build_chat_body(context, turn.output_tokens, ctx.options, ctx.fixed_fields, traj.tools_wire)
            rec = RequestRecord(
                id=uuid.uuid4().hex,
                session=slot,
                task=task,
                trajectory=traj.id,
                turn=turn.index,
                prompt_tokens_est=turn.prompt_tokens_est,
                reusable_prefix_tokens=turn.reusable_prefix_tokens,
                max_tokens=turn.output_tokens,
            )
            try:
                await ctx.client.call(body, rec)
            finally:
                calls += 1
                errors += rec.error is not None
                model_time += (rec.t_done or perf_counter()) - rec.t_sent
                ctx.on_request(rec)
            context.append(turn.output_message)
            if turn.index < len(traj.turns) - 1:
                tool_time += await _pause(ctx.stop, ctx.tool_time.pause(turn.tool_time_s))
        complete = calls == len(traj.turns)
    finally:
        record = TaskRecord(
            task=task,
            session=slot,
            trajectory=traj.id,
            t_start=t_start,
            t_end=perf_counter(),
            turns=calls,
            turns_total=len(traj.turns),
            model_time_s=model_time,
            tool_time_s=tool_time,
            complete=complete,
            errors=errors,
        )
        ctx.on_task(record)
    return record
