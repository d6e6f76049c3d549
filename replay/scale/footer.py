"""What a sharded run's footer says of its workers and, for workers that connected from elsewhere (``--ray``), of
their nodes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class Worker(Protocol):
    """What the footer reads of a worker (``replay.scale.parent``)."""

    index: int
    lanes: tuple[int, ...]
    info: dict[str, Any]  # node, clock offset and error (remote workers)
    footer: dict[str, Any] | None
    requests: int  # its request records written
    lost_in_flight: int | None  # lost before its end: its calls in flight then


def worker_row(w: Worker) -> dict[str, Any]:
    """A worker's entry of the footer's ``workers``: its lanes, stop, calls and tasks as it said; when it was lost
    (its node died), ``lost``, its calls then in flight and the request records it had written."""
    said = w.footer or {}
    row = {"worker": w.index, "lanes": len(w.lanes), "stop_reason": said.get("stop_reason"),
           "requests": said.get("requests"), "tasks": said.get("tasks"), **w.info}  # fmt: skip
    if w.lost_in_flight is not None:
        row |= {"lost": True, "lost_in_flight": w.lost_in_flight, "requests_written": w.requests}
    return row


def nodes(workers: Sequence[Worker]) -> list[dict[str, Any]]:
    """The footer's ``nodes``: per node (its address for Ray), its workers, the request records they wrote, and the
    workers lost mid-run with the calls they had in flight then (as each one's last batch said, at most 50 ms before:
    lost, never written); ``lost`` when every worker of the node was (the node itself, as far as the run can tell)."""
    out: dict[str, dict[str, Any]] = {}
    for w in workers:
        name = str(w.info.get("node", "?"))
        node = out.setdefault(name, {"node": name, "workers": 0, "records": 0, "lost_in_flight": 0, "lost_workers": 0})
        node["workers"] += 1
        node["records"] += w.requests
        if w.lost_in_flight is not None:
            node["lost_workers"] += 1
            node["lost_in_flight"] += w.lost_in_flight
    for node in out.values():
        node["lost"] = node["lost_workers"] == node["workers"]
    return list(out.values())
