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

from asyncio_throttle import Throttler

from replay.clients.client import HostClient
from replay.results.records import RequestRecord, TaskRecord
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.trajectory import CountedContext, Message, MessageBuilder, Trajectory


@dataclass(slots=True)
class SessionContext:
    """What every session of a run shares: the client, request options and where records go."""

    client: HostClient
    tool_time: ToolTimePolicy
    stop: asyncio.Event
    on_request: Callable[[RequestRecord], None]
    on_task: Callable[[TaskRecord], None]
    trajectories: dict[str, Trajectory]  # by id, for the subagents a turn spawns
    builder: MessageBuilder | None = None  # renders live answers under the run's history policy
    salt: str | None = None  # this run's nonce: every task run becomes a distinct conversation (see _salted)
    throttle: Throttler | None = None  # a provider's request-rate limit, shared by all sessions


async def _pause(stop: asyncio.Event, seconds: float) -> float:
    """Sleep for the tool pause unless the run stops first; return the time actually paused."""
    if seconds <= 0:
        return 0.0
    start = perf_counter()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    return perf_counter() - start


@dataclass(slots=True)
class _Tally:
    """What one agent (and, separately, its subagents) spent."""

    calls: int = 0
    errors: int = 0
    model_time: float = 0.0
    tool_time: float = 0.0
    sub_runs: int = 0
    sub_calls: int = 0
    sub_model_time: float = 0.0


def _salted(messages: list[Message], salt: str, builder: MessageBuilder) -> list[Message]:
    """The first user message prefixed with a per-run, per-task tag.

    Real agents never share a task, but a run with more sessions than trajectories replays some trajectories
    several times at once, and a host keeps its cache from one run to the next; without the tag the host would
    serve copies from each other's (or the last run's) cache and look faster than it is. The system prompt
    before it stays shared, as it is across real agents.
    """
    out = list(messages)
    for i, m in enumerate(out):
        if m.raw.get("role") == "user" and isinstance(m.raw.get("content"), str):
            out[i] = builder.message({**m.raw, "content": salt + m.raw["content"]})
            break
    return out


async def _replay_agent(
    ctx: SessionContext,
    traj: Trajectory,
    task: int,
    slot: int,
    tally: _Tally,
    base: list[Message] | None = None,
    parent: str | None = None,
) -> None:
    """Replay one trajectory's calls; subagents it spawns run beside the tool pause and join before the next call.

    ``base`` is the inherited context of a forked subagent: it precedes the agent's own messages, is counted
    in its prompt and, being exactly the parent's last request plus output, in its reusable prefix.
    """
    base = base or []
    context = CountedContext(base)
    live = ctx.builder is not None and ctx.builder.policy.output == "live"
    conversation = ctx.client.new_conversation()
    native = ctx.builder is None or ctx.builder.policy.tool_calls == "native"
    tools = traj.tools if native else None  # flattened to text, tool calls need no schemas
    for turn in traj.turns:
        if ctx.stop.is_set():
            return
        append = turn.append
        if turn.index == 0 and not base and ctx.salt and ctx.builder is not None:
            append = _salted(append, f"[replay {ctx.salt} task {task}]\n", ctx.builder)
        if turn.truncate_to is not None:
            context.truncate(len(base) + turn.truncate_to)  # a forked subagent truncates only its own messages
        reusable = context.tokens  # the previous request plus its output (or the inherited base)
        context.extend(append)
        body = ctx.client.render(context.messages, turn.output_tokens, tools, conversation)
        rec = RequestRecord(
            id=uuid.uuid4().hex,
            session=slot,
            task=task,
            trajectory=traj.id,
            turn=turn.index,
            prompt_tokens_est=context.prompt_tokens,
            reusable_prefix_tokens=reusable,
            max_tokens=turn.output_tokens,
            parent=parent,
        )
        answer: dict[str, str] | None = None
        if ctx.throttle is not None:
            await ctx.throttle.acquire()  # waiting here is the client's doing: before t_call, outside model time
        try:
            answer = await ctx.client.call(body, rec, conversation, context.messages, collect=live)
        finally:
            tally.calls += 1
            tally.errors += rec.error is not None
            tally.model_time += (rec.t_done or perf_counter()) - (rec.t_call or rec.t_sent)
            ctx.on_request(rec)
        out = turn.output_message
        if answer and rec.error is None and ctx.builder is not None:
            # The host's own words; recorded tool calls stay, since the recorded tool results answer them.
            out = ctx.builder.output({**answer, "tool_calls": turn.output.get("tool_calls")})
        context.extend((out,))
        last = turn.index == len(traj.turns) - 1
        pause = 0.0 if last else ctx.tool_time.pause(turn.tool_time_s)
        if not turn.spawn:
            if pause:
                tally.tool_time += await _pause(ctx.stop, pause)
            continue
        subs = [_Tally() for _ in turn.spawn]
        children = [
            _replay_agent(
                ctx,
                ctx.trajectories[ref.trajectory],
                task,
                slot,
                sub,
                list(context.messages) if ref.fork else None,
                traj.id,
            )
            for ref, sub in zip(turn.spawn, subs, strict=True)
        ]
        start = perf_counter()
        await asyncio.gather(_pause(ctx.stop, pause), *children)
        tally.tool_time += perf_counter() - start  # the parent waits for its tools and its subagents alike
        for sub in subs:
            tally.sub_runs += 1 + sub.sub_runs
            tally.sub_calls += sub.calls + sub.sub_calls
            tally.sub_model_time += sub.model_time + sub.sub_model_time
            tally.errors += sub.errors


async def replay_task(ctx: SessionContext, task: int, slot: int, traj: Trajectory) -> TaskRecord:
    """Replay one trajectory (and its subagents); the task record is emitted even when the run stops or cancels it."""
    tally = _Tally()
    t_start = perf_counter()
    try:
        await _replay_agent(ctx, traj, task, slot, tally)
    finally:
        record = TaskRecord(
            task=task,
            session=slot,
            trajectory=traj.id,
            t_start=t_start,
            t_end=perf_counter(),
            turns=tally.calls,
            turns_total=len(traj.turns),
            model_time_s=tally.model_time,
            tool_time_s=tally.tool_time,
            complete=tally.calls == len(traj.turns),
            errors=tally.errors,
            subagents=tally.sub_runs,
            subagent_calls=tally.sub_calls,
            subagent_model_time_s=tally.sub_model_time,
        )
        ctx.on_task(record)
    return record
