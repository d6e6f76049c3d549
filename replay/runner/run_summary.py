"""The end of a run and the checks during it: the finished run's summary, judged, and ``--abort-on-fail``'s check
of the live figures (the same for a run in real time and on the virtual clock)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from replay.metrics.streaming import StreamSummary
from replay.metrics.truth_compare import compare_file
from replay.records.run_file import RunWriter
from replay.runner.rebuild import rebuild_run
from replay.runner.run_error import RunError
from replay.verdict.judge import judge
from replay.verdict.thresholds import parse_all


def run_summary(writer: RunWriter, stream: StreamSummary, one_piece: bool, truth_log: Path | None = None) -> Any:
    """A finished run's summary, judged: from the live accumulator when the file is one piece, else as the report
    reads the file back (segments and windows, its baseline gate included); the truth check when the host left a
    truth log."""
    if not one_piece:
        try:
            return rebuild_run(writer.path).summary
        except ValueError as exc:  # a baseline that cannot be read
            raise RunError(f"--baseline: {exc}") from None
    summary = stream.summary(writer.header_data, writer.footer_data)  # as `replay report` reads the file back
    if truth_log is not None and truth_log.exists():  # complete: the host has stopped
        summary["truth"] = compare_file(writer.path, [truth_log], summary["requests"])
    judge(summary, writer.header_data, writer.footer_data)
    return summary


def threshold_check(spec: Any, stream: StreamSummary, writer: RunWriter) -> Callable[[], str | None] | None:
    """For --abort-on-fail: a check the closed loop calls every few seconds (None: no check)."""
    if not (spec.abort_on_fail and spec.thresholds):
        return None
    thresholds = parse_all(spec.thresholds)

    def check() -> str | None:
        summary = stream.summary(writer.header_data)
        if not summary["window"]["steady"]:
            return None  # before the steady window opens, figures are warm-up's
        breached = [r["expr"] for r in (t.judge(summary) for t in thresholds) if not r["ok"] and r["value"] is not None]
        return f"threshold breached: {', '.join(breached)}" if breached else None

    return check
