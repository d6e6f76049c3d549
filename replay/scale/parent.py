"""The parent of a sharded run (``workers``): the workers it starts (local processes over socket pairs, or a
launcher's: Ray actors over TCP), the job it sends each, their messages (record lines written at once, parts merged,
the first calls that open the window, the live state), the task counter of the run's one seeded order, the stop
passed on to every worker, and the run's footer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from time import perf_counter
from typing import Any

import replay
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.errors import ReplayError
from replay.loops.live import LiveState
from replay.loops.load import LoadConfig, RunPlan, run_nonce
from replay.loops.stop import RunStop
from replay.records.run_file import RunWriter
from replay.scale import collect
from replay.scale.channel import Channel, as_socket, open_channel
from replay.scale.collect import Uncovered
from replay.scale.footer import nodes, worker_row
from replay.scale.marks import RunMarks
from replay.scale.worker_proc import WorkerJob
from replay.workload.trajectory import Workload

START_TIMEOUT_S = 120.0  # a worker imports, unpickles the workload and warms its connections within this
CLOSE_S = 2.0  # the links' sockets closed by the loop (it takes one turn)
EXIT_MARGIN_S = 15.0  # past the drain's grace: how long a worker's footer may take before it is killed


class WorkerError(ReplayError, RuntimeError):
    """A worker failed (its traceback, or how it exited): the run stops; ``footer`` is the run's as far as it got.
    ``started`` is False where nothing was sent yet (a bad option, too few CPUs, no cluster): exit 1, not 3."""

    def __init__(self, message: str, footer: dict[str, Any] | None = None, started: bool = True) -> None:
        super().__init__(message)
        self.footer = footer
        self.started = started


@dataclass(frozen=True, slots=True)
class ShardedRun:
    """A closed-loop run to shard: what the loop takes, and how many processes."""

    workload: Workload
    host: HostConfig
    options: RequestOptions
    load: LoadConfig
    workers: int
    launcher: Launcher | None = None  # None: local processes over socket pairs; else e.g. Ray actors over TCP
    survive_loss: bool = False  # a worker lost (its node gone) is reported and the others go on (--ray), not a crash


@dataclass(slots=True)
class Launched:
    """A worker a launcher started: something with ``poll``, ``wait(timeout)`` and ``kill`` (a Popen, an actor),
    its connection, the offset that brings its clock to this one's, and what the footer says of it."""

    proc: Any
    conn: Connection
    offset: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


Launcher = Callable[[int, dict[str, str]], list[Launched]]  # (workers, environment to hand them) -> started


def shard_lanes(slots: int, workers: int) -> list[tuple[int, ...]]:
    """Lane k to worker k mod N; never more workers than lanes."""
    n = max(min(workers, slots), 1)
    return [tuple(range(k, slots, n)) for k in range(n)]


@dataclass(slots=True)
class Worker:
    index: int
    proc: Any  # subprocess.Popen, or a launcher's (poll, wait, kill)
    conn: Connection
    lanes: tuple[int, ...]
    offset: float = 0.0  # added to the worker's stamps: its clock to this one's (replay.scale.clock_sync)
    info: dict[str, Any] = field(default_factory=dict)
    ready: bool = False
    channel: Channel | None = None  # the link once the job is sent (replay.scale.channel)
    uncovered: Uncovered = field(default_factory=Uncovered)  # its lines no part has summarised yet
    live: dict[str, Any] = field(default_factory=dict)  # its live state as it last said
    in_flight: int = 0  # its calls in flight, as its last batch said
    requests: int = 0  # its request records written
    lost_in_flight: int | None = None  # lost before its end: its calls in flight then
    gone: bool = False
    footer: dict[str, Any] | None = None


class Parent:
    """The workers, their messages, the task counter and the stop."""

    def __init__(self, plan: ShardedRun, writer: RunWriter, live: LiveState) -> None:
        load = plan.load
        self.plan, self.writer, self.live = plan, writer, live
        run = RunPlan.of(load, len(plan.workload.tasks))  # the single-process loop's plan (no lanes: refused here)
        self.task_limit, self.slots, self.whole = run.task_limit, run.sessions, run.whole
        self.marks = RunMarks(writer, self.slots, run.auto_window, self.broadcast)
        self.asked = RunStop(load.drain_timeout_s)
        self.salt = run_nonce(load)
        self.started = 0
        self.workers: list[Worker] = []
        self.changed = asyncio.Event()  # a worker became ready, sent its footer or went
        self.error: str | None = None

    # ------------------------------------------------------------------------------------------ processes
    async def start(self) -> None:
        """Start the workers, send each its job (in threads: a workload is megabytes), listen to them."""
        shards, launch = shard_lanes(self.slots, self.plan.workers), self.plan.launcher
        if launch is None:
            self.workers += [_spawn(index, lanes) for index, lanes in enumerate(shards)]
        else:  # remote workers get the key from here, over their authenticated connection
            key, name = self.plan.host.api_key(), self.plan.host.api_key_env
            started = await asyncio.to_thread(launch, len(shards), {name: key} if key else {})
            self.workers += [Worker(i, s.proc, s.conn, lanes, s.offset, s.info)
                             for i, (s, lanes) in enumerate(zip(started, shards, strict=True))]  # fmt: skip
        sinks, header = collect.plan(self.writer.sink), self.writer.header_data
        jobs = [WorkerJob(w.index, w.lanes, self.salt, self.plan.workload, self.plan.host, self.plan.options,
                          self.plan.load, sinks, header, w.offset) for w in self.workers]  # fmt: skip
        sent = await asyncio.gather(*(asyncio.to_thread(w.conn.send, job) for w, job in zip(self.workers, jobs,
                                      strict=True)), return_exceptions=True)  # fmt: skip
        for w, result in zip(self.workers, sent, strict=True):
            if isinstance(result, Exception):
                w.gone = True
                self.error = self.error or f"worker {w.index} exited (code {w.proc.poll()}) before it read its job"
                continue
            w.channel = await open_channel(as_socket(w.conn), functools.partial(self._frame, w),
                                           functools.partial(self._lost, w))  # fmt: skip

    async def close(self) -> None:
        """No worker outlives this: closed links tell them to cut and go; those that do not are killed. The links'
        sockets are closed (the loop runs their close) before the wait: a worker that has sent its footer waits for
        this end to close before it exits (replay.scale.channel.Channel.close)."""
        for w in self.workers:
            if w.channel is not None:
                w.channel.abort()
            else:
                w.conn.close()
        closing = [w.channel.closed for w in self.workers if w.channel is not None]
        if closing:
            await asyncio.wait(closing, timeout=CLOSE_S)
        end = perf_counter() + EXIT_MARGIN_S
        for w in self.workers:
            try:
                w.proc.wait(timeout=max(end - perf_counter(), 0.1))
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()

    def broadcast(self, message: tuple[Any, ...]) -> None:
        for w in self.workers:
            if not w.gone and w.channel is not None:
                w.channel.send([message])

    # ------------------------------------------------------------------------------------------- messages
    def _frame(self, w: Worker, messages: list[tuple[Any, ...]]) -> None:
        """A worker's batch: its record lines written at once, the rest handled in order, the parent's clock back.
        The parent is the run file's only writer: when the file or the summary fails here, the run stops, named."""
        try:
            self._take_frame(w, messages)
        except Exception as exc:
            if self.error is None:
                self.error = f"{type(exc).__name__}: {exc}"
                self.asked.ask("worker failed", 0.0)
            self.changed.set()
            return
        if w.channel is not None:
            w.channel.send([("clock", perf_counter())])

    def _take_frame(self, w: Worker, messages: list[tuple[Any, ...]]) -> None:
        lines: list[bytes] = []
        requests = 0
        for message in messages:
            if message[0] == "line":
                lines.append(message[2])
                requests += message[1]
                w.requests += message[1]
                w.uncovered.add(message[1], message[2])
            else:
                if lines:  # what came before it is on disk first (a part covers written lines only)
                    self.writer.lines(lines, requests, len(lines) - requests)
                    lines, requests = [], 0
                self._message(w, message)
        if lines:
            self.writer.lines(lines, requests, len(lines) - requests)

    def _lost(self, w: Worker) -> None:
        """A worker's link closed: after its footer, the end of its run; before it, the worker failed. Its records
        that reached the file but no part are summarised here, from their lines."""
        w.gone = True
        w.uncovered.summarise(self.writer.sink)
        if w.footer is None and self.plan.survive_loss and not all(x.gone for x in self.workers):
            w.lost_in_flight = w.in_flight  # the others go on; its lanes wait for nobody's window
            for lane in w.lanes:
                self.marks.first(lane)
        elif w.footer is None and self.error is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.proc.wait(timeout=2.0)  # its socket closed as it died: its exit status follows at once
            code = w.proc.poll()
            self.error = f"worker {w.index} exited (code {code}) before the end of its run"
            self.asked.ask("worker failed", 0.0)
        self.changed.set()

    def _message(self, w: Worker, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "in_flight":
            w.in_flight = message[1]
        elif kind == "first":
            self.marks.first(message[1])
        elif kind == "part":
            if message[2] is not None and self.writer.sink is not None:
                self.writer.sink.merge_part(message[2])
            w.uncovered.cover(message[1])
        elif kind == "client":
            self.writer.client(message[1])
        elif kind == "live":
            self._live(w, message[1])
        elif kind == "take":
            if w.channel is not None:
                w.channel.send([("task", self._take())])
        elif kind == "stop" and message[1] != "tasks":  # its own stop (--on-error abort): every worker's
            self.asked.ask(message[1])
        elif kind in ("ready", "footer", "error"):
            w.ready = True
            if kind == "footer":
                w.footer = message[1]
            elif kind == "error" and self.error is None:
                self.error = message[1]
                self.asked.ask("worker failed", 0.0)
            self.changed.set()

    def _live(self, w: Worker, state: dict[str, Any]) -> None:
        collect.merge_live(self.live, w.live, state, set(w.lanes))
        w.live = state

    def _take(self) -> int | None:
        """The next task of the run's seeded order, as the single-process loop takes them."""
        if self.marks.stopping:
            return None
        if self.task_limit is not None and self.started >= self.task_limit:
            self.asked.reason = self.asked.reason or "tasks"
            if not self.whole:
                self.marks.close_window()  # the other lanes finish the trajectories they hold (the drain)
            return None
        self.started += 1
        self.live.tasks_started = self.started
        return self.started - 1

    # ------------------------------------------------------------------------------------------- the run
    def done(self) -> bool:
        return all(w.footer is not None or w.gone for w in self.workers)

    def all_ready(self) -> bool:
        """Every worker is ready, or there is no point waiting for them (an error, a stop asked)."""
        return bool(self.error) or self.asked_to_stop() or all(w.ready for w in self.workers)

    async def until(self, condition: Callable[[], bool], timeout: float | None) -> bool:
        """Wait for ``condition``, re-checked whenever a worker's state changes or a stop is asked (False: the
        timeout came first)."""
        end = None if timeout is None else perf_counter() + timeout
        while not condition():
            left = None if end is None else end - perf_counter()
            if left is not None and left <= 0:
                return False
            self.changed.clear()
            self.asked.requested.clear()  # a stop asked is kept in asked.reason; this is only the wake-up
            waits = [asyncio.create_task(self.changed.wait()), asyncio.create_task(self.asked.requested.wait())]
            await asyncio.wait(waits, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            for task in waits:
                task.cancel()
        return True

    def asked_to_stop(self) -> bool:
        """A stop that ends every worker's run (running out of tasks is not one: the lanes finish theirs)."""
        return self.error is not None or (self.asked.reason is not None and self.asked.reason != "tasks")

    def stop(self) -> None:
        """Pass the stop to every worker (no new work; their calls in flight get the grace)."""
        if not self.marks.stopping:
            self.asked.ask("duration")
            self.marks.close_window()
            self.marks.stopping = True
            signal, grace = self.asked.signal, 0.0 if self.error else self.asked.grace  # a failed worker: cut
            self.broadcast(("signal", signal) if signal else ("stop", self.asked.reason, grace))

    def cut(self) -> None:
        self.asked.on_second_signal()
        self.broadcast(("cut",))

    def footer(self) -> dict[str, Any]:
        footers = [w.footer for w in self.workers if w.footer is not None]
        reason = self.asked.reason or "completed"
        cancelled = sum(int(m.group(1)) for f in footers
                        if (m := re.search(r"drain_timeout\((\d+) sessions", str(f.get("stop_reason")))))  # fmt: skip
        if cancelled:
            reason += f"+drain_timeout({cancelled} sessions cancelled)"
        out: dict[str, Any] = {"stop_reason": reason, "tasks_started": self.started, "sessions": self.slots,
                               "salt": self.salt}  # fmt: skip
        if self.asked.signal:
            out["signal"] = self.asked.signal
        if self.whole:
            out["window"] = "whole"
        if ramp := self.plan.load.ramp_up(self.slots):
            out["ramp_up_s"] = ramp
        out["workers"] = [worker_row(w) for w in self.workers]
        if self.plan.launcher is not None:
            out["nodes"] = nodes(self.workers)
        return out


def _spawn(index: int, lanes: tuple[int, ...]) -> Worker:
    """``python -m replay.scale.worker_proc FD`` in a session of its own (a terminal's Ctrl-C reaches the parent),
    importing this very replay (its directory first on the path), whatever the caller's sys.path was."""
    mine, theirs = socket.socketpair()
    here = str(Path(replay.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    with theirs:
        cmd = [sys.executable, "-m", "replay.scale.worker_proc", str(theirs.fileno())]
        proc = subprocess.Popen(cmd, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, start_new_session=True,
                                env=env)  # fmt: skip
    return Worker(index, proc, Connection(mine.detach()), lanes)
