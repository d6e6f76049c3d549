"""A Ray cluster of several nodes on this one machine, each on a loopback address of its own (127.0.0.2, .3, ...),
for the fleet tests: started here, and stopped here on every path, by process id (never ``ray stop``, which would
stop every Ray process of the machine).

Each node is ``ray start --block`` in a session of its own, with ports of its own (two nodes on one machine would
otherwise both bind Ray's fixed defaults). A node is stopped, or killed as a lost machine would be, with every
process it started: the raylet's workers (our actors among them) sit in sessions of their own, so the node's
descendants are collected from /proc before anything is signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
START_TIMEOUT_S = 180.0  # a node's start on a busy 2-core machine
# Ray 2.60 turns token authentication on for the clusters it starts; these test clusters live on the loopback only.
ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def descendants(pid: int) -> set[int]:
    """Every live process under ``pid`` (children, theirs, ...), from /proc."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                parents[int(stat.parent.name)] = int(fields[1])
    out: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - out
        out |= frontier
    return out


def alive(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


@dataclass
class Node:
    ip: str
    proc: subprocess.Popen[bytes]
    log: Path
    pids: set[int] = field(default_factory=set)  # the node's processes, as last collected

    def collect(self) -> set[int]:
        self.pids |= {self.proc.pid} | descendants(self.proc.pid)
        return self.pids

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Every process of the node, at once (a lost machine): ``ray start``, its GCS or raylet, the workers."""
        for pid in self.collect():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def stop(self, within_s: float = 5.0) -> None:
        """SIGTERM to the node (Ray's own shutdown), SIGKILL to whatever is left after ``within_s``; returns once
        none of its processes is alive."""
        self.collect()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
        self._gone(within_s)
        self.kill()
        self._gone(10.0)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def _gone(self, within_s: float) -> bool:
        deadline = time.monotonic() + within_s
        while any(alive(p) for p in self.pids) and time.monotonic() < deadline:
            time.sleep(0.1)  # polling the processes' state, not standing in for synchronisation
        return not any(alive(p) for p in self.pids)


def _ports(ip: str, index: int) -> list[str]:
    worker_low = 20000 + 2000 * index  # below the ephemeral range the other ports are drawn from
    named = ["--node-manager-port", "--object-manager-port", "--metrics-export-port", "--dashboard-agent-listen-port",
             "--dashboard-agent-grpc-port", "--runtime-env-agent-port"]  # fmt: skip
    out = [f"{name}={free_port(ip)}" for name in named]
    return [*out, f"--min-worker-port={worker_low}", f"--max-worker-port={worker_low + 1999}"]


def start_node(ip: str, index: int, head: str | None, log_dir: Path, env: dict[str, str]) -> Node:
    """``ray start --block`` for a node on ``ip`` (the head when ``head`` is None, else joining it)."""
    log = log_dir / f"node-{ip}.log"
    args = [RAY, "start", "--block", f"--node-ip-address={ip}", "--num-cpus=1", "--disable-usage-stats",
            *_ports(ip, index)]  # fmt: skip
    if head is None:
        args += ["--head", f"--port={free_port(ip)}", "--include-dashboard=false"]
    else:
        args += [f"--address={head}"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, **ENV, **env})  # fmt: skip
    return Node(ip, proc, log)


def _head_address(node: Node) -> str:
    for arg in node.proc.args:  # type: ignore[union-attr]
        if str(arg).startswith("--port="):
            return f"{node.ip}:{str(arg).split('=', 1)[1]}"
    raise AssertionError("the head has no port")


def _nodes_alive(address: str, ip: str, env: dict[str, str]) -> int:
    """How many nodes the cluster at ``address`` has alive (a driver on the head's address asks it)."""
    code = ("import logging, ray\n"
            f"ray.init(address={address!r}, _node_ip_address={ip!r}, log_to_driver=False, "
            "logging_level=logging.ERROR)\nprint(sum(1 for n in ray.nodes() if n['Alive']))\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, env={**os.environ, **ENV,
                          **env})  # fmt: skip
    return int(done.stdout.split()[-1]) if done.returncode == 0 and done.stdout.split() else 0


@contextlib.contextmanager
def ray_nodes(ips: list[str], log_dir: Path, env: dict[str, str] | None = None) -> Iterator[tuple[str, list[Node]]]:
    """A cluster of one node per address (the first is the head): yields its address and nodes; every node's every
    process is stopped on the way out, whatever happened."""
    env = env or {}
    nodes: list[Node] = []
    try:
        nodes.append(start_node(ips[0], 0, None, log_dir, env))
        address = _head_address(nodes[0])
        deadline = time.monotonic() + START_TIMEOUT_S
        while _nodes_alive(address, ips[0], env) < 1:
            assert nodes[0].proc.poll() is None and time.monotonic() < deadline, nodes[0].log.read_text()[-3000:]
        for i, ip in enumerate(ips[1:], 1):  # one at a time: their starts load the GCS
            nodes.append(start_node(ip, i, address, log_dir, env))
            while _nodes_alive(address, ips[0], env) < i + 1:
                assert nodes[-1].proc.poll() is None and time.monotonic() < deadline, nodes[-1].log.read_text()[-3000:]
        for node in nodes:
            node.collect()
        yield address, nodes
    finally:
        for node in reversed(nodes):
            node.stop()
