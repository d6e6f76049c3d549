"""Hosts side by side: the same seeded workload replayed against each host, then one comparison of them all.

``replay run --host A --host B`` (and ``replay sweep`` with several hosts) builds one spec per host that differ in
the host alone (same workload files, load, seed, salt policy), runs them one after the other (the default: no
host competes with another for the client's CPU or the machine's network) or at once when asked (each run in a
thread of its own with its own event loop: they share the client's cores, which the output says), and compares
every host with the first (replay.studies.compare). Which host a label means is replay.hosts.resolve.resolve's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from replay.hosts.hardware import Hardware
from replay.studies.compare import COMPARE_FORMAT, Side, compare_runs, compare_sweeps, side_from_file

T = TypeVar("T")
S = TypeVar("S")
ONE_AFTER_ANOTHER = "one after the other"
AT_ONCE = "at once (concurrently, sharing the client's CPU: each host's figures may understate it)"


@dataclass(slots=True)
class Target:
    """One host of a comparison: its label (URL or sim:PROFILE), its spec and its hardware."""

    label: str
    spec: Any  # RunSpec
    hardware: Hardware


def slug(label: str, i: int) -> str:
    """A file-name-safe, unique name for the i-th host: '1-sim-fast', '2-127.0.0.1-8000'."""
    bare = re.sub(r"^https?://", "", label)
    bare = re.sub(r"[^A-Za-z0-9.]+", "-", bare).strip("-")[:48]
    return f"{i + 1}-{bare or 'host'}"


def run_all(items: list[S], job: Callable[[S], T], at_once: bool) -> list[T]:
    """``job`` for every host's item, one after the other or all at once (results in the items' order)."""
    if not at_once:
        return [job(t) for t in items]
    with ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="host") as pool:
        return list(pool.map(job, items))


def hosts_runs(sides: list[Side], mode: str) -> dict[str, Any]:
    """The comparison of finished runs, one per host: every host against the first."""
    return {
        "format": COMPARE_FORMAT,
        "kind": "hosts",
        "mode": mode,
        "runs": [s.meta() for s in sides],
        "comparisons": [compare_runs(sides[0], s) for s in sides[1:]],
    }


def hosts_sweeps(labels: list[str], sweeps: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    """The comparison of finished sweeps, one per host: every host's sweep against the first's."""
    pairs = zip(labels[1:], sweeps[1:], strict=True)
    return {
        "format": COMPARE_FORMAT,
        "kind": "host sweeps",
        "mode": mode,
        "sweeps": [
            {"host": h, "knee": s["knee"], "frontier": s["frontier"]} for h, s in zip(labels, sweeps, strict=True)
        ],
        "comparisons": [compare_sweeps(sweeps[0], s, (labels[0], h)) for h, s in pairs],
    }


def inputs(
    labels: list[str], paths: Sequence[Path | str], hardware: list[Hardware] | None = None
) -> list[dict[str, Any]]:
    """How a comparison's index names what it compared (rebuilt from these by ``load_comparison``)."""
    hw = hardware or [Hardware()] * len(paths)
    return [{"label": lab, "path": str(p), "hardware": h.public()} for lab, p, h in zip(labels, paths, hw, strict=True)]


def load_comparison(path: str | Path) -> tuple[dict[str, Any], list[tuple[list, list]] | None]:
    """Rebuild a comparison from its index's inputs (run files or sweep indexes); and compared sweeps' level rows."""
    from replay.studies.study_files import read_index
    from replay.studies.sweep import load_sweep

    path = Path(path)
    index = read_index(path, COMPARE_FORMAT)
    ins = index.get("inputs") or []
    if len(ins) < 2:
        raise ValueError(f"{path}: a comparison index needs two inputs or more")
    where = [Path(i["path"]) if Path(i["path"]).is_absolute() else path.parent / i["path"] for i in ins]
    labels = [i["label"] for i in ins]
    kind = index.get("kind")
    if kind in ("sweeps", "host sweeps"):
        sweeps = [load_sweep(w) for w in where]
        pairs = [(sweeps[0]["levels"], s["levels"]) for s in sweeps[1:]]
        if kind == "sweeps":
            doc = compare_sweeps(sweeps[0], sweeps[1], (labels[0], labels[1]))
        else:
            doc = hosts_sweeps(labels, sweeps, index.get("mode", ONE_AFTER_ANOTHER))
        return doc | {"inputs": ins}, pairs
    sides = [
        side_from_file(w, lab, Hardware.from_public(i.get("hardware")))
        for w, lab, i in zip(where, labels, ins, strict=True)
    ]
    doc = (
        compare_runs(sides[0], sides[1]) if kind == "runs" else hosts_runs(sides, index.get("mode", ONE_AFTER_ANOTHER))
    )
    return doc | {"inputs": ins}, None
