"""A sweep's levels as CSV, one row per level, for spreadsheets: the headline figures of replay.metrics.level_figures
(with dotted keys as column names), plus the throughput per GPU and whether the level met the SLO; and, for a sweep
judged at a per-call SLO (``--slo``), each level's goodput (docs/metrics.md, Goodput)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from replay.metrics.level_figures import FIGURES, value

GOODPUT = ("goodput.calls_met_share", "goodput.tasks_met_share", "goodput.output_tps", "goodput.total_tps")


def write_levels_csv(sweep: dict[str, Any], path: str | Path) -> Path:
    """Write ``path`` (its directory made if missing) and return it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = [
        "concurrency",
        *[f.key for f in FIGURES],
        "per_gpu.total_tps",
        "per_gpu.output_tps",
        "slo_ok",
        "run_file",
    ]
    goodput = GOODPUT if sweep.get("goodput_slo") else ()
    columns[-1:-1] = goodput
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for lv in sweep["levels"]:
            cells = [lv["concurrency"], *[value(lv, fig.key) for fig in FIGURES]]
            cells += [lv["per_gpu"]["total_tps"], lv["per_gpu"]["output_tps"], lv.get("slo_ok")]
            cells += [*(value(lv, key) for key in goodput), lv.get("run_file")]
            w.writerow(["" if c is None else (int(c) if isinstance(c, bool) else c) for c in cells])
    return path
