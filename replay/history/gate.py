"""The gate on a history (``replay run --history-file FILE``): does tonight start a worse regime?

Tonight is judged among the nights of its series that ran before it (a night added later, or tonight's own row
once added, is left out: ``replay report`` on tonight's file judges it the same, whenever it is asked). A gated
figure (every figure of replay.verdict.baseline.FIGURES) regressed when a change point is found at tonight in its
worse direction (replay.history.changes: beyond the noise and significant). A regression fails the run with code
2, as the baseline gate does; the same unjudged rule holds: tonight's client held up or saturated makes a
regression its own (exit code 3, ``unjudged`` says why). Earlier nights whose client set their figures are in the
history but out of the judgement. The first nights of a series only build its regime: fewer than
``changes.MIN_BEFORE`` judged nights before tonight judge nothing (``note`` says so).

Tonight is added to the history only once its run is complete (``record``, after the footer): a run killed
part-way leaves the history as it was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sqlite3
from pathlib import Path
from typing import Any

from replay.history.changes import MIN_BEFORE
from replay.history.report import figure_changes
from replay.history.store import FIGURE_NAMES, HistoryError, Night, add, connect, night_from, nights
from replay.verdict.baseline import _client_limited
from replay.verdict.judge import _incomplete


def _tonight(header: dict[str, Any], summary: dict[str, Any], run_file: str | Path) -> tuple[Night, tuple[Any, Any]]:
    run, rows = night_from(header, summary, str(Path(run_file).resolve()))
    figures = {name: (value, noise, n) for _, name, value, noise, n, _ in rows}
    night = Night(run["run_id"], run["path"], run["started"], run["created"], run["series"], {}, {}, run["unjudged"],
                  figures)  # fmt: skip
    return night, (run, rows)


def _before(path: str, night: Night) -> list[Night]:
    """The nights of tonight's series that ran before it (none when the history is not made yet)."""
    if not Path(path).is_file():
        return []
    db = connect(path)
    try:
        found = nights(db)
    finally:
        db.close()
    start = night.started if night.started is not None else math.inf
    return [n for n in found if n.series == night.series and n.run_id != night.run_id and (n.started or 0) <= start]


def judge(summary: dict[str, Any], header: dict[str, Any], run_file: str | Path) -> dict[str, Any]:
    """Tonight (``summary``, its run's ``header``) against the history the header names: per figure the change
    point found at tonight (None: none), ``regressed`` the figures that started a worse regime tonight."""
    path = header["history_gate"]["file"]
    night, _ = _tonight(header, summary, run_file)
    earlier = _before(path, night)
    judged_before = sum(1 for n in earlier if not n.unjudged)
    rows, regressed = {}, []
    tonight = dataclasses.replace(night, unjudged=None)  # judged by its figures; its client's say comes after
    for name in FIGURE_NAMES:
        found = [c for c in figure_changes([*earlier, tonight], name) if c["run_id"] == night.run_id]
        rows[name] = {"value": night.figures[name][0], "noise": night.figures[name][1],
                      "change_point": found[0] if found else None}  # fmt: skip
        if found and found[0]["direction"] == "worse":
            regressed.append(name)
    why = _client_limited(summary) if regressed else None
    unjudged = f"tonight's figures are not the host's: {why}" if why else None
    note = None
    if judged_before < MIN_BEFORE:
        note = (f"{judged_before} judged night(s) of this series before tonight: its first {MIN_BEFORE} build its "
                "regime, nothing to judge against yet")  # fmt: skip
    return {"file": path, "series": night.series, "nights_before": len(earlier), "judged_before": judged_before,
            "note": note, "figures": rows, "judged": unjudged is None, "unjudged": unjudged,
            "regressed": [] if unjudged else regressed}  # fmt: skip


def apply(summary: dict[str, Any], result: dict[str, Any]) -> None:
    """Put the judgement in the summary and fail its verdict: code 2 when tonight started a worse regime, 3 when
    that could not be judged (a breached threshold keeps its 2)."""
    summary["history"] = result
    verdict = summary.get("verdict")
    if verdict is None:
        return
    if result.get("unjudged"):
        verdict["reasons"].append(f"the history gate was not judged: {result['unjudged']}")
        if verdict["exit_code"] == 0:
            verdict["exit_code"], verdict["passed"] = 3, False
        return
    if result["regressed"]:
        verdict["reasons"].append("started a worse regime in the history: " + ", ".join(result["regressed"]))
        if verdict["exit_code"] == 0:
            verdict["exit_code"], verdict["passed"] = 2, False


def record(
    summary: dict[str, Any], header: dict[str, Any], footer: dict[str, Any] | None, run_file: str | Path
) -> bool:
    """Add tonight to the history the header names when its run is complete (a footer, nothing that made it
    incomplete, no signal); True when added. HistoryError naming the file when it cannot be written."""
    if footer is None or footer.get("signal") or _incomplete(summary, footer):
        return False
    _, (run, rows) = _tonight(header, summary, run_file)
    path = header["history_gate"]["file"]
    db = connect(path, create=True)
    try:
        with contextlib.closing(db):
            add(db, run, rows)
    except sqlite3.Error as exc:
        raise HistoryError(f"{path}: tonight could not be added: {exc}") from None
    return True
