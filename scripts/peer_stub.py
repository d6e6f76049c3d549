"""A minimal OpenAI-style streaming host for benchmarking clients, in its own process.

Written for ``scripts/bench_peers.py``: the clients compared there must be the limit, not the host, so this
server does as little as an HTTP/1.1 server can (an asyncio protocol, keep-alive, chunked SSE, answers
prebuilt once per shape) and counts what it sent itself, so tokens per second are the host's figure and not
any client's claim. It binds 127.0.0.1 only.

Three write modes (``/bench/reset?mode=...``):
- ``whole``: the whole answer (headers, every event, the closing chunk) in one write;
- ``event``: one SSE event per write (one chunk per token), as real hosts stream;
- ``timed``: the injected truth for latency checks: the first token ``ttft`` seconds after the request
  arrived (headers, role chunk and first token in one write), then one token every ``itl`` seconds on an
  absolute schedule, each in its own write.

Every answer has ``tokens`` tokens whatever the request asked (so every client receives the same amount), one
word per event, each one token for the benchmark's tokenizer. Serves ``/v1/chat/completions``,
``/v1/completions`` (streamed or not), ``/v1/models``, ``/health``; ``/bench/stats`` returns the tally (per
request: arrival, first and last write, tokens; all ``time.monotonic``, the same clock in every process here).

    python scripts/peer_stub.py [--port 0] [--tokens 500] [--mode whole|event|timed] [--model stub]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import select
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import orjson

READY = "PEER_STUB_READY port="
WORD = " the"
MODES = ("whole", "event", "timed")
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n"
)
DONE = b"data: [DONE]\n\n"
LAST_CHUNK = b"0\r\n\r\n"


@dataclass(slots=True)
class Config:
    mode: str = "whole"
    tokens: int = 500
    ttft: float = 0.2
    itl: float = 0.01
    model: str = "stub"


@dataclass(slots=True)
class Tally:
    """What the stub sent, per request (parallel lists: cheap to append, cheap to dump)."""

    arrival: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    last: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # each request's X-Request-Id ("" without one): joins a client's
    bad: int = 0
    in_flight: int = 0  # streamed answers being written (event and timed modes)
    max_in_flight: int = 0
    max_connections: int = 0  # connections open at once: a client holding C streams keeps C open
    peers: dict[str, int] = field(default_factory=dict)  # connections opened, by the client's address

    def add(self, arrival: float, first: float, last: float, tokens: int, rid: str = "") -> None:
        self.arrival.append(arrival)
        self.first.append(first)
        self.last.append(last)
        self.tokens.append(tokens)
        self.ids.append(rid)

    def summary(self) -> dict:
        return {
            "requests": len(self.tokens),
            "tokens": sum(self.tokens),
            "bad_requests": self.bad,
            "max_in_flight": self.max_in_flight,
            "max_connections": self.max_connections,
            "peers": self.peers,
            "ids": self.ids,
            "arrival": self.arrival,
            "first": self.first,
            "last": self.last,
            "per_request_tokens": self.tokens,
        }


def chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(obj: dict) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def answer_events(kind: str, model: str, tokens: int, usage: bool) -> tuple[bytes, bytes, bytes, bytes]:
    """(opening, one token event, closing, DONE) of a streamed answer in ``kind``'s shape (chat or completions)."""
    base = {"id": "cmpl-stub", "created": 0, "model": model}
    if kind == "chat":
        base["object"] = "chat.completion.chunk"

        def ev(delta: dict, finish: str | None = None) -> bytes:
            return event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

        opening, token, finish = ev({"role": "assistant", "content": ""}), ev({"content": WORD}), ev({}, "length")
    else:
        base["object"] = "text_completion"

        def ev(text: str, finish: str | None = None) -> bytes:  # type: ignore[misc]
            return event({**base, "choices": [{"index": 0, "text": text, "finish_reason": finish}]})

        opening, token, finish = b"", ev(WORD), ev("", "length")
    counts = {"prompt_tokens": 1000, "completion_tokens": tokens, "total_tokens": 1000 + tokens}
    closing = finish + (event({**base, "choices": [], "usage": counts}) if usage else b"")
    return opening, token, closing, DONE


def whole_body(kind: str, model: str, tokens: int) -> bytes:
    """A non-streamed answer."""
    counts = {"prompt_tokens": 1000, "completion_tokens": tokens, "total_tokens": 1000 + tokens}
    if kind == "chat":
        choice = {"index": 0, "message": {"role": "assistant", "content": WORD * tokens}, "finish_reason": "length"}
        obj = {"id": "cmpl-stub", "object": "chat.completion", "created": 0, "model": model}
    else:
        choice = {"index": 0, "text": WORD * tokens, "finish_reason": "length"}
        obj = {"id": "cmpl-stub", "object": "text_completion", "created": 0, "model": model}
    return orjson.dumps({**obj, "choices": [choice], "usage": counts})


def plain(status: str, body: bytes, ctype: bytes = b"application/json") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (
        status.encode(),
        ctype,
        len(body),
        body,
    )


class Stub:
    """The shared state: configuration, prebuilt answers, the tally."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.tally = Tally()
        self.connections = 0
        self._cache: dict[tuple, tuple[bytes, ...]] = {}

    def opened(self, delta: int) -> None:
        self.connections += delta
        self.tally.max_connections = max(self.tally.max_connections, self.connections)

    def events(self, kind: str, usage: bool) -> tuple[bytes, bytes, bytes, bytes]:
        key = ("ev", kind, usage, self.config.tokens, self.config.model)
        if key not in self._cache:
            self._cache[key] = answer_events(kind, self.config.model, self.config.tokens, usage)
        return self._cache[key]  # type: ignore[return-value]

    def whole(self, kind: str, usage: bool) -> bytes:
        """Headers, every event and the last chunk: one write."""
        key = ("whole", kind, usage, self.config.tokens, self.config.model)
        if key not in self._cache:
            opening, token, closing, done = self.events(kind, usage)
            body = opening + token * self.config.tokens + closing + done
            self._cache[key] = (SSE_HEAD + b"\r\n" + chunk(body) + LAST_CHUNK,)
        return self._cache[key][0]

    def control(self, path: str, query: str) -> bytes:
        if path == "/bench/stats":
            return plain("200 OK", orjson.dumps(self.tally.summary()))
        # /bench/reset: a fresh tally, and optionally a new configuration.
        args = dict(parse_qsl(query))
        c = self.config
        mode = args.get("mode", c.mode)
        if mode not in MODES:
            return plain("400 Bad Request", b'{"error":"mode"}')
        self.config = Config(
            mode=mode,
            tokens=int(args.get("tokens", c.tokens)),
            ttft=float(args.get("ttft", c.ttft)),
            itl=float(args.get("itl", c.itl)),
            model=args.get("model", c.model),
        )
        self.tally = Tally(max_connections=self.connections)
        return plain("200 OK", orjson.dumps({"ok": True, "mode": mode}))


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: requests parsed from the buffer, answered one at a time."""

    def __init__(self, stub: Stub) -> None:
        self.stub = stub
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.busy = False  # a streamed answer is being written; further requests wait in the buffer
        self.can_write: asyncio.Event = asyncio.Event()
        self.can_write.set()
        self.arrival = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.stub.opened(1)
        peer = str((transport.get_extra_info("peername") or ("?",))[0])
        self.stub.tally.peers[peer] = self.stub.tally.peers.get(peer, 0) + 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.can_write.set()
        self.stub.opened(-1)

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    def data_received(self, data: bytes) -> None:
        if not self.buf:
            self.arrival = time.monotonic()  # the first byte of a request (reads of one request are one here)
        self.buf += data
        if not self.busy:
            self.serve_buffered()

    def serve_buffered(self) -> None:
        while self.transport is not None and not self.busy:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
            length = int(headers.get("content-length", "0"))
            if len(self.buf) < end + 4 + length:
                return
            body, self.buf = self.buf[end + 4 : end + 4 + length], self.buf[end + 4 + length :]
            method, _, rest = head[0].partition(" ")
            target = rest.rsplit(" ", 1)[0]
            arrival = self.arrival
            if self.buf:
                self.arrival = time.monotonic()
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self.stub.tally.bad += 1
                self.transport.write(plain("411 Length Required", b'{"error":"send Content-Length"}'))
                self.transport.close()
                return
            self.route(method, target, body, arrival, headers.get("x-request-id", ""))

    def route(self, method: str, target: str, body: bytes, arrival: float, rid: str = "") -> None:
        assert self.transport is not None
        url = urlsplit(target)
        path = url.path.rstrip("/")
        if path.startswith("/bench/"):
            self.transport.write(self.stub.control(path, url.query))
        elif path in ("/health", "/v1/health"):
            self.transport.write(plain("200 OK", b"{}"))
        elif path == "/v1/models":
            model = {"id": self.stub.config.model, "object": "model", "created": 0, "owned_by": "stub"}
            self.transport.write(plain("200 OK", orjson.dumps({"object": "list", "data": [model]})))
        elif method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            self.answer("chat" if path.endswith("chat/completions") else "completions", body, arrival, rid)
        else:
            self.transport.write(plain("404 Not Found", b'{"error":"not found"}'))

    def answer(self, kind: str, body: bytes, arrival: float, rid: str = "") -> None:
        assert self.transport is not None
        stub = self.stub
        try:
            req = orjson.loads(body)
        except orjson.JSONDecodeError:
            stub.tally.bad += 1
            self.transport.write(plain("400 Bad Request", b'{"error":"body is not JSON"}'))
            return
        usage = bool((req.get("stream_options") or {}).get("include_usage"))
        tokens = stub.config.tokens
        if not req.get("stream"):
            self.transport.write(plain("200 OK", whole_body(kind, stub.config.model, tokens)))
            now = time.monotonic()
            stub.tally.add(arrival, now, now, tokens, rid)
        elif stub.config.mode == "whole":
            self.transport.write(stub.whole(kind, usage))
            now = time.monotonic()
            stub.tally.add(arrival, now, now, tokens, rid)
        elif stub.config.mode == "timed":
            self.busy = True
            TimedAnswer(self, kind, usage, arrival, rid).start()
        else:
            self.busy = True
            asyncio.get_running_loop().create_task(self.stream(kind, usage, arrival, rid))

    def answered(self) -> None:
        """A streamed answer is over: the next request on this connection, if one is waiting."""
        self.busy = False
        if self.buf:
            self.serve_buffered()

    async def stream(self, kind: str, usage: bool, arrival: float, rid: str) -> None:
        """One event per write, as fast as the connection takes them (``event`` mode)."""
        config = self.stub.config
        opening, token, closing, done = self.stub.events(kind, usage)
        first = last = 0.0
        sent = 0
        tally = self.stub.tally
        tally.in_flight += 1
        tally.max_in_flight = max(tally.max_in_flight, tally.in_flight)
        try:
            self.transport.write(SSE_HEAD + b"\r\n" + chunk(opening + token))  # type: ignore[union-attr]
            first = last = time.monotonic()
            sent = 1
            piece = chunk(token)
            for i in range(1, config.tokens):
                if not self.can_write.is_set():
                    await self.can_write.wait()
                if self.transport is None:
                    return
                self.transport.write(piece)
                sent += 1
                if not i % 16:
                    await asyncio.sleep(0)  # let the other streams write too
            if self.transport is None:
                return
            self.transport.write(chunk(closing + done) + LAST_CHUNK)
            last = time.monotonic()
        finally:
            tally.in_flight -= 1
            tally.add(arrival, first, last, sent, rid)
            self.busy = False
        if self.buf:
            self.serve_buffered()


class TimedAnswer:
    """``timed`` mode: the first token ``ttft`` after the request's arrival (headers, role chunk and first token in
    one write), then one every ``itl`` on an absolute schedule, each in its own write. Each write is a timer
    callback of the loop, not a coroutine waking from a sleep: thousands of streams at once cost the stub a write
    and a timer per token, so it stays on time where the client under test is measured (scripts/bench_agents.py)."""

    __slots__ = (
        *("arrival", "closing", "conn", "first", "first_t", "i", "itl"),
        *("due", "loop", "n", "piece", "rid", "sent", "ttft"),
    )

    def __init__(self, conn: Connection, kind: str, usage: bool, arrival: float, rid: str) -> None:
        config = conn.stub.config
        opening, token, closing, done = conn.stub.events(kind, usage)
        self.conn, self.arrival, self.rid = conn, arrival, rid
        self.ttft, self.itl, self.n = config.ttft, config.itl, config.tokens
        self.piece, self.closing = chunk(token), chunk(closing + done) + LAST_CHUNK
        self.first = SSE_HEAD + b"\r\n" + chunk(opening + token)
        self.i, self.sent, self.first_t, self.due = 0, 0, 0.0, 0.0
        self.loop = asyncio.get_running_loop()

    def start(self) -> None:
        tally = self.conn.stub.tally
        tally.in_flight += 1
        tally.max_in_flight = max(tally.max_in_flight, tally.in_flight)
        self._next()

    def _next(self) -> None:
        """Wait for token i's time (the loop's clock is time.monotonic plus a constant: asyncio's and uvloop's)."""
        self.due = self.arrival + self.ttft + self.i * self.itl
        self.loop.call_at(self.loop.time() + self.due - time.monotonic(), self._write)

    def _write(self) -> None:
        if time.monotonic() < self.due:  # a timer fires early by what the loop's cached time lags the clock (uvloop
            self.loop.call_at(self.loop.time() + self.due - time.monotonic(), self._write)  # reads it once per turn)
            return
        transport = self.conn.transport
        if transport is None:
            return self._end(0.0)
        if self.i == 0:
            transport.write(self.first)
            self.first_t = time.monotonic()
        else:
            transport.write(self.piece)
        self.sent += 1
        self.i += 1
        if self.i < self.n:
            return self._next()
        transport.write(self.closing)
        self._end(time.monotonic())

    def _end(self, last: float) -> None:
        tally = self.conn.stub.tally
        tally.in_flight -= 1
        tally.add(self.arrival, self.first_t, last or self.first_t, self.sent, self.rid)
        self.conn.answered()


async def serve(config: Config, port: int, exit_with_stdin: bool) -> None:
    loop = asyncio.get_running_loop()
    stub = Stub(config)
    server = await loop.create_server(lambda: Connection(stub), "127.0.0.1", port, backlog=8192)
    print(READY + str(server.sockets[0].getsockname()[1]), flush=True)
    stop: asyncio.Future[None] = loop.create_future()
    if exit_with_stdin:
        # Stop when whoever started us goes away (its pipe to our stdin closes), whatever killed it.
        def readable() -> None:
            if not os.read(sys.stdin.fileno(), 1024) and not stop.done():
                stop.set_result(None)

        loop.add_reader(sys.stdin.fileno(), readable)
    async with server:
        await stop


@contextlib.contextmanager
def started(*options: str, timeout_s: float = 30.0) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """This stub as the benchmarks and tests drive it: a process in a session of its own (a terminal's Ctrl-C
    reaches only the caller) on an ephemeral port of 127.0.0.1, with ``options`` (``--tokens``, ``--mode`` ...).
    Yields it and its port; it stops when our end of its stdin closes, and is killed if it has not within 10 s."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--port", "0", *options, "--exit-with-stdin"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
        line = proc.stdout.readline() if ready else ""
        if not line.startswith(READY):
            raise RuntimeError(f"the stub did not start: {line!r}")
        yield proc, int(line[len(READY) :])
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def control(port: int, path: str, timeout_s: float = 60.0) -> dict:
    """One of the stub's own pages (``/bench/reset?...``, ``/bench/stats``), as JSON."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout_s) as resp:
        return orjson.loads(resp.read())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=500)
    ap.add_argument("--mode", choices=MODES, default="whole")
    ap.add_argument("--ttft", type=float, default=0.2)
    ap.add_argument("--itl", type=float, default=0.01)
    ap.add_argument("--model", default="stub")
    ap.add_argument("--exit-with-stdin", action="store_true", help="stop when stdin closes (the parent is gone)")
    args = ap.parse_args()
    config = Config(mode=args.mode, tokens=args.tokens, ttft=args.ttft, itl=args.itl, model=args.model)
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    with contextlib.suppress(KeyboardInterrupt):
        runner(serve(config, args.port, args.exit_with_stdin))


if __name__ == "__main__":
    main()
