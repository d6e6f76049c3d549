"""``replay compare A B``: two runs (or two sweeps) side by side, every headline figure with its ratio B/A, each
difference judged against run-to-run noise, and what each costs where a price is known.

Figures and their order come from ``replay.metrics.level_figures.FIGURES``; the point estimates are the two
summaries' own figures, so a ratio is exactly the quotient of what ``replay report`` prints for each run. The
noise is a bootstrap of each run on its own (replay.metrics.bootstrap): a difference counts only when the 95 %
interval of the ratio leaves out 1. Two sweeps compare level by level where they share a concurrency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from replay.histogram import RATIO, percentiles
from replay.hosts.hardware import Hardware, costs, hardware_of_run
from replay.metrics.agreement import agreement
from replay.metrics.bootstrap import RESAMPLES, bootstrap, describe
from replay.metrics.level_figures import FIGURES, value
from replay.records.reader import read_run
from replay.records.run_file import RunData
from replay.studies.study_files import rebuild

COMPARE_FORMAT = "replay.compare/1"


@dataclass(slots=True)
class Side:
    """One run of a comparison: its name, summary and records (None when only a summary exists)."""

    name: str
    summary: dict[str, Any]
    data: RunData | None = None
    path: str | None = None
    hardware: Hardware = field(default_factory=Hardware)
    concurrency: int | None = None

    def meta(self) -> dict[str, Any]:
        h = (self.data.header if self.data else {}) or {}
        host = h.get("host") or {}
        sim = h.get("simulated_host")
        return {
            "name": self.name,
            "path": self.path,
            "host": f"sim:{sim}" if sim else host.get("base_url"),
            "base_url": host.get("base_url"),
            "model": host.get("model"),
            "simulated_host": h.get("simulated_host"),
            "concurrency": self.concurrency,
            "workload_digest": (h.get("workload") or {}).get("digest"),
            "seed": (h.get("load") or {}).get("seed"),
            "hardware": self.hardware.public(),
        }


def side_from_file(path: str | Path, name: str | None = None, hardware: Hardware | None = None) -> Side:
    """A run file as one side: its records, its summary (truth check included) and its host's hardware."""
    path = Path(path)
    rebuilt = rebuild(path, records=True)
    data = rebuilt.data
    h = data.header
    concurrency = (h.get("load") or {}).get("concurrency")
    hw = hardware or hardware_of_run(h)
    return Side(name or path.stem, rebuilt.summary.to_dict(), data, str(path), hw, concurrency)


def _interval(a: np.ndarray | None, b: np.ndarray | None) -> list[float] | None:
    if a is None or b is None:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        r = b / a
    r = r[np.isfinite(r)]
    if r.size < 0.9 * a.size:  # too many draws without a figure: no honest interval
        return None
    lo, hi = percentiles(r, (2.5, 97.5), RATIO).values()
    return [lo, hi] if lo is not None and hi is not None else None


def _verdict(ratio: float | None, ci: list[float] | None, better: str) -> tuple[str, bool | None]:
    """('higher' | 'lower' | 'within noise' | 'no noise estimate' | 'not measured', is B better?)."""
    if ratio is None:
        return "not measured", None
    if ci is None:
        return "no noise estimate", None
    if ci[0] > 1:
        return "higher", better == "higher"
    if ci[1] < 1:
        return "lower", better == "lower"
    return "within noise", None


def compare_figures(a: Side, b: Side, resamples: int = RESAMPLES, seed: int = 0) -> list[dict[str, Any]]:
    """Every headline figure of A and B, the ratio B/A, its interval and the verdict."""
    keys = [f.key for f in FIGURES]
    boot_a = bootstrap(a.data, keys, resamples, seed) if a.data else {}
    boot_b = bootstrap(b.data, keys, resamples, seed + 1) if b.data else {}
    rows = []
    for f in FIGURES:
        va, vb = value(a.summary, f.key), value(b.summary, f.key)
        ratio = vb / va if va not in (None, 0) and vb is not None else None
        ci = _interval(boot_a.get(f.key), boot_b.get(f.key)) if ratio is not None else None
        verdict, b_better = _verdict(ratio, ci, f.better)
        if va == 0 and vb is not None:  # nothing to divide by: the same (0 and 0), or B has what A has not
            ratio, verdict, b_better = (1.0, "equal", None) if vb == 0 else (None, "higher", f.better == "higher")
        rows.append(
            {
                "figure": f.key,
                "label": f.label,
                "unit": f.unit,
                "better": f.better,
                "a": va,
                "b": vb,
                "ratio": ratio,
                "ci": ci,
                "verdict": verdict,
                "b_better": b_better,
            }
        )
    return rows


def notes(a: Side, b: Side) -> list[str]:
    """What makes the comparison less than like for like."""
    ma, mb = a.meta(), b.meta()
    out = []
    if ma["workload_digest"] != mb["workload_digest"]:
        out.append("the two runs replayed different workloads (digests differ)")
    elif ma["seed"] != mb["seed"]:
        out.append("same workload, different seeds: the task order differs")
    if ma["concurrency"] != mb["concurrency"]:
        out.append(f"different concurrency: {ma['concurrency']} against {mb['concurrency']}")
    return out


def compare_runs(a: Side, b: Side, resamples: int = RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """The comparison of two runs as JSON (``replay compare A B --json``)."""
    return {
        "format": COMPARE_FORMAT,
        "kind": "runs",
        "a": a.meta(),
        "b": b.meta(),
        "noise": describe(resamples),
        "figures": compare_figures(a, b, resamples, seed),
        "costs": {
            "a": costs(a.summary, a.concurrency or 1, a.hardware),
            "b": costs(b.summary, b.concurrency or 1, b.hardware),
        },
        "notes": notes(a, b),
        **answers_agree(a, b),
    }


def answers_agree(a: Side, b: Side) -> dict[str, Any]:
    """``agreement`` of the two runs' answers (replay run --host A --host B keeps them; when a run kept none, its
    ``why`` says so); none without both runs' records."""
    if a.data is None or b.data is None:
        return {}
    kept = [
        bool((run.header.get("request") or {}).get("keep_answers")) or any(r.answer_text for r in run.requests)
        for run in (a.data, b.data)
    ]
    return {"agreement": agreement(a.data.requests, b.data.requests, kept=(kept[0], kept[1]))}


def _level_side(sweep: dict[str, Any], level: dict[str, Any], name: str) -> Side:
    hw = Hardware.from_public(sweep.get("hardware"))
    run = level.get("run_file")
    data = read_run(run, notes=lambda _: None) if run and Path(run).exists() else None
    summary = {
        k: v for k, v in level.items() if k not in ("concurrency", "run_file", "per_gpu", "slo_ok", "slo_checks")
    }
    return Side(f"{name} c={level['concurrency']}", summary, data, run, hw, level["concurrency"])


def compare_sweeps(
    a: dict[str, Any], b: dict[str, Any], names: tuple[str, str], resamples: int = RESAMPLES, seed: int = 0
) -> dict[str, Any]:
    """Two sweeps level by level (where they share a concurrency), with each one's knee and frontier."""
    by_c = {lv["concurrency"]: lv for lv in b["levels"]}
    levels = []
    for la in a["levels"]:
        lb = by_c.get(la["concurrency"])
        if lb is not None:
            sa, sb = _level_side(a, la, names[0]), _level_side(b, lb, names[1])
            levels.append({"concurrency": la["concurrency"], "figures": compare_figures(sa, sb, resamples, seed)})
    only = sorted({lv["concurrency"] for lv in a["levels"]} ^ set(by_c))
    return {
        "format": COMPARE_FORMAT,
        "kind": "sweeps",
        "a": {"name": names[0], "host": a.get("host"), "mode": a.get("mode"), "hardware": a.get("hardware")},
        "b": {"name": names[1], "host": b.get("host"), "mode": b.get("mode"), "hardware": b.get("hardware")},
        "noise": describe(resamples),
        "levels": levels,
        "knee": {"a": a.get("knee"), "b": b.get("knee")},
        "frontier": {"a": a.get("frontier"), "b": b.get("frontier")},
        "notes": [f"levels in only one sweep, left out: {only}"] if only else [],
    }
