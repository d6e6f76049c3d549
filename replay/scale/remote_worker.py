"""A worker that reaches its parent over TCP (``--ray``'s actors; any process on another machine): it connects with
the run's key, answers the parent's clock pings with its own clock, takes the environment the parent hands it (the
API key: never a command line, a Ray task argument or a log), then runs exactly the local worker's main
(``replay.scale.worker_proc.serve``) on that connection.

Only the standard library is imported before the clock hook, so that ``REPLAY_TEST_CLOCK_SKEW_S`` (a test hook:
this worker's clock runs that many seconds times its index + 1 ahead) skews every stamp replay takes here. As a
process, ``python -m replay.scale.remote_worker`` reads one JSON line on stdin: ``{"host", "port", "authkey" (hex),
"index"}``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from multiprocessing.connection import Client

SKEW_ENV = "REPLAY_TEST_CLOCK_SKEW_S"


def _skew_clock(index: int) -> None:
    """The test hook: every ``perf_counter()`` of this process (replay's modules bind it when they are imported,
    which is after this) runs ahead by the skew."""
    skew = float(os.environ.get(SKEW_ENV) or 0.0) * (index + 1)
    if skew:
        real = time.perf_counter
        time.perf_counter = lambda: real() + skew


def run_remote(host: str, port: int, authkey: bytes, index: int, node: str | None = None) -> int:
    """Connect, greet, sync the clock, take the environment, run the worker; 0 when it ran to its end. ``node``: what
    the run calls this worker's machine (a Ray node's address; default its host name)."""
    _skew_clock(index)
    import replay

    conn = Client((host, port), family="AF_INET", authkey=authkey)
    conn.send(("hello", index, node or socket.gethostname(), replay.__version__, os.getpid()))
    while True:
        message = conn.recv()
        if message[0] == "ping":
            conn.send(("pong", time.perf_counter()))
        elif message[0] == "env":  # the last of the greeting: the job follows, as over a local worker's socket
            os.environ.update(message[1])
            break
    from replay.scale.worker_proc import serve

    serve(conn)
    return 0


class RemoteWorker:
    """The body of a Ray actor (``ray.remote`` is applied where Ray is imported: ``replay.scale.ray_workers``)."""

    def run(self, host: str, port: int, authkey: bytes, index: int) -> int:
        import ray  # (in an actor: Ray is there) its node's address names it, several nodes may share a host name

        return run_remote(host, port, authkey, index, ray.util.get_node_ip_address())


if __name__ == "__main__":
    spec = json.loads(sys.stdin.readline())
    sys.exit(run_remote(spec["host"], spec["port"], bytes.fromhex(spec["authkey"]), spec["index"]))
