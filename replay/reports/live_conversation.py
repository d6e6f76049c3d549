"""The conversations a ``--history live`` run had, rebuilt from its run file for ``replay export-trajectories RUN``.

A live run sends the host's own answers back, so what it replayed is not the recorded trajectories: every call's
input is the recording's messages around the host's earlier answers, the recorded tool results bound to the host's
tool calls (``replay.sessions.tool_ids``). The run keeps each answer on its record (``answer_text``,
``answer_calls``), and the trajectories it loaded are named in its header (paths and fingerprint, checked), so each
task's conversation is rebuilt here call by call as the agent built it (``replay.sessions.agent``): a compaction,
the turn's messages (bound to the last live answer's calls), the host's answer (or the recorded one where the call
failed). Left out: the run's per-task tags (``[replay NONCE task N]``; the nonce is not kept), and calls no record
holds (a task the stop cut short ends at its last call). Each call's figures are the host's: ``prompt_tokens``,
``cached_tokens``, ``output_tokens``, ``reasoning_tokens``, ``cache_creation_tokens``, ``latency_s`` (``t_done -
t_sent``), ``timestamp`` (when it was sent), and the pause after it (the next call's start minus its end).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from replay.errors import ReplayError
from replay.records.reader import read_run
from replay.records.run_file import RequestRecord
from replay.sessions.tool_ids import Binding, bind, bound_messages
from replay.workload.history import HistoryPolicy
from replay.workload.importers._delta import Call, Imported, build_trajectory
from replay.workload.importers._messages import make_output
from replay.workload.trajectory import Message, MessageBuilder, Trajectory, load_workload


class LiveExportError(ReplayError, ValueError):
    """A run whose conversation cannot be written: not a live run, its answers not kept, its workload not found."""


def _figures(rec: RequestRecord, clock: dict[str, float]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": rec.prompt_tokens,
        "cached_tokens": rec.cached_tokens,
        "output_tokens": rec.output_tokens,
        "reasoning_tokens": rec.reasoning_tokens,
        "cache_creation_tokens": rec.cache_write_tokens,
        "latency_s": round(rec.t_done - rec.t_sent, 6) if rec.t_done is not None else None,
        "timestamp": round(clock["unix"] + rec.t_sent - clock["perf_counter"], 3),
        "error": rec.error,
    }
    return {k: v for k, v in out.items() if v is not None}


class _Rebuild:
    """The run's conversations, one per task run of a trajectory (a subagent: per spawn)."""

    def __init__(self, path: Path, builder: MessageBuilder, by_id: dict[str, Trajectory], header: dict[str, Any]):
        self.path, self.builder, self.by_id, self.clock = path, builder, by_id, header["clock"]
        self.runs: dict[tuple[int, str], list[list[RequestRecord]]] = defaultdict(list)
        self.used: dict[tuple[int, str], int] = defaultdict(int)
        self.out: list[Imported] = []

    def add(self, rec: RequestRecord) -> None:
        runs = self.runs[rec.task, rec.trajectory]
        if not runs or (rec.turn == 0 and any(r.turn == 0 for r in runs[-1])):  # a subagent spawned again
            runs.append([])
        runs[-1].append(rec)

    def conversation(self, task: int, traj: Trajectory, subagent: bool = False) -> str | None:
        """The next conversation of ``traj`` in ``task`` as a trajectory; its id (None: no call was recorded)."""
        key = (task, traj.id)
        n = self.used[key]
        if n >= len(self.runs.get(key, ())):
            return None
        self.used[key] += 1
        records = sorted(self.runs[key][n], key=lambda r: r.turn)
        conv_id = f"task{task}/{traj.id}" + (f"~{n + 1}" if n else "")
        if records[0].turn != 0 or [r.turn for r in records] != list(range(len(records))):
            turns = [r.turn for r in records]
            raise LiveExportError(f"{self.path}: {conv_id}: turns {turns} recorded; a warm start (--start-at) or "
                                  "a lost record leaves no whole conversation to write")  # fmt: skip
        calls = self._calls(task, traj, records)
        source = {"run": str(self.path), "task": task, "trajectory": traj.id, "history": "live",
                  "left_out": "the run's per-task tags"}  # fmt: skip
        self.out.append(build_trajectory(conv_id, calls, source=source, model=traj.model, tools=traj.tools,
                                         subagent=subagent))  # fmt: skip
        return conv_id

    def _calls(self, task: int, traj: Trajectory, records: list[RequestRecord]) -> list[Call]:
        context: list[Message] = []
        binding: Binding | None = None
        calls: list[Call] = []
        for turn, rec in zip(traj.turns, records, strict=False):
            if turn.truncate_to is not None:
                del context[turn.truncate_to :]
            append = list(turn.append)
            if binding is not None:
                append, binding = bound_messages(append, binding, self.builder), None
            context.extend(append)
            output = turn.output
            if rec.error is None and (rec.answer_text is not None or rec.answer_calls):
                binding = bind(turn.output_tool_calls, rec.answer_calls)
                output = make_output(rec.answer_text or "", binding.calls)
                context.append(self.builder.output({**output, "tool_calls": binding.calls}))
            else:
                context.append(turn.output_message)
            call = Call([orjson.loads(m.wire) for m in context[:-1]], output, rec.output_tokens or turn.output_tokens,
                        recorded=_figures(rec, self.clock))  # fmt: skip
            for ref in turn.spawn:
                if ref.fork:
                    raise LiveExportError(f"{self.path}: {traj.id} turn {turn.index} forks subagent {ref.trajectory}:"
                                          " a forked subagent's conversation is not written")  # fmt: skip
                child = self.conversation(task, self.by_id[ref.trajectory], subagent=True)
                if child is not None:
                    call.spawn.append(child)
            calls.append(call)
        for call, now, nxt in zip(calls, records, records[1:], strict=False):
            start = nxt.t_call if nxt.t_call is not None else nxt.t_sent
            call.tool_time_s = max(0.0, start - (now.t_done if now.t_done is not None else now.t_sent))
        return calls


def live_conversations(path: Path) -> list[Imported]:
    """Every task's conversation in a ``--history live`` run file, its subagents' after it."""
    data = read_run(path, notes=lambda note: None)
    request, workload = data.header.get("request") or {}, data.header.get("workload") or {}
    history = HistoryPolicy(**request.get("history") or {})
    if history.output != "live":
        raise LiveExportError(f"{path}: a --history recorded run replays the recorded trajectories: export those "
                              f"({', '.join(workload.get('paths') or ())})")  # fmt: skip
    if not request.get("keep_answers"):
        raise LiveExportError(f"{path}: the run did not keep its answers (a replay older than export-trajectories)")
    loaded = load_workload(workload.get("paths") or (), policy=history,
                           unrecorded_context=workload.get("unrecorded_context", "omit"))  # fmt: skip
    if loaded.fingerprint != workload.get("fingerprint"):
        raise LiveExportError(f"{path}: the run replayed {workload.get('fingerprint')}; its paths now hold "
                              f"{loaded.fingerprint}: not the trajectories it replayed")  # fmt: skip
    assert loaded.builder is not None
    rebuild = _Rebuild(path, loaded.builder, loaded.by_id(), data.header)
    for rec in data.requests:
        if rec.final and rec.phase == "measured":
            rebuild.add(rec)
    roots = sorted({(r.task, r.trajectory) for r in data.requests if r.parent is None and r.phase == "measured"})
    for task, traj_id in roots:
        while rebuild.conversation(task, loaded.by_id()[traj_id]) is not None:
            pass
    return rebuild.out
