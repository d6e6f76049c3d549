"""The engine on a virtual clock: a closed-loop replay of a workload in seconds of CPU, not of wall time.

It drives ``EngineCore`` the way ``replay run`` drives the real-time sim (N sessions, each replaying
trajectories turn by turn, tool pauses between calls, the next trajectory from the same seeded shuffle),
but jumps from event to event instead of sleeping. It has no HTTP, no client and no loop lag, so it shows
the engine's own curve: ``scripts/sweep.py --virtual`` previews a sweep with it, and the tests check the
overloaded profile's knee with it. Figures follow ``docs/metrics.md`` (throughput attributes input
tokens to the first token and output tokens to when they were sampled, over the steady window).
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replay.sim.core.engine import FINISHED, EngineCore, Seq
from replay.sim.core.profiles import SimProfile
from replay.sim.core.prompt import REPLY_PRIMING, message_token_ids
from replay.workload.tokens import get_tokenizer
from replay.workload.trajectory import Trajectory, Workload


class _Prompts:
    """Prompt ids of each turn, tokenising each distinct message once (same rules as the server)."""

    def __init__(self) -> None:
        self._tok = get_tokenizer()
        self._cache: dict[bytes, np.ndarray] = {}

    def ids(self, context: list[Any]) -> np.ndarray:
        parts = []
        for m in context:
            ids = self._cache.get(m.wire)
            if ids is None:
                ids = self._cache[m.wire] = message_token_ids(m.raw, self._tok)
            parts.append(ids)
        return np.concatenate([*parts, REPLY_PRIMING])


@dataclass(slots=True)
class _Session:
    slot: int
    task: int = -1
    traj: Trajectory | None = None
    turn: int = 0
    context: list[Any] = field(default_factory=list)
    seq: Seq | None = None
    t_sent: float = 0.0


def _order(trajectories: list[Trajectory], seed: int):
    rng = random.Random(seed)  # the runner's task order
    while True:
        batch = list(trajectories)
        rng.shuffle(batch)
        yield from batch


def simulate(
    profile: SimProfile,
    workload: Workload,
    concurrency: int,
    duration_s: float,
    warmup_s: float,
    seed: int = 0,
    tool_scale: float = 1.0,
    unique_tasks: bool = False,
) -> dict[str, Any]:
    """Replay ``workload`` at ``concurrency`` for ``duration_s`` virtual seconds; the steady-window
    figures from ``warmup_s`` to the end.

    ``unique_tasks``: salt each task's prompts (its first token id) so no two tasks share a cached
    prefix, as a fleet of agents on different repositories would not; by default two sessions replaying
    the same trajectory share their prefixes, as they do against the real-time sim.
    """
    core = EngineCore(profile, seed)
    prompts = _Prompts()
    order = _order(workload.trajectories, seed)
    events: list[tuple[float, int, int]] = []  # (time, tiebreak, session) when a session sends its next call
    tiebreak = 0
    sessions = [_Session(i) for i in range(concurrency)]
    for s in sessions:
        heapq.heappush(events, (0.0, tiebreak, s.slot))
        tiebreak += 1
    by_seq: dict[int, _Session] = {}
    t = 0.0
    step = None
    t_step_end = float("inf")
    w0, w1 = warmup_s, duration_s
    out_tokens = in_cached = in_new = 0
    ttft: list[float] = []
    decode: list[float] = []
    e2e: list[float] = []
    calls = 0

    tasks = 0

    def send(s: _Session, now: float) -> None:
        nonlocal calls, tasks
        if s.traj is None or s.turn >= len(s.traj.turns):
            s.traj, s.turn, s.context, s.task = next(order), 0, [], tasks
            tasks += 1
        turn = s.traj.turns[s.turn]
        if turn.truncate_to is not None:
            del s.context[turn.truncate_to :]
        s.context.extend(turn.append)
        ids = prompts.ids(s.context)
        if unique_tasks:
            ids = ids.copy()
            ids[0] = (1 << 30) + s.task
        target, reason = core.plan_output(turn.output_tokens, True, turn.output_tokens)
        seq = core.new_seq(f"{s.slot}-{calls}", ids, target, reason)
        calls += 1
        s.seq, s.t_sent = seq, now
        by_seq[id(seq)] = s
        core.add(seq, now)

    def finished(seq: Seq, now: float) -> None:
        nonlocal in_cached, in_new, tiebreak
        s = by_seq.pop(id(seq))
        assert seq.t_first_token is not None and s.traj is not None
        if w0 <= s.t_sent < w1:
            e2e.append(now - s.t_sent)
            if seq.target > 1 and now > seq.t_first_token:
                decode.append((seq.target - 1) / (now - seq.t_first_token))
        turn = s.traj.turns[s.turn]
        s.context.append(turn.output_message)
        s.turn += 1
        pause = turn.tool_time_s * tool_scale if s.turn < len(s.traj.turns) else 0.0
        heapq.heappush(events, (now + pause, tiebreak, s.slot))
        tiebreak += 1

    while True:
        t_event = events[0][0] if events else float("inf")
        if step is None:  # the engine waits for work: jump to the next call
            if t_event >= w1:
                break
            t, _, slot = heapq.heappop(events)
            send(sessions[slot], t)
        elif t_event < t_step_end:  # a call arrives while a step runs; it waits for the next step
            t, _, slot = heapq.heappop(events)
            send(sessions[slot], t)
            continue
        else:
            t = t_step_end
            before = core.generation_tokens_total
            core.complete(step, t)
            if w0 <= t < w1:
                out_tokens += core.generation_tokens_total - before
            for seq, _ in step.items:
                if seq.t_first_token == t and seq.num_output == 1:  # its first token: input counts now
                    if w0 <= t < w1:
                        in_cached += seq.cached_tokens or 0
                        in_new += seq.prompt_len - (seq.cached_tokens or 0)
                    t_sent = by_seq[id(seq)].t_sent
                    if w0 <= t_sent < w1:
                        ttft.append(t - t_sent)
                if seq.state == FINISHED and id(seq) in by_seq:
                    finished(seq, t)
            if t >= w1:
                break
        step = core.schedule(t)
        t_step_end = t + step.duration if step is not None else float("inf")

    window = w1 - w0

    def pct(values: list[float], q: float) -> float | None:
        return float(np.percentile(values, q)) if values else None

    return {
        "concurrency": concurrency,
        "window_s": window,
        "requests": len(e2e),
        "throughput": {
            "total_tps": (in_cached + in_new + out_tokens) / window,
            "output_tps": out_tokens / window,
            "cached_input_tps": in_cached / window,
            "new_input_tps": in_new / window,
        },
        "ttft_s": {"p50": pct(ttft, 50), "p95": pct(ttft, 95)},
        "e2e_s": {"p50": pct(e2e, 50)},
        "user_decode_tps": {"p25": pct(decode, 25), "p50": pct(decode, 50)},
        "cache": {"host_hit_ratio": in_cached / (in_cached + in_new) if in_cached + in_new else None},
        "engine": {
            "preemptions": core.preemptions,
            "evicted_blocks": core.pool.evicted_blocks,
            "busy_share": core.busy_s / max(t, 1e-9),
        },
    }
