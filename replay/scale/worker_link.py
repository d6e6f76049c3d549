"""The parent's end of workers that connect over TCP (``--ray``'s actors, or local processes in the tests).

The parent listens on one port with a key made for the run (32 random bytes; it goes to the workers as their
launch argument and is never printed or written). A connection that cannot answer the key's challenge
(``multiprocessing.connection``'s HMAC handshake, both ways) is dropped. A worker that passes says which worker it
is, its node and its replay version, answers the clock pings (``replay.scale.clock_sync``) and is handed the
environment it needs (the API key, over this authenticated channel: the channel is not encrypted, see
docs/scale-out.md). Then it is a worker like a local one: the parent sends its job on the same connection.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from pathlib import Path
from time import perf_counter

import replay
from replay.scale.clock_sync import PINGS, ClockOffset, best_offset
from replay.scale.workers import START_TIMEOUT_S, Launched, WorkerError

ACCEPT_POLL_S = 0.5  # between two accepts: how often a launcher's workers are checked for an early failure
GREETING_TIMEOUT_S = 10.0  # a connection's whole greeting (challenge, hello, pings); a stray one is dropped


@dataclass(slots=True)
class Link:
    """One worker connected: its connection, node and clock."""

    conn: Connection
    node: str
    clock: ClockOffset

    def launched(self, proc: object) -> Launched:
        return Launched(proc, self.conn, self.clock.offset_s, {"node": self.node, **self.clock.public()})


def _read_timeout(conn: Connection, seconds: float) -> None:
    """SO_RCVTIMEO on the connection's socket (0: none), so a greeting cannot hang the parent."""
    sock = socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM)  # a dup: closing it keeps conn's
    with sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", int(seconds), 0))


class WorkerListener:
    """A TCP port only this run's workers can connect to."""

    def __init__(self, host: str, port: int = 0) -> None:
        self.authkey = os.urandom(32)
        self.sock = socket.create_server((host, port))
        self.sock.settimeout(ACCEPT_POLL_S)
        self.host, self.port = host, self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()

    def accept(self, count: int, env: dict[str, str], check: Callable[[], None]) -> list[Link]:
        """Workers 0..count-1, each greeted; ``check`` raises WorkerError when a worker failed before it came."""
        links: dict[int, Link] = {}
        end = perf_counter() + START_TIMEOUT_S
        try:
            while len(links) < count:
                check()
                if perf_counter() > end:
                    missing = sorted(set(range(count)) - set(links))
                    why = "not started (no free CPU on the cluster?), or that address is not reachable from their node"
                    raise WorkerError(f"workers {missing} did not connect to {self.host}:{self.port} within "
                                      f"{START_TIMEOUT_S:.0f} s: {why} (a firewall? --ray-listen)")  # fmt: skip
                try:
                    raw, _ = self.sock.accept()
                except TimeoutError:
                    continue
                greeted = self._greet(raw, env)
                if greeted is None or greeted[0] in links or not 0 <= greeted[0] < count:
                    continue
                links[greeted[0]] = greeted[1]
        except BaseException:
            for link in links.values():
                link.conn.close()
            raise
        return [links[i] for i in range(count)]

    def _greet(self, raw: socket.socket, env: dict[str, str]) -> tuple[int, Link] | None:
        """The challenge, the hello, the clock and the environment; None for a connection that is not ours."""
        conn = Connection(raw.detach())
        try:
            _read_timeout(conn, GREETING_TIMEOUT_S)
            deliver_challenge(conn, self.authkey)
            answer_challenge(conn, self.authkey)
            kind, index, node, version, _pid = conn.recv()
            if kind != "hello":
                raise OSError("no hello")
            if version != replay.__version__:
                conn.close()
                raise WorkerError(f"worker {index} on {node} runs replay {version}, this is {replay.__version__}: "
                                  "install the same version on every node")  # fmt: skip
            samples = []
            for _ in range(PINGS):
                sent = perf_counter()
                conn.send(("ping", sent))
                _, theirs = conn.recv()
                samples.append((sent, theirs, perf_counter()))
            conn.send(("env", env))
            _read_timeout(conn, 0)
        except (AuthenticationError, EOFError, OSError, ValueError, TypeError):
            conn.close()
            return None
        return index, Link(conn, node, best_offset(samples))


def _local_process(listener: WorkerListener, index: int) -> subprocess.Popen[bytes]:
    """``python -m replay.scale.remote_worker`` on this machine, this replay first on its path, told where to connect
    on stdin (never its command line: the key would show in ``ps``)."""
    here = str(Path(replay.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "replay.scale.remote_worker"], stdin=subprocess.PIPE,
                            start_new_session=True, env=env)  # fmt: skip
    spec = {"host": listener.host, "port": listener.port, "authkey": listener.authkey.hex(), "index": index}
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(spec).encode() + b"\n")
    proc.stdin.close()
    return proc


def tcp_processes(host: str = "127.0.0.1") -> Callable[[int, dict[str, str]], list[Launched]]:
    """A launcher of local processes that connect over TCP, as remote ones do: the TCP path without a cluster."""

    def launch(count: int, env: dict[str, str]) -> list[Launched]:
        listener = WorkerListener(host)
        procs: list[subprocess.Popen[bytes]] = []
        try:
            procs += [_local_process(listener, i) for i in range(count)]

            def check() -> None:
                for i, proc in enumerate(procs):
                    if proc.poll() is not None:
                        raise WorkerError(f"worker {i} exited (code {proc.returncode}) before it connected")

            links = listener.accept(count, env, check)
        except BaseException:
            for proc in procs:
                proc.kill()
                proc.wait()
            raise
        finally:
            listener.close()
        return [link.launched(proc) for link, proc in zip(links, procs, strict=True)]

    return launch
