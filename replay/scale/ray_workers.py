"""``--ray ADDRESS``: the workers of a sharded run (``--workers N``) as Ray actors on an existing cluster, for a load
one machine's cores cannot make. Ray is imported here only, when asked (the ``ray`` extra).

Ray only places the workers: each actor (one CPU) runs ``replay.scale.remote_worker``, which connects back to this
process over TCP with the run's key, and from there it is a worker like a local one (``replay.scale.workers``): the
parent hands out the tasks, marks the phases and alone writes the run file; the workload and the job go over that
connection (not the object store: one path for every worker), and so does the API key. The actors' clocks are
brought to the parent's at connect (``replay.scale.clock_sync``). Every actor this started is killed when the run
ends, whichever way, and Ray is disconnected if this connected it. Multi-node recipe: docs/scale-out.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any

from replay.records.run_file import RunWriter
from replay.scale.remote_worker import RemoteWorker
from replay.scale.worker_link import WorkerListener
from replay.scale.workers import Launched, ShardedRun, WorkerError, run_workers

ACTOR_DIED = -9  # the exit code a dead actor reports, as a killed process's


LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray keeps 127.0.0.1 (else it takes the machine's IP)


def _ray(address: str) -> Any:
    """Ray, imported; for a cluster on the loopback address, told to stay there (as it does on macOS), else it
    looks for this node under the machine's IP and waits minutes for a cluster that is not there."""
    if address.rpartition(":")[0].removeprefix("ray://") in ("127.0.0.1", "localhost"):
        os.environ.setdefault(LOOPBACK_ENV, "0")
    try:
        import ray
    except ImportError:
        need = "--ray needs Ray here and on the cluster: pip install 'agentic-replay[ray]'"
        raise WorkerError(need, started=False) from None
    return ray


def _driver_node(address: str) -> dict[str, str]:
    """A head on another loopback address than 127.0.0.1 (a cluster of several nodes on one machine, each on its own
    127.0.0.x): this driver joins that node, or Ray looks for one on the machine's own address."""
    host = address.rpartition(":")[0].removeprefix("ray://")
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).is_loopback and host != "127.0.0.1":
            return {"_node_ip_address": host}
    return {}


class _Actor:
    """A worker's actor as the parent sees a process: ``poll``, ``wait`` and ``kill``."""

    def __init__(self, ray: Any, handle: Any, done: Any) -> None:
        self.ray, self.handle, self.done = ray, handle, done
        self.code: int | None = None
        self.error = ""

    def poll(self) -> int | None:
        if self.code is None and self.ray.wait([self.done], timeout=0)[0]:
            try:
                self.code = int(self.ray.get(self.done))
            except self.ray.exceptions.RayActorError as exc:  # died: killed, its node lost, out of memory
                self.code, self.error = ACTOR_DIED, str(exc).strip().splitlines()[0]
            except Exception as exc:  # its run raised
                self.code, self.error = 1, str(exc).strip().splitlines()[-1]
        return self.code

    def wait(self, timeout: float | None = None) -> int:
        if self.code is None and not self.ray.wait([self.done], timeout=timeout)[0]:
            raise subprocess.TimeoutExpired("ray actor", timeout or 0.0)
        return self.poll() or 0

    def kill(self) -> None:
        """Killed, not waited for: a cluster that stopped answering must not hold the parent's exit."""
        if self.code is None:
            with contextlib.suppress(Exception):
                self.ray.kill(self.handle, no_restart=True)
            self.code = ACTOR_DIED


def _listen_address(listen: str | None, ray: Any) -> tuple[str, int]:
    """Where the actors connect: ``--ray-listen HOST[:PORT]``, or this node's IP as Ray knows it, any port."""
    if not listen:
        return ray.util.get_node_ip_address(), 0
    host, _, port = listen.rpartition(":") if ":" in listen else (listen, "", "0")
    try:
        return host, int(port)
    except ValueError:
        raise WorkerError(f"--ray-listen: expected HOST or HOST:PORT, not {listen!r}", started=False) from None


class RayCluster:
    """The cluster this run connected to, and the actors it started there."""

    def __init__(self, ray: Any, listen: str | None) -> None:
        self.ray = ray
        self.host, self.port = _listen_address(listen, ray)
        self.actors: list[_Actor] = []

    def cpus(self) -> int:
        return int(self.ray.cluster_resources().get("CPU", 0))

    def launch(self, count: int, env: dict[str, str]) -> list[Launched]:
        """``count`` actors of one CPU each, connected and greeted."""
        if count > (cpus := self.cpus()):
            raise WorkerError(
                f"--workers {count}: the Ray cluster has {cpus} CPUs, and each worker takes one", started=False
            )
        listener = WorkerListener(self.host, self.port)
        try:
            # one CPU each, spread over the nodes (a node lost takes as few of them as can be)
            actor = self.ray.remote(num_cpus=1, max_restarts=0, scheduling_strategy="SPREAD")(RemoteWorker)
            for index in range(count):
                handle = actor.remote()
                done = handle.run.remote(listener.host, listener.port, listener.authkey, index)
                self.actors.append(_Actor(self.ray, handle, done))
            mine = self.actors[-count:]
            links = listener.accept(count, env, lambda: _check(mine))
        finally:
            listener.close()
        return [link.launched(a) for link, a in zip(links, mine, strict=True)]

    def kill(self) -> None:
        for actor in self.actors:
            actor.kill()


def _check(actors: list[_Actor]) -> None:
    for index, actor in enumerate(actors):
        if actor.poll() is not None:
            raise WorkerError(f"worker {index} (a Ray actor) ended before it connected: {actor.error}")


@contextlib.contextmanager
def ray_cluster(address: str, listen: str | None = None) -> Iterator[RayCluster]:
    """Connected to the cluster at ``address`` (what ``ray.init`` takes: HOST:PORT, ``auto``, ``ray://...``)
    unless Ray already is; every actor killed and Ray disconnected on the way out."""
    with contextlib.redirect_stdout(sys.stderr):  # Ray prints the cluster's news (a node died) to stdout: --json's
        yield from _connected(address, listen)


def _connected(address: str, listen: str | None) -> Iterator[RayCluster]:
    ray = _ray(address)
    ours = not ray.is_initialized()
    if ours:
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING, **_driver_node(address))
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise WorkerError(f"--ray {address}: {exc}", started=False) from None
    cluster = RayCluster(ray, listen)
    try:
        yield cluster
    finally:
        cluster.kill()
        if ours:
            ray.shutdown()


async def run_on_ray(
    address: str,
    listen: str | None,
    plan: ShardedRun,
    writer: RunWriter,
    progress: bool = True,
    check: Callable[[], str | None] | None = None,
    extra: Sequence[Callable[[], Coroutine[Any, Any, None]]] = (),
) -> dict[str, Any]:
    """``run_workers`` with the workers on the cluster (``plan.workers`` 0: one per CPU of the cluster)."""
    with ray_cluster(address, listen) as cluster:
        plan = dataclasses.replace(plan, workers=plan.workers or max(cluster.cpus(), 1), launcher=cluster.launch,
                                   survive_loss=True)  # fmt: skip
        footer = await run_workers(plan, writer, progress, check, extra)
        return {**footer, "ray": {"address": address, "cpus": cluster.cpus()}}
