"""Sessions: one simulated agent replaying one trajectory, turn by turn.

Each turn's request is the context so far; after the call the recorded output is appended (so the next request's
prefix is exactly what the recorded agent sent, whatever the host answered), then the agent "runs its tools" for
the pause the tool-time policy gives. A failed call is retried by the retry policy, each attempt its own record;
after the last attempt the failure policy decides: ``continue`` (the recorded answer is appended, the turn counts
as failed, the task goes on), ``end-task`` or ``abort`` (the whole run stops). A context overflow always ends the
task: every later call would carry a longer context.

A task's wall time splits into model time (``t_sent`` to ``t_done`` of its attempts), client queue time
(``t_call`` to ``t_sent``), throttled time (backoff and ``--max-rpm`` waits) and tool time (pauses, and waiting
for subagents).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter

from replay.clients.client import HostClient
from replay.clients.flavour import Conversation
from replay.results.records import RequestRecord, TaskRecord
from replay.sessions.rate_limit import RateLimit
from replay.sessions.retry import RetryPolicy
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.trajectory import CountedContext, Message, MessageBuilder, Trajectory, Turn

ON_ERROR = ("continue", "end-task", "abort")
TERMINAL = {"context_overflow"}  # failures that end the task whatever the policy (later calls are longer)


@dataclass(slots=True)
class SessionContext:
    """What every session of a run shares: the client, the policies, and where records go."""

    client: HostClient
    tool_time: ToolTimePolicy
    stop: asyncio.Event
    on_request: Callable[[RequestRecord], None]
    on_task: Callable[[TaskRecord], None]
    trajectories: dict[str, Trajectory]  # by id, for the subagents a turn spawns
    builder: MessageBuilder | None = None  # renders live answers under the run's history policy
    salt: str | None = None  # this run's nonce: every task run becomes a distinct conversation (see _salted)
    rate_limit: RateLimit | None = None  # a provider's request-rate limit, shared by all sessions
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    on_error: str = "continue"  # after a turn's last attempt failed: continue | end-task | abort
    abort: Callable[[str], None] = lambda reason: None  # stops the whole run (on_error abort)
    rng: random.Random = field(default_factory=random.Random)  # backoff jitter
    on_pause: Callable[[int, float | None], None] = lambda slot, until: None  # a session's tool pause begins/ends
    on_turn: Callable[[int, int, float], None] = lambda slot, turns_left, tool_left: None  # for the time left
    on_call: Callable[[int], None] = lambda delta: None  # a call began (+1) or ended (-1): calls in flight


async def _pause(stop: asyncio.Event, seconds: float) -> float:
    """Sleep for at least ``seconds`` unless the run stops first; return the time actually paused.

    The event loop's timers may fire a fraction of a millisecond early by ``perf_counter``: a pause (a host's
    Retry-After, above all) is never cut short by that."""
    if seconds <= 0:
        return 0.0
    start = perf_counter()
    end = start + seconds
    while (left := end - perf_counter()) > 0 and not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=left)
    return perf_counter() - start


@dataclass(slots=True)
class _Tally:
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
        done = rec.t_done or perf_counter()
        if rec.t_call is not None:
            self.queue += max(0.0, rec.t_sent - rec.t_call)
            self.model_time += max(0.0, done - rec.t_sent)
        self.throttled += rec.wait_s + rec.throttle_s


def _salted(messages: list[Message], salt: str, builder: MessageBuilder) -> list[Message]:
    """The first user message prefixed with a per-run, per-task tag.

    Real agents never share a task, but a run with more sessions than trajectories replays some trajectories
    several times at once, and a host keeps its cache from one run to the next; without the tag the host would
    serve copies from each other's (or the last run's) cache and look faster than it is. The system prompt
    before it stays shared, as it is across real agents.
    """
    out = list(messages)
    for i, m in enumerate(out):
        if m.role == "user" and isinstance(raw := m.raw, dict) and isinstance(raw.get("content"), str):
            out[i] = builder.message({**raw, "content": salt + raw["content"]})
            break
    return out


@dataclass(slots=True)
class _Agent:
    """One agent's conversation: the context it has built and what it sends with every call."""

    ctx: SessionContext
    traj: Trajectory
    task: int
    slot: int
    tally: _Tally
    base: list[Message]
    parent: str | None
    context: CountedContext = field(init=False)
    conversation: Conversation | None = field(init=False)
    tools: list | None = field(init=False)

    def __post_init__(self) -> None:
        self.context = CountedContext(self.base)
        self.conversation = self.ctx.client.new_conversation()
        native = self.ctx.builder is None or self.ctx.builder.policy.tool_calls == "native"
        self.tools = self.traj.tools if native else None  # flattened to text, tool calls need no schemas

    def prepare(self, turn: Turn) -> int:
        """Bring the context to this turn's request; the reusable prefix (tokens) it starts with."""
        append = turn.append
        ctx = self.ctx
        if turn.index == 0 and not self.base and ctx.salt and ctx.builder is not None:
            append = _salted(append, f"[replay {ctx.salt} task {self.task}]\n", ctx.builder)
        if turn.truncate_to is not None:
            self.context.truncate(len(self.base) + turn.truncate_to)  # a forked subagent truncates only its own
        reusable = self.context.tokens  # the previous request plus its output (or the inherited base)
        self.context.extend(append)
        return reusable

    async def call(self, turn: Turn, reusable: int) -> tuple[RequestRecord | None, dict[str, str] | None]:
        """The turn's attempts, each recorded; the last record (None if the run stopped before any) and answer."""
        ctx, context = self.ctx, self.context
        live = ctx.builder is not None and ctx.builder.policy.output == "live"
        body = ctx.client.render(context.messages, turn.output_tokens, self.tools, self.conversation)
        wait = 0.0
        rec: RequestRecord | None = None
        for attempt in range(1, ctx.retry.retries + 2):
            throttled, started = 0.0, None
            if ctx.rate_limit is not None:
                asked = perf_counter()
                started = await ctx.rate_limit.wait(ctx.stop)  # the client's own wait: before t_call
                if started is None:  # the run stopped while waiting: the wait still counts as throttled time
                    self.tally.throttled += perf_counter() - asked
                    return rec, None
                throttled = started - asked
            rec = RequestRecord(
                id=uuid.uuid4().hex, session=self.slot, task=self.task, trajectory=self.traj.id, turn=turn.index,
                prompt_tokens_est=context.prompt_tokens, reusable_prefix_tokens=reusable,
                max_tokens=turn.output_tokens, parent=self.parent, attempt=attempt, wait_s=wait, throttle_s=throttled,
                t_call=started,  # the rate limit's slot is the call's start
            )  # fmt: skip
            answer = None
            retry = False
            ctx.on_call(1)
            try:
                answer = await ctx.client.call(body, rec, self.conversation, context.messages, collect=live)
                retry = rec.error is not None and attempt <= ctx.retry.retries and ctx.retry.should_retry(rec)
                rec.final = not retry
            finally:
                ctx.on_call(-1)
                self.tally.add_attempt(rec)
                ctx.on_request(rec)
            if not retry:
                return rec, answer
            wait = await _pause(ctx.stop, ctx.retry.wait(attempt, rec, ctx.rng))
            if ctx.stop.is_set():
                self.tally.throttled += wait
                return rec, None
        return rec, None

    def after_failure(self, rec: RequestRecord) -> bool:
        """Apply the failure policy to a turn whose last attempt failed; True when the agent must stop."""
        self.tally.failed_turns += 1
        ctx = self.ctx
        if ctx.on_error == "abort":
            self.tally.ended.append("abort")
            ctx.abort(f"turn {rec.turn} of task {rec.task} ({rec.trajectory}) failed: {rec.error}")
            return True
        if rec.error in TERMINAL or ctx.on_error == "end-task":
            self.tally.ended.append(rec.error if rec.error in TERMINAL else "end-task")  # type: ignore[arg-type]
            return True
        return False


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

    ``base`` is the inherited context of a forked subagent: it precedes the agent's own messages, is counted in its
    prompt and, being exactly the parent's last request plus output, in its reusable prefix.
    """
    agent = _Agent(ctx, traj, task, slot, tally, base or [], parent)
    tool_left = sum(ctx.tool_time.pause(t.tool_time_s) for t in traj.turns[:-1]) if parent is None else 0.0
    for turn in traj.turns:
        if ctx.stop.is_set() or tally.ended:
            return  # the run stopped, or another agent of the task ended it
        if parent is None:  # calls left, and pauses left from this call's on
            ctx.on_turn(slot, len(traj.turns) - turn.index, tool_left)
        reusable = agent.prepare(turn)
        rec, answer = await agent.call(turn, reusable)
        if rec is None:
            return  # stopped before the call went out
        tally.calls += 1
        if rec.error is not None and rec.final and agent.after_failure(rec):
            return
        if not rec.final:
            return  # stopped while waiting to retry
        out = turn.output_message
        if answer and rec.error is None and ctx.builder is not None:
            # The host's own words; recorded tool calls stay, since the recorded tool results answer them.
            out = ctx.builder.output({**answer, "tool_calls": turn.output_tool_calls})
        agent.context.extend((out,))
        last = turn.index == len(traj.turns) - 1
        pause = 0.0 if last else ctx.tool_time.pause(turn.tool_time_s)
        if pause and parent is None:
            ctx.on_pause(slot, perf_counter() + pause)
        if not turn.spawn:
            if pause:
                tally.tool_time += await _pause(ctx.stop, pause)
        else:
            await _spawn(agent, turn, pause)
        if pause and parent is None:
            ctx.on_pause(slot, None)
            tool_left -= pause


async def _spawn(agent: _Agent, turn: Turn, pause: float) -> None:
    """Run the turn's subagents beside its tool pause; the parent waits for both."""
    ctx, tally = agent.ctx, agent.tally
    subs = [_Tally(ended=tally.ended) for _ in turn.spawn]
    children = [
        _replay_agent(
            ctx,
            ctx.trajectories[ref.trajectory],
            agent.task,
            agent.slot,
            sub,
            list(agent.context.messages) if ref.fork else None,
            agent.traj.id,
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
        tally.failed_turns += sub.failed_turns


async def replay_task(ctx: SessionContext, task: int, slot: int, traj: Trajectory) -> TaskRecord:
    """Replay one trajectory (and its subagents); the task record is emitted even when the run stops or cancels it."""
    tally = _Tally()
    t_start = perf_counter()
    try:
        await _replay_agent(ctx, traj, task, slot, tally)
    finally:
        whole = tally.calls == len(traj.turns)
        status = "failed" if tally.failed_turns else ("complete" if whole else "partial")
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
            complete=status == "complete",
            errors=tally.errors,
            subagents=tally.sub_runs,
            subagent_calls=tally.sub_calls,
            subagent_model_time_s=tally.sub_model_time,
            status=status,
            failed_turns=tally.failed_turns,
            attempts=tally.attempts,
            throttled_time_s=tally.throttled,
            queue_time_s=tally.queue,
            ended_by=tally.ended[0] if tally.ended else None,
        )
        ctx.on_task(record)
    return record
