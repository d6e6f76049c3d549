"""Records and the run file: the contract between measuring and reporting.

A run file is JSON Lines: one ``header``, then ``request`` records (one per model call, written the
moment the call finishes), ``task`` records (one per finished trajectory), ``phase`` marks (when the
steady window opened and closed), periodic ``client`` self-measurements, and a ``footer``. Every line
is flushed as it is written, so a crash or Ctrl-C leaves every finished request on disk, and
``replay report`` can rebuild every figure from the file alone.

All ``t_*`` times are ``time.perf_counter()`` seconds (CLOCK_MONOTONIC on Linux, shared by every
process on the machine), or a virtual clock's seconds (header ``clock.name`` ``virtual``); the header's ``clock``
anchor maps them to wall-clock time.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import orjson

from replay import clock
from replay.errors import ReplayError
from replay.records.mark_log import MarkLog
from replay.records.scrub import Scrubber

try:
    import fcntl
except ImportError:  # Windows: run files are not locked there
    fcntl = None  # type: ignore[assignment]

RUN_FORMAT = "replay.run/1"


@dataclass(slots=True)
class RequestRecord:
    """One model call, as the client saw it and as the host reported it."""

    id: str  # the X-Request-Id header sent with the call
    session: int  # concurrency slot that ran it
    task: int  # sequence number of the trajectory run (task) it belongs to
    trajectory: str
    turn: int
    t_sent: float = 0.0  # the request's bytes handed to the socket: every latency of the call counts from here
    t_headers: float | None = None
    t_first_token: float | None = None  # first token of any kind (reasoning or answer)
    t_first_answer: float | None = None  # first answer (non-reasoning) token
    t_last_token: float | None = None
    t_done: float | None = None
    status: int | None = None  # HTTP status
    error: str | None = None  # error class; None when the call succeeded
    error_detail: str | None = None
    prompt_tokens: int | None = None  # as the host reported them (None: not reported); all input, cached included
    cached_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_write_tokens: int | None = None  # input written to the host's cache (Anthropic, some OpenAI-style hosts)
    usage_raw: str | None = None  # the host's usage as text, kept when its counts were rejected (bad_usage)
    prompt_tokens_est: int = 0  # client-side count (replay's tokenizer)
    reusable_prefix_tokens: int = 0  # client-side reusable prefix (replay's tokenizer)
    max_tokens: int = 0
    output_events: int = 0  # token-bearing stream events seen
    # Token-bearing reads, flat [dt, n, dt, n, ...]: dt seconds after t_sent, n events in that read.
    chunks: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    server_timings: dict[str, Any] | None = None
    parent: str | None = None  # for a subagent's call: the trajectory that spawned it
    t_call: float | None = None  # the client began the call; t_sent - t_call is its own wait (and connecting)
    retries: int = 0  # resent once on a fresh connection when a kept-alive one turned out closed
    served: dict[str, Any] | None = None  # what the host says served it: model, tier, provider, fingerprint, id
    attempt: int = 1  # 1 for a turn's first try, 2 for its first retry, ...
    wait_s: float = 0.0  # backoff waited before this attempt (throttled time)
    throttle_s: float = 0.0  # --max-rpm wait before this attempt (throttled time)
    final: bool = True  # no further attempt followed: for a failed call, the turn failed
    headers: dict[str, str] | None = None  # response headers worth keeping (rate limits, retry advice, timings)
    connect_s: float | None = None  # time to open a new connection for this call (None: a kept-alive one was reused)
    reconnect: str | None = None  # WebSocket: the call opened a socket in place of one the host closed (why)
    phase: str = "measured"  # warmup: a primer or warm-up call (max_tokens 1), left out of every figure
    t_intended: float | None = None  # when the call was meant to start (open loop: the session's arrival)
    prefix_seen_tokens: int | None = None  # leading tokens an earlier call of the same session tree sent
    length_asked: int = 0  # output tokens asked for (max_tokens)
    length_served: int | None = None  # output tokens the host says it produced (None: it did not say)
    # The answer judged after the stream closed (replay.clients.answer_check): length, tool_calls, degenerate, empty
    answer_check: dict[str, Any] | None = None
    answer_text: str | None = None  # the answer itself, kept only to compare hosts (replay run --host A --host B)
    notes: list[str] | None = None  # what the client left out of what the host sent (an implausible timing), and why
    inflight: int | None = None  # this client's calls in flight when it was sent, itself included (per process)
    # Speculative decoding as the host reported it for this call (clients/provider_fields.py): ``accepted`` and
    # ``drafted`` tokens, ``drafts`` (verify steps), each only when said; None when the host said nothing of it.
    # Whole numbers within host_numbers' bounds when written; read back through them again (metrics/host)
    speculation: dict[str, Any] | None = None
    user_decode_tps: float | None = None  # tokens/s after the first, as the summary counts them (None: read at once)
    client_pause_ms: float | None = None  # ms of t_sent..last token the client was paused over 5 ms (loops/gc_watch)
    # The answer's tool calls, OpenAI-shaped, kept with answer_text: a --history live run's conversation (export)
    answer_calls: list[dict[str, Any]] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(slots=True)
class TaskRecord:
    """One trajectory replayed from start to end (or cut short by the stop)."""

    task: int
    session: int
    trajectory: str
    t_start: float
    t_end: float
    turns: int  # model calls made
    turns_total: int  # turns in the trajectory
    model_time_s: float  # sum of t_done - t_sent over the task's own attempts
    tool_time_s: float  # sum of the pauses actually taken (and of waiting for subagents)
    complete: bool  # every turn replayed and every call (after its retries) succeeded
    errors: int = 0  # failed attempts, subagents' included
    subagents: int = 0  # subagent runs in the task's tree
    subagent_calls: int = 0
    subagent_model_time_s: float = 0.0  # sum of E2E of the subagents' calls (they overlap the parent's pauses)
    status: str = "complete"  # complete | failed (a turn failed after its last attempt) | partial (cut by the stop)
    failed_turns: int = 0  # turns whose last attempt failed, subagents' included
    attempts: int = 0  # calls made, retries included
    throttled_time_s: float = 0.0  # backoff and --max-rpm waits of the task's own calls
    queue_time_s: float = 0.0  # sum of t_sent - t_call: the client's own wait before bytes left
    ended_by: str | None = None  # why a failed task stopped early (end-task, context_overflow, abort)
    start_turn: int = 0  # a warm start (--start-at, the AgentX recipe): the first measured turn
    t_root_end: float | None = None  # the root agent's last call ended (background subagents may run on)
    t_intended: float | None = None  # open loop: when the session arrived
    error: str | None = None  # the session itself failed (replay's fault or its machine's, not the host's): why


@dataclass(slots=True)
class RunData:
    """Everything a run file holds, parsed."""

    header: dict[str, Any]
    requests: list[RequestRecord]
    tasks: list[TaskRecord]
    phases: dict[str, float]
    client: list[dict[str, Any]]
    footer: dict[str, Any] | None
    skipped_lines: int = 0
    marks: list[dict[str, Any]] | MarkLog = field(default_factory=list)  # window and segment records, in file order
    # A resumed run: the phase marks of each segment after the first (``phases`` holds the first segment's).
    later_phases: list[dict[str, float]] = field(default_factory=list)


SYNC_EVERY = 256  # records between two fsyncs of the run file


def encode_record(kind: bytes, rec: Any) -> bytes:
    """A record dataclass as its run-file line (no newline): orjson serialises its fields in order, ``type`` first;
    70x cheaper than ``dataclasses.asdict``, which deep-copies every list (2 ms for a 500-token answer's reads)."""
    return b'{"type":"' + kind + b'",' + orjson.dumps(rec)[1:]


def _fsync(fd: int) -> None:
    with contextlib.suppress(OSError):  # closed meanwhile: close() synced it
        os.fsync(fd)


def clock_anchor() -> dict[str, float]:
    """Pairs the run's clock (``perf_counter``, or a virtual clock's time) with wall time so records can be placed
    on a calendar."""
    return {"perf_counter": clock.now(), "unix": time.time()}


class RecordSink(Protocol):
    """Where a loop's records go as they happen: the run file's ``RunWriter``, or a worker's pipe to its parent."""

    def request(self, rec: RequestRecord) -> None: ...

    def task(self, rec: TaskRecord) -> None: ...

    def phase(self, name: str, t: float) -> None: ...

    def client(self, sample: dict[str, Any]) -> None: ...


class RunFileError(ReplayError):
    """The run file cannot be opened or written (a full disk, a read-only directory, another process writing it): a
    run cannot go on without it, and says so in one line."""


class RunWriter:
    """Appends records to the run file, one flushed line each, and hands each to a ``sink`` as it goes.

    Nothing is kept of the requests: the sink (``replay.metrics.streaming.StreamSummary`` for a run) summarises
    them as they come, in the order the file holds them, exactly as ``replay report`` will read the file back.

    The file is locked while it is written (``flock``): a second writer, a second ``--resume`` of the same run
    included, is refused before it writes a byte. A write that fails raises ``RunFileError`` naming the file and the
    reason, and every later write raises it at once (the footer is still tried: space may have been freed).
    """

    def __init__(self, path: str | Path, scrub: Scrubber | None = None, sink: Any = None, append: bool = False) -> None:
        self.path = Path(path)
        self._scrub = scrub if scrub else None  # secrets never written, whatever path they took
        self._file: IO[bytes] = open_locked(self.path)
        self.failed: str | None = None  # why the file could not be written, once it could not
        try:
            if not append:
                self._file.truncate(0)
            elif self.path.stat().st_size:
                with open(self.path, "rb") as f:
                    f.seek(-1, os.SEEK_END)
                    last = f.read(1)
                if last != b"\n":  # a line torn by a kill stays torn, apart: the next line starts clean
                    self._file.write(b"\n")
        except OSError as exc:
            self._file.close()
            raise RunFileError(f"{self.path}: {exc.strerror or exc}") from None
        self._since_sync = 0
        self._expected = os.fstat(self._file.fileno()).st_size if not self._file.closed else 0  # bytes it must hold
        self._syncing: threading.Thread | None = None
        self.sink = sink
        self.header_data: dict[str, Any] = {}
        self.footer_data: dict[str, Any] | None = None
        self.requests = self.tasks = 0

    def _write(self, kind: str, payload: dict[str, Any]) -> None:
        self._line(orjson.dumps({"type": kind, **payload}))

    def _aside(self, kind: str, payload: dict[str, Any]) -> bool:
        """A line the run's own machinery writes (phase marks, client samples, windows): a failure is kept in
        ``failed`` (the next record, and the verdict, name it) rather than raised into the loop's bookkeeping.
        False when it was not written."""
        try:
            self._write(kind, payload)
        except RunFileError:
            return False
        return True

    def _record(self, kind: bytes, rec: Any) -> None:
        self._line(encode_record(kind, rec))

    def _line(self, line: bytes, always: bool = False) -> None:
        if self.failed is not None and not always:
            raise RunFileError(self.failed)
        if self._scrub is not None:
            line = self._scrub.line(line)
        self._write_bytes(line + b"\n", 1)

    def lines(self, lines: list[bytes], requests: int, tasks: int) -> None:
        """Record lines encoded elsewhere (``encode_record``: a sharded run's workers encode their own), ``requests``
        and ``tasks`` of them: scrubbed, written and flushed at once. The sink is not fed: the workers summarise
        their records and the parent merges their parts (``replay.scale.collect``)."""
        if self.failed is not None:
            raise RunFileError(self.failed)
        data = b"\n".join(lines) + b"\n"
        if self._scrub is not None:
            data = self._scrub.line(data)
        self._write_bytes(data, len(lines))
        self.requests += requests
        self.tasks += tasks

    def _write_bytes(self, data: bytes, lines: int) -> None:
        try:
            self._file.write(data)
            self._expected += len(data)
            self._file.flush()
            self._since_sync += lines
            if self._since_sync >= SYNC_EVERY:  # bound what a power cut could take; flush() already covers crashes
                self._sync_soon()
        except (OSError, ValueError) as exc:  # ValueError: the file was closed under the writer
            self.failed = self.failed or f"the run file could not be written: {self.path}: {_why(exc)}"
            raise RunFileError(self.failed) from None

    def _sync_soon(self) -> None:
        """fsync in a thread: it takes 20 to 170 ms on this project's VM, which the event loop that writes the
        records (every stream's stamps, or a sharded run's collector) must not wait for. One at a time; ``close``
        and ``mark`` still sync before they return."""
        self._since_sync = 0
        if self._syncing is None or not self._syncing.is_alive():
            self._syncing = threading.Thread(target=_fsync, args=(self._file.fileno(),), daemon=True)
            self._syncing.start()

    def scrub_text(self, text: str) -> str:
        """``text`` without this run's secrets (a worker's error, before it is shown)."""
        return self._scrub.text(text) if self._scrub is not None else text

    def sync(self) -> None:
        if self._syncing is not None:
            self._syncing.join()
        self._since_sync = 0
        os.fsync(self._file.fileno())  # (an OSError here is the caller's: ``_line`` names it)

    def header(self, header: dict[str, Any]) -> None:
        header = self._scrub.value(header) if self._scrub is not None else header  # kept as the file has it
        self.header_data = {"format": RUN_FORMAT, **header}
        self._write("header", self.header_data)
        if self.sink is not None and hasattr(self.sink, "header"):
            self.sink.header(self.header_data)

    def request(self, rec: RequestRecord) -> None:
        self._record(b"request", rec)
        self.requests += 1
        if self.sink is not None:
            self.sink.request(rec)

    def task(self, rec: TaskRecord) -> None:
        self._record(b"task", rec)
        self.tasks += 1
        if self.sink is not None:
            self.sink.task(rec)

    def phase(self, name: str, t: float) -> None:
        self._aside("phase", {"name": name, "t": t})
        if self.sink is not None:
            self.sink.phase(name, t)

    def client(self, sample: dict[str, Any]) -> None:
        self._aside("client", sample)
        if self.sink is not None:
            self.sink.sample(sample)

    def resumed(self, header: dict[str, Any]) -> None:
        """Go on writing a run whose file already holds ``header`` (``replay run --resume``)."""
        self.header_data = header
        if self.sink is not None and hasattr(self.sink, "header"):
            self.sink.header(header)

    def mark(self, kind: str, payload: dict[str, Any]) -> None:
        """A window or segment record, written and synced at once (a soak's night must survive a power cut), and
        handed to the sink as ``replay report`` will read it back (a segment begins one)."""
        if not self._aside(kind, payload):
            return
        try:
            self.sync()
        except OSError as exc:
            self.failed = self.failed or f"the run file could not be written: {self.path}: {_why(exc)}"
        if self.sink is not None and kind == "segment" and hasattr(self.sink, "segment"):
            self.sink.segment(payload)
        if self.sink is not None and hasattr(self.sink, "mark"):
            self.sink.mark({"type": kind, **payload})

    def footer(self, footer: dict[str, Any]) -> None:
        """The last line; kept here even when it cannot be written (the verdict is judged from it)."""
        if self.failed is not None:
            footer = {**footer, "run_file_error": self.failed}
        self.footer_data = footer
        self._line(orjson.dumps({"type": "footer", **footer}), always=True)

    def intact(self) -> str | None:
        """Why the file at ``path`` is not the one written (deleted, replaced or truncated under the run), or None."""
        if self._file.closed:
            return None
        try:
            on_disk, mine = os.stat(self.path), os.fstat(self._file.fileno())
        except FileNotFoundError:
            return f"the run file {self.path} was deleted during the run: its records are lost"
        except OSError as exc:
            return f"the run file {self.path} cannot be checked: {_why(exc)}"
        if (on_disk.st_ino, on_disk.st_dev) != (mine.st_ino, mine.st_dev):
            return f"the run file {self.path} was replaced during the run: its records are lost"
        if mine.st_size < self._expected:
            kept = f"{mine.st_size:,} of {self._expected:,} bytes"
            return f"the run file {self.path} was truncated during the run ({kept})"
        return None

    def close(self) -> None:
        if not self._file.closed:
            try:
                self._file.flush()
                self.sync()
            except (OSError, ValueError) as exc:
                self.failed = self.failed or f"the run file could not be written: {self.path}: {_why(exc)}"
            finally:
                try:
                    self._file.close()  # (and its lock with it; the descriptor is closed even when a flush fails)
                except (OSError, ValueError) as exc:
                    self.failed = self.failed or f"the run file could not be written: {self.path}: {_why(exc)}"


def _why(exc: Exception) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def open_locked(path: Path) -> IO[bytes]:
    """``path`` opened to append (nothing truncated yet) and locked for this process alone; RunFileError naming
    what stops it: not a regular file, a directory that cannot be made or written, another writer."""
    if path.exists() and not path.is_file():
        raise RunFileError(f"{path} is not a regular file: a run file must be one")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "ab")  # noqa: SIM115 - closed by RunWriter.close
    except OSError as exc:
        where = exc.filename if isinstance(exc.filename, str) else path
        raise RunFileError(f"{path}: cannot be written ({where}: {exc.strerror or exc})") from None
    try:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise RunFileError(f"{path} is being written by another replay process; wait for it to end, or give another"
                           " --out") from None  # fmt: skip
    except OSError:  # a file system without locks: the run goes on unlocked
        pass
    return handle
