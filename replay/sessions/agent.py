"""The agent: what every agent of a run shares (``SessionContext``) and one agent's conversation (``Agent``): the
context it has built (salted with the run's tags on its first turn, live answers' tool calls bound to the recorded
results), and its calls, each attempt recorded, retried and throttled as the policies say, then the failure
policy applied to a turn whose last attempt failed. The turns, pauses and subagents around the calls are
``session``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from replay import clock
from replay.clients.client import ModelClient
from replay.clients.flavours.base import Conversation
from replay.clients.loop_turns import loop_turns
from replay.records.run_file import RequestRecord, TaskRecord
from replay.sessions.lanes import WARMUP_MAX_TOKENS, LaneRuntime
from replay.sessions.rate_limit import RateLimit
from replay.sessions.retry import RetryPolicy
from replay.sessions.tally import Tally
from replay.sessions.tool_ids import Binding, bind, bound_messages
from replay.sessions.tool_time import ToolTimePolicy
from replay.sessions.tree import Tree
from replay.workload.spans import string_content_at
from replay.workload.trajectory import CountedContext, Message, MessageBuilder, Trajectory, Turn

ON_ERROR = ("continue", "end-task", "abort")
TERMINAL = {"context_overflow"}  # failures that end the task whatever the policy (later calls are longer)


@dataclass(slots=True)
class SessionContext:
    """What every session of a run shares: the client, the policies, and where records go."""

    client: ModelClient  # HostClient over HTTP, or the virtual clock's host
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
    lanes: LaneRuntime | None = None  # start points, warm-up, idle caps, background subagents (sessions/lanes.py)
    now: Callable[[], float] = field(default_factory=clock.source)  # the run's clock, bound where the run builds this


async def stoppable_sleep(stop: asyncio.Event, seconds: float) -> float:
    """Sleep for at least ``seconds`` unless the run stops first; return the time actually paused.

    The event loop's timers may fire a fraction of a millisecond early by ``perf_counter``: a pause (a host's
    Retry-After, above all) is never cut short by that."""
    if seconds <= 0:
        return 0.0
    start = clock.now()
    end = start + seconds
    while (left := end - clock.now()) > 0 and not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=left)
    return clock.now() - start


def _salted(messages: list[Message], salt: str, builder: MessageBuilder, role: str = "user") -> list[Message]:
    """The first message of ``role`` (with string content) prefixed with a tag: the run's and task's for the first
    user message, the run's alone for the first system message.

    Real agents never share a task, but a run with more sessions than trajectories replays some trajectories
    several times at once, and a host keeps its cache from one run to the next; without the tags the host would
    serve copies from each other's (or the last run's) cache and look faster than it is. The system prompt carries
    the run's tag only, so within a run it stays shared, as it is across real agents, but never with an earlier
    run's (a warm server served 82 % of each task's first call from the previous run when it was left untagged).

    The tag is spliced into the message's wire bytes and its own tokens are added to the message's count: a first
    message of 800 KB is neither decoded nor re-counted (that took seconds on the event loop).
    """
    for i, m in enumerate(messages):
        if m.role != role:
            continue
        at = string_content_at(m.wire)
        if at is not None:  # the tag is counted only where it is spliced (a task without a system message: never)
            tag = orjson.dumps(salt)[1:-1]  # the tag as it reads inside a JSON string
            out = list(messages)
            out[i] = Message(m.wire[:at] + tag + m.wire[at:], m.tokens + len(builder.tokenizer.encode(salt)), role=role)
            return out
    return messages


@dataclass(slots=True)
class Agent:
    """One agent's conversation: the context it has built and what it sends with every call."""

    ctx: SessionContext
    traj: Trajectory
    task: int
    slot: int
    tally: Tally
    base: list[Message]
    parent: str | None
    tree: Tree
    context: CountedContext = field(init=False)
    conversation: Conversation | None = field(init=False)
    tools: list | None = field(init=False)
    tool_ids: Binding | None = field(init=False, default=None)  # live history: the last live answer's calls

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
            append = _salted(append, f"[replay {ctx.salt}]\n", ctx.builder, role="system")
        if turn.truncate_to is not None:
            self.context.truncate(len(self.base) + turn.truncate_to)  # a forked subagent truncates only its own
        reusable = self.context.tokens  # the previous request plus its output (or the inherited base)
        if self.tool_ids is not None and ctx.builder is not None:  # live history: results meet the live calls
            append = bound_messages(list(append), self.tool_ids, ctx.builder)
            self.tool_ids = None
        self.context.extend(append)
        return reusable

    async def call(
        self, turn: Turn, reusable: int, phase: str = "measured", intended: float | None = None
    ) -> tuple[RequestRecord | None, dict[str, Any] | None]:
        """The turn's attempts, each recorded; the last record (None if the run stopped before any) and answer.

        ``phase`` ``warmup`` asks for one token; ``intended`` is when the call was meant to start (an open-loop
        arrival), else now: latency from the intended start counts the client's own lateness too."""
        ctx, context = self.ctx, self.context
        intended = ctx.now() if intended is None else intended
        live = ctx.builder is not None and ctx.builder.policy.output == "live"
        max_tokens = WARMUP_MAX_TOKENS if phase == "warmup" else turn.output_tokens
        seen = self.tree.prefix_seen(context) if ctx.lanes is not None else None
        await loop_turns().turn()  # building and sending a call can wait for the loop's next poll
        if ctx.stop.is_set():  # the run stopped while this call waited for its turn: it is not sent
            return None, None
        body = ctx.client.render(context.messages, max_tokens, self.tools, self.conversation)
        wait = 0.0
        rec: RequestRecord | None = None
        for attempt in range(1, ctx.retry.retries + 2):
            throttled, started = 0.0, None
            if ctx.rate_limit is not None:
                asked = clock.now()
                started = await ctx.rate_limit.wait(ctx.stop)  # the client's own wait: before t_call
                if started is None:  # the run stopped while waiting: the wait still counts as throttled time
                    self.tally.throttled += clock.now() - asked
                    return rec, None
                throttled = started - asked
            rec = RequestRecord(
                id=uuid.uuid4().hex, session=self.slot, task=self.task, trajectory=self.traj.id, turn=turn.index,
                prompt_tokens_est=context.prompt_tokens, reusable_prefix_tokens=reusable,
                max_tokens=max_tokens, parent=self.parent, attempt=attempt, wait_s=wait, throttle_s=throttled,
                t_call=started,  # the rate limit's slot is the call's start
                phase=phase, t_intended=intended, prefix_seen_tokens=seen,
            )  # fmt: skip
            answer = None
            retry = False
            ctx.on_call(1)
            guard = ctx.lanes.idle if ctx.lanes is not None else None
            if guard is not None:
                guard.started(self.tree.state)
            try:
                answer = await ctx.client.call(body, rec, self.conversation, context.messages, live, self.tools)
                await loop_turns().turn()  # so can recording it
                retry = rec.error is not None and attempt <= ctx.retry.retries and ctx.retry.should_retry(rec)
                rec.final = not retry
            finally:
                ctx.on_call(-1)
                if guard is not None:
                    guard.ended(self.tree.state)
                self.tally.add_attempt(rec)
                ctx.on_request(rec)
            if not retry:
                return rec, answer
            wait = await stoppable_sleep(ctx.stop, ctx.retry.wait(attempt, rec, ctx.rng))
            if ctx.stop.is_set():
                self.tally.throttled += wait
                return rec, None
        return rec, None

    def take_answer(self, turn: Turn, rec: RequestRecord, answer: dict[str, Any] | None) -> None:
        """Append the turn's output to the context: the recorded one, or with live history the host's own words and
        calls (the recorded tool results that follow are bound to its calls' ids)."""
        out = turn.output_message
        if answer and rec.error is None and self.ctx.builder is not None:
            binding = bind(turn.output_tool_calls, answer.get("tool_calls"))
            out = self.ctx.builder.output({**answer, "tool_calls": binding.calls})
            self.tool_ids = binding
        self.context.extend((out,))

    def after_failure(self, rec: RequestRecord) -> bool:
        """Apply the failure policy to a turn whose last attempt failed; True when the agent must stop."""
        self.tally.failed_turns += 1
        ctx = self.ctx
        if ctx.on_error == "abort":
            self.tally.ended.append("abort")
            ctx.abort(f"turn {rec.turn} of task {rec.task} ({rec.trajectory}) failed: {rec.error}")
            return True
        if rec.error in TERMINAL or ctx.on_error == "end-task":
            self.tally.ended.append(rec.error if rec.error in TERMINAL else "end-task")
            return True
        return False
