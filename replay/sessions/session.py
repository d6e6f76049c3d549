"""Sessions: one simulated agent replaying one trajectory, turn by turn.

Each turn's request is the context so far; after the call the recorded output is appended (so the next request's
prefix is exactly what the recorded agent sent, whatever the host answered), then the agent "runs its tools" for
the pause the tool-time policy gives. A failed call is retried by the retry policy, each attempt its own record;
after the last attempt the failure policy decides: ``continue`` (the recorded answer is appended, the turn counts
as failed, the task goes on), ``end-task`` or ``abort`` (the whole run stops). A context overflow always ends the
task: every later call would carry a longer context.

The agent's conversation and calls (context, attempts, retries, the failure policy) are ``agent``'s; here are its
turns, tool pauses and subagents, and the task's record. A task's wall time splits into model time (``t_sent`` to
``t_done`` of its attempts), client queue time (``t_call`` to ``t_sent``), throttled time (backoff and
``--max-rpm`` waits) and tool time (pauses, and waiting for subagents).
"""

from __future__ import annotations

import asyncio

from replay import clock
from replay.records.run_file import RunFileError, TaskRecord
from replay.sessions.agent import Agent, SessionContext, stoppable_sleep
from replay.sessions.start_points import AgentStart
from replay.sessions.tally import Tally, drain_background, merge, run_background
from replay.sessions.tree import Tree
from replay.workload.trajectory import Message, Spawn, Trajectory, Turn


async def _tool_pause(ctx: SessionContext, tree: Tree, seconds: float) -> float:
    """A tool pause, under the idle caps when the run has them."""
    guard = ctx.lanes.idle if ctx.lanes is not None else None
    if guard is None:
        return await stoppable_sleep(ctx.stop, seconds)
    return await guard.pause(tree.state, seconds, ctx.stop)


def _fast_forward(agent: Agent, upto: int) -> None:
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
    agent = Agent(ctx, traj, task, slot, tally, base or [], parent, tree)
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
        agent.take_answer(turn, rec, answer)
        last = turn.index == len(traj.turns) - 1
        pause = 0.0 if last else policy.pause(turn.tool_time_s, ctx.rng)
        if ctx.lanes is not None and ctx.lanes.warming:
            carried, pause = pause, 0.0  # warm-up calls follow each other without pauses
        await _tools(agent, turn, pause, start.children if primer and start is not None else None)
        if parent is None:
            tool_left -= pause


async def _tools(agent: Agent, turn: Turn, pause: float, planned: list[tuple[Spawn, AgentStart]] | None) -> None:
    """The turn's tool pause, with the subagents it spawns (or a warm start's, ``planned``) beside it; a root
    agent's pause is announced (``on_pause``) for the time left."""
    ctx, root = agent.ctx, agent.parent is None
    if pause and root:
        ctx.on_pause(agent.slot, clock.now() + pause)
    if not turn.spawn and not planned:
        if pause:
            agent.tally.tool_time += await _tool_pause(ctx, agent.tree, pause)
    else:
        await _spawn(agent, turn, pause, planned)
    if pause and root:
        ctx.on_pause(agent.slot, None)


async def _spawn(agent: Agent, turn: Turn, pause: float, planned: list[tuple[Spawn, AgentStart]] | None) -> None:
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
    now = ctx.now
    t_start = now()
    t_root_end = None
    error: str | None = None  # the session itself raised: a fault of replay or of its machine, not the host's
    stop_run = False
    try:
        await _replay_agent(ctx, traj, task, slot, tally, tree, start=plan.root if plan else None, intended=intended)
        t_root_end = now()
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
            t_end=now(),
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
