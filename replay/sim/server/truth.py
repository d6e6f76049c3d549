"""The sim's own record of every request, to check what the client measured against what happened.

One JSON line per finished request, written and flushed as it finishes. Every time is
``time.perf_counter()`` (CLOCK_MONOTONIC on Linux), so it compares directly with the client's stamps
when both run on one machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass(slots=True)
class TruthRecord:
    """What the sim did for one request."""

    request_id: str  # the request's X-Request-Id header, or one the sim made up
    arrival: float  # first bytes of the request entered the server (before any handler ran)
    api: str = "chat"  # chat | completions | messages | responses
    queued: float | None = None  # handed to the engine (prompt tokenised), joins the waiting queue
    prefill_start: float | None = None  # start of the step that first admitted it (queue wait ends)
    prefill_end: float | None = None  # end of the step that sampled its first token (engine time)
    queue_wait: float | None = None  # prefill_start - queued
    prefill_time: float | None = None  # prefill_end - prefill_start: chunks, steps shared with decodes
    decode_time: float | None = None  # engine time from the first sampled token to the last
    first_token: float | None = None  # first token-bearing write handed to the transport
    last_token: float | None = None  # last token-bearing write handed to the transport
    done: float | None = None  # final write (or the error response) handed to the transport
    prompt_tokens: int = 0
    cached_tokens: int = 0
    images: int = 0  # image parts in the prompt (each counted by the client's estimate in prompt_tokens)
    output_tokens: int = 0  # tokens actually written
    reasoning_tokens: int = 0  # of output_tokens
    writes: list[float] = field(default_factory=list)  # flat [t0, n0, t1, n1, ...]: token-bearing writes
    status: str = "ok"  # ok | bad_request | rejected | fault | disconnected | cancelled
    http_status: int = 200
    finish_reason: str | None = None  # length | stop
    fault: str | None = None  # the fault injected (see faults), if any
    fault_detail: str | None = None  # bad_usage: how the counts were spoiled (string, negative, float, huge)
    retry_after: float | None = None  # seconds an HTTP fault's Retry-After (or retry-after-ms) asked to wait
    route: str = "primary"  # primary | fallback:PROFILE (the engine that served it)
    request_fields: dict[str, Any] = field(default_factory=dict)  # affinity fields of the body (requests.py)
    request_headers: dict[str, str] = field(default_factory=dict)  # affinity headers (never credentials)
    server_timings: dict[str, Any] | None = None  # what the dialect reported as server timings, as sent
    preemptions: int = 0  # times the engine preempted it (KV ran out); recomputed each time
    preempted_at: list[float] = field(default_factory=list)
    recomputed_tokens: int = 0  # tokens computed a second time because of preemptions
    speculation: dict[str, int] | None = None  # a speculating profile's accepted, drafted tokens and drafts
    transport: str = "http"  # http | websocket (a turn of Responses' WebSocket mode)
    continued: bool = False  # Responses: previous_response_id named a response the host held (its context used)

    def wrote(self, t: float, count: int) -> None:
        """Note a write of ``count`` tokens handed to the transport at ``t``."""
        if self.first_token is None:
            self.first_token = t
        self.last_token = t
        self.writes += (t, count)
        self.output_tokens += count

    def hidden(self, count: int) -> None:
        """Note ``count`` tokens generated but not sent (reasoning a dialect does not stream)."""
        self.output_tokens += count


class TruthLog:
    """JSONL file of TruthRecords (optional), plus an in-memory copy (optional) for in-process tests."""

    def __init__(self, path: str | None = None, keep: bool = True) -> None:
        self._file = open(path, "wb") if path else None  # noqa: SIM115 (open for the server's lifetime)
        self.records: list[dict[str, Any]] | None = [] if keep else None
        self.count = 0
        self._appended = asyncio.Event()

    def append(self, record: TruthRecord) -> None:
        """Write one finished request and flush it. A file that cannot be written (a full disk) is said once, in one
        line on stderr, and closed: the host goes on serving, and the log holds the records before it."""
        line = orjson.dumps(record)
        if self._file is not None:
            try:
                self._file.write(line + b"\n")
                self._file.flush()
            except OSError as exc:
                name = self._file.name
                with contextlib.suppress(OSError):
                    self._file.close()
                self._file = None
                said = f"the truth log {name} could not be written ({exc.strerror or exc})"
                print(f"replay sim: {said}: it holds the {self.count} requests before this one, no later ones",
                      file=sys.stderr, flush=True)  # fmt: skip
        if self.records is not None:
            self.records.append(orjson.loads(line))
        self.count += 1
        self._appended.set()
        self._appended = asyncio.Event()

    async def wait_for(self, count: int) -> None:
        """Return once ``count`` records are logged: a client sees ``[DONE]`` before the handler logs."""
        while self.count < count:
            await self._appended.wait()

    def close(self) -> None:
        """Flush and close the file; later records are kept in memory only."""
        if self._file is not None:
            with contextlib.suppress(OSError):  # (said in append when a write failed; a buffered one is lost here)
                self._file.close()
            self._file = None
