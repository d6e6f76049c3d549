"""One worker process of a sharded run (``--workers N``): the closed loop over its share of the lanes, with its own
event loop and connection pool, its records sent to the parent in batches (``replay.scale.channel``), which alone
writes the run file.

A worker is ``python -m replay.scale.worker_proc FD`` (FD: its end of a socket pair with the parent), in a session of
its own, so a Ctrl-C in the terminal reaches only the parent, which tells every worker to stop (the same grace as a
single process). When the parent dies in any way (kill -9 included) the socket closes; the worker cuts its calls at
once and exits, so nothing is left running. Plain subprocesses, not multiprocessing: no resource-tracker process.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import socket
import sys
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from time import perf_counter
from typing import Any

from replay import event_loop
from replay.clients.client import make_client
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.clients.limits import LimitError, ensure_open_files
from replay.clients.transport import Transport
from replay.loops.closed_loop import ShardLoop
from replay.loops.live import LiveState
from replay.loops.load import LoadConfig
from replay.loops.skeleton import run_loop
from replay.loops.stop import RunStop
from replay.records.run_file import RequestRecord, TaskRecord
from replay.scale.channel import Channel, Outbox, as_socket, open_channel
from replay.scale.collect import LIVE_COUNTS, PART_S, Plan, WorkerCollector
from replay.workload.trajectory import Workload

LIVE_S = 1.0  # how often a worker tells the parent's live view what its lanes are doing
CLOSE_TIMEOUT_S = 30.0  # the footer's way out: a parent that reads nothing for this long is taken as gone


@dataclass(frozen=True, slots=True)
class WorkerJob:
    """What a worker needs, the first message it reads (pickled: no key in it; the worker reads its own)."""

    index: int
    lanes: tuple[int, ...]
    salt: str | None
    workload: Workload
    host: HostConfig
    options: RequestOptions
    load: LoadConfig
    sinks: Plan = field(default_factory=list)  # the parent's sinks, mirrored here (replay.scale.collect)
    header: dict[str, Any] = field(default_factory=dict)  # the run's header (its rate card prices each call)
    clock_offset_s: float = 0.0  # added to every stamp sent: this worker's clock to the parent's


class PipeWriter:
    """The RunWriter face a worker's closed loop writes to: records go to the parent as lines in batches and are
    summarised here (``replay.scale.collect``). Phase marks stay with the parent, which makes them from every
    worker's records: a lane's first call back is all it needs to hear of them."""

    def __init__(self, outbox: Outbox, job: WorkerJob) -> None:
        self.outbox, self.index, self.offset = outbox, job.index, job.clock_offset_s
        self.collector = WorkerCollector(self.send, job.sinks, job.header, job.clock_offset_s)
        self.requests = self.tasks = 0
        self.first_back: set[int] = set()

    def send(self, message: tuple[Any, ...], urgent: bool = False) -> None:
        self.outbox.put(message, urgent)  # the parent gone is seen by the channel (PipeShard.parent_gone)

    def request(self, rec: RequestRecord) -> None:
        self.requests += 1
        self.collector.request(rec)
        if rec.session not in self.first_back:
            self.first_back.add(rec.session)
            self.send(("first", rec.session))

    def task(self, rec: TaskRecord) -> None:
        self.tasks += 1
        self.collector.task(rec)

    def phase(self, name: str, t: float) -> None:
        """The parent decides the run's phases."""

    def client(self, sample: dict[str, Any]) -> None:
        self.send(("client", {**sample, "t": sample["t"] + self.offset, "worker": self.index}))


class PipeShard:
    """The closed loop's ``Shard``: the run's task indices, its start and its stop, from the parent over the link."""

    def __init__(self, job: WorkerJob, writer: PipeWriter) -> None:
        self.index, self.lanes, self.salt = job.index, job.lanes, job.salt
        self.writer = writer
        self.messages: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self.go = asyncio.Event()
        self.lost = False  # the parent is gone: no more tasks
        self.asked: collections.deque[asyncio.Future[int | None]] = collections.deque()  # answered in order
        self.answered = asyncio.Event()  # the parent answered a batch (its clock came)
        self.recent_told = -math.inf
        self.live: LiveState | None = None  # the closed loop's, once it listens

    def on_frame(self, messages: list[tuple[Any, ...]]) -> None:
        collector = self.writer.collector
        for message in messages:
            kind = message[0]
            if kind == "clock":
                collector.parent_clock(message[1])
                self.answered.set()
            elif kind == "task":
                self._answer(message[1])
            elif kind == "phase":
                collector.phase(message[1], message[2])
            elif kind == "go":
                self.go.set()
            else:
                self.messages.put_nowait(message)

    def _answer(self, index: int | None) -> None:
        if self.asked:
            future = self.asked.popleft()
            if not future.done():
                future.set_result(index)

    def parent_gone(self) -> None:
        """The parent died (its end of the link closed): cut everything and go."""
        if self.lost:
            return
        self.lost = True
        self.go.set()
        self.answered.set()
        while self.asked:
            self._answer(None)
        self.messages.put_nowait(("stop", "parent gone", 0.0))
        self.messages.put_nowait(("cut",))

    async def ready(self) -> None:
        self.writer.send(("ready",), urgent=True)
        await self.go.wait()

    async def take(self) -> int | None:
        if self.lost:
            return None
        future: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self.asked.append(future)
        self.writer.send(("take",), urgent=True)
        return await future

    def stopped(self, reason: str) -> None:
        self.writer.send(("stop", reason), urgent=True)

    async def listen(self, stop: RunStop, live: LiveState) -> None:
        self.live = live
        shown = asyncio.create_task(self._show(live))
        try:
            await self._obey(stop)
        finally:
            shown.cancel()

    async def _show(self, live: LiveState) -> None:
        """What the parent's live view shows, every LIVE_S; and, every PART_S, the sinks' part."""
        shipped = 0.0
        while True:
            await asyncio.sleep(LIVE_S)
            self._tell(live)
            if perf_counter() - shipped >= PART_S:
                shipped = perf_counter()
                self.writer.collector.ship()

    def _tell(self, live: LiveState) -> None:
        """Calls in flight, pauses, turns left (lanes are the run's numbers, so the workers' states add up), the
        counters of the records so far and the calls that ended since it last told (in the parent's clock)."""
        offset = self.writer.offset
        recent = [(t + offset, *rest) for t, *rest in live.recent if t > self.recent_told]
        self.recent_told = live.recent[-1][0] if live.recent else self.recent_told
        state = {name: getattr(live, name) for name in LIVE_COUNTS}
        state |= {name: {k: t + offset for k, t in getattr(live, name).items()} for name in ("pauses", "paused_at")}
        state |= {"left": live.left, "errors_by_class": live.errors_by_class, "recent": recent}
        state["input_tokens"] = live.input_tokens
        self.writer.send(("live", state))

    async def finish(self, live: LiveState) -> None:
        """The run is over here: once the parent has answered everything sent (so every mark that can place a
        record is known), the rest of the records are summarised and the last part goes, with the last live state."""
        collector = self.writer.collector
        if not self.lost:
            self.answered.clear()
            self.writer.send(("sync",), urgent=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.answered.wait(), CLOSE_TIMEOUT_S)  # (set too when the parent goes)
        collector.parent_clock(collector.clock, final=True)
        collector.ship()
        self._tell(live)

    async def _obey(self, stop: RunStop) -> None:
        while True:
            message = await self.messages.get()
            if message[0] == "stop":
                stop.ask(message[1], message[2])
            elif message[0] == "signal":  # the parent's: the same reason and grace as a signal to one process
                stop.on_signal(message[1])
            elif message[0] == "cut":
                stop.on_second_signal()


def main(fd: int) -> None:
    """The worker process: read the job, run the shard, send its footer (or what went wrong), exit."""
    serve(Connection(fd))


def serve(conn: Connection) -> None:
    """A worker on its connection to the parent (a socket pair's end, or TCP: ``replay.scale.remote_worker``): the
    job is read here, before the event loop; the rest goes over the same socket as a ``Channel``."""
    try:
        job: WorkerJob = conn.recv()
    except (EOFError, OSError):
        return  # the parent went before it sent the job
    sock = as_socket(conn)
    event_loop.run(_work(job, sock))


async def _work(job: WorkerJob, sock: socket.socket) -> None:
    """Run the shard; its footer (or what went wrong) is the last message, sent before the link closes."""
    shard: PipeShard | None = None
    channel: Channel = await open_channel(
        sock, lambda frame: shard.on_frame(frame) if shard else None, lambda: shard.parent_gone() if shard else None
    )
    outbox = Outbox(channel, tail=lambda: ("in_flight", shard.live.in_flight if shard and shard.live else 0))
    writer = PipeWriter(outbox, job)
    shard = PipeShard(job, writer)
    try:
        ensure_open_files(len(job.lanes), "its process")  # a remote node's limit is its own
        factory = lambda transport: make_client(job.host, job.options, transport)  # noqa: E731
        footer = await run_loop(job.workload, factory, Transport(job.host), job.load, ShardLoop(shard), writer,
                                progress=False)  # fmt: skip
        await shard.finish(shard.live or LiveState())
        message: tuple[Any, ...] = ("footer", {**footer, "worker": job.index, "requests": writer.requests,
                                               "tasks": writer.tasks})  # fmt: skip
    except LimitError as exc:
        message = ("error", f"worker {job.index} on {socket.gethostname()}: {exc}")
    except (Exception, asyncio.CancelledError):
        message = ("error", f"worker {job.index}: {traceback.format_exc(limit=8)}")
    outbox.put(message)
    outbox.flush()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(channel.close(), CLOSE_TIMEOUT_S)
    channel.abort()


if __name__ == "__main__":
    main(int(sys.argv[1]))
