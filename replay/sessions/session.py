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
from typing import Any

import orjson

from replay import clock
from replay.clients.client import ModelClient
from replay.clients.flavours.base import Conversation
from replay.clients.loop_turns import loop_turns
from replay.records.run_file import RequestRecord, RunFileError, TaskRecord
from replay.sessions.lanes import WARMUP_MAX_TOKENS, LaneRuntime
from replay.sessions.rate_limit import RateLimit
from replay.sessions.retry import RetryPolicy
from replay.sessions.start_points import AgentStart
from replay.sessions.tally import Tally, drain_background, merge, run_background
from replay.sessions.tool_ids import Binding, bind, bound_messages
from replay.sessions.tool_time import ToolTimePolicy
from replay.sessions.tree import Tree
from replay.workload.spans import string_content_at
from replay.workload.trajectory import CountedContext, Message, MessageBuilder, Spawn, Trajectory, Turn

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


async def _pause(stop: asyncio.Event, seconds: float) -> float:
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
    out = list(messages)
    tag = orjson.dumps(salt)[1:-1]  # the tag as it reads inside a JSON string
    tag_tokens = len(builder.tokenizer.encode(salt))
    for i, m in enumerate(out):
        if m.role != role:
            continue
        at = string_content_at(m.wire)
        if at is not None:
            out[i] = Message(m.wire[:at] + tag + m.wire[at:], m.tokens + tag_tokens, role=role)
            break
    return out


@dataclass(slots=True)
class _Agent:
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
        intended = clock.now() if intended is None else intended
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
            self.tally.ended.append(rec.error if rec.error in TERMINAL else "end-task")
            return True
        return False


async def _tool_pause(ctx: SessionContext, tree: Tree, seconds: float) -> float:
    """A tool pause, under the idle caps when the run has them."""
    guard = ctx.lanes.idle if ctx.lanes is not None else None
    if guard is None:
        return await _pause(ctx.stop, seconds)
    return await guard.pause(tree.state, seconds, ctx.stop)


def _fast_forward(agent: _Agent, upto: int) -> None:
    """Build the context of the turns before ``upto`` without calling: what a warm start inherits."""
    for turn in agent.traj.turns[:upto]:
        agent.prepare(turn)
        agent.context.extend((turn.output_message,))


async def _replay_agent(
    ctx: SessionContext,
    traj: Trajectory,
    task: int,
    slot: int,
    tally: Tally,
    tree: Tree,
    base: list[Message] | None = None,
    parent: str | None = None,
    start: AgentStart | None = None,
    intended: float | None = None,
) -> None:
    """Replay one trajectory's calls; subagents it spawns run beside the tool pause and join before the next call
    (background ones hold only the lane). ``start``: a warm start (its primer first, then its running subagents).

    ``base`` is the inherited context of a forked subagent: it precedes the agent's own messages, is counted in its
    prompt and, being exactly the parent's last request plus output, in its reusable prefix.
    """
    agent = _Agent(ctx, traj, task, slot, tally, base or [], parent, tree)
    first = 0
    if start is not None:
        first = start.primer if start.primer is not None else start.resume
        _fast_forward(agent, first)
        if start.finished:
            await _spawn(agent, traj.turns[-1], 0.0, start.children)
            return
    warmup = ctx.lanes.warmup if ctx.lanes is not None else None
    policy = ctx.tool_time
    tool_left = sum(policy.expected(t.tool_time_s) for t in traj.turns[first:-1]) if parent is None else 0.0
    carried = 0.0  # a pause skipped by the warm-up, taken once the barrier has passed
    for turn in traj.turns[first:]:
        if ctx.stop.is_set() or tally.ended:
            return  # the run stopped, or another agent of the task ended it
        primer = start is not None and turn.index == start.primer
        phase = "measured"
        if warmup is not None:
            admitted = await warmup.admit(slot, primer, ctx.stop)
            if admitted is None:
                return
            phase = admitted
            if phase == "measured" and carried:
                tally.tool_time += await _tool_pause(ctx, tree, carried)
                if ctx.stop.is_set():
                    return
            carried = 0.0
        if parent is None:  # calls left, and pauses left from this call's on
            ctx.on_turn(slot, len(traj.turns) - turn.index, tool_left)
        reusable = agent.prepare(turn)
        try:
            rec, answer = await agent.call(turn, reusable, phase, intended if turn.index == first else None)
        finally:
            if phase == "warmup" and warmup is not None:
                warmup.returned(primer)
        if rec is None:
            return  # stopped before the call went out
        tally.calls += phase == "measured"
        if rec.error is not None and rec.final and agent.after_failure(rec):
            return
        if not rec.final:
            return  # stopped while waiting to retry
        out = turn.output_message
        if answer and rec.error is None and ctx.builder is not None:
            # The host's own words and calls; the recorded tool results that follow are bound to its calls' ids.
            binding = bind(turn.output_tool_calls, answer.get("tool_calls"))
            out = ctx.builder.output({**answer, "tool_calls": binding.calls})
            agent.tool_ids = binding
        agent.context.extend((out,))
        last = turn.index == len(traj.turns) - 1
        pause = 0.0 if last else policy.pause(turn.tool_time_s, ctx.rng)
        if ctx.lanes is not None and ctx.lanes.warming:
            carried, pause = pause, 0.0  # warm-up calls follow each other without pauses
        if pause and parent is None:
            ctx.on_pause(slot, clock.now() + pause)
        planned = start.children if primer and start is not None else None
        if not turn.spawn and not planned:
            if pause:
                tally.tool_time += await _tool_pause(ctx, tree, pause)
        else:
            await _spawn(agent, turn, pause, planned)
        if pause and parent is None:
            ctx.on_pause(slot, None)
            tool_left -= pause


async def _spawn(agent: _Agent, turn: Turn, pause: float, planned: list[tuple[Spawn, AgentStart]] | None) -> None:
    """Run the turn's subagents beside its tool pause; the parent waits for both, but not for background ones.

    ``planned``: a warm start's subagents running at t* (those of earlier turns can only be background ones)."""
    ctx, tally, tree = agent.ctx, agent.tally, agent.tree
    refs: list[tuple[Spawn, AgentStart | None]] = (
        list(planned) if planned is not None else [(r, None) for r in turn.spawn]
    )
    gated = []
    for ref, child_start in refs:
        child = ctx.trajectories[ref.trajectory]
        sub = Tally(ended=tally.ended)
        inherited = list(agent.context.messages) if ref.fork else None
        coro = _replay_agent(ctx, child, agent.task, agent.slot, sub, tree, inherited, agent.traj.id, child_start)
        own = ref in turn.spawn
        if ctx.lanes is not None and (not own or ctx.lanes.background(agent.traj, turn.index, child, tree.root)):
            tree.background.append(asyncio.create_task(run_background(coro, tally, sub)))
        else:
            gated.append((coro, sub))
    start = clock.now()
    await asyncio.gather(_tool_pause(ctx, tree, pause), *(c for c, _ in gated))
    tally.tool_time += clock.now() - start  # the parent waits for its tools and its subagents alike
    for _, sub in gated:
        merge(tally, sub)


async def replay_task(
    ctx: SessionContext, task: int, slot: int, traj: Trajectory, intended: float | None = None
) -> TaskRecord:
    """Replay one trajectory (and its subagents); the task record is emitted even when the run stops or cancels it.

    A session that raises (anything but a cancellation) is a failed session, never a lost one: its task is recorded
    as failed with the error named (``TaskRecord.error``; the verdict then says the run could not complete), and the
    run goes on or stops as ``--on-error`` says; a run file that cannot be written stops the run whatever it says.

    The first tree of a lane may start mid-trajectory (``--start-at``, the AgentX recipe); ``intended`` is an
    open-loop arrival time, from which the first call's latency counts."""
    tally = Tally()
    tree = Tree(traj)
    plan = ctx.lanes.start_plan(slot, traj) if ctx.lanes is not None else None
    t_start = clock.now()
    t_root_end = None
    error: str | None = None  # the session itself raised: a fault of replay or of its machine, not the host's
    stop_run = False
    try:
        await _replay_agent(ctx, traj, task, slot, tally, tree, start=plan.root if plan else None, intended=intended)
        t_root_end = clock.now()
        await drain_background(tree)
    except Exception as exc:  # a failed session: the task fails, named, and the run goes on as --on-error says
        error, stop_run = named_error(exc), isinstance(exc, RunFileError)
        tally.ended.append("error")
    finally:
        for bg in tree.background:
            bg.cancel()
        if tree.background:
            await asyncio.gather(*tree.background, return_exceptions=True)
        skipped = plan.root.resume if plan is not None else 0
        whole = tally.calls == len(traj.turns) - skipped
        status = "failed" if tally.failed_turns or error else ("complete" if whole else "partial")
        record = TaskRecord(
            task=task,
            session=slot,
            trajectory=traj.id,
            t_start=t_start,
            t_end=clock.now(),
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
            start_turn=skipped,
            t_root_end=t_root_end,
            t_intended=intended,
            error=error,
        )
        try:
            ctx.on_task(record)
        except Exception as exc:  # the task could not be recorded (the run file, the summary): the run stops
            error, stop_run = error or named_error(exc), True
    if error is not None and (stop_run or ctx.on_error == "abort"):
        ctx.abort(f"task {task} ({traj.id}) failed with an error: {error}")
    return record


def named_error(exc: BaseException) -> str:
    """An exception as one line for a record and the verdict: its type and message, bounded."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."
