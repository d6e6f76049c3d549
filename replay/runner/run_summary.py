"""The end of a run and the checks during it: the finished run's summary, judged, and ``--abort-on-fail``'s check
of the live figures (the same for a run in real time and on the virtual clock)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from replay.history.gate import record
from replay.history.store import HistoryError
from replay.metrics.streaming import StreamSummary
from replay.metrics.summary_types import Summary
from replay.records.run_file import RunWriter
from replay.runner.rebuild import finish
from replay.runner.run_error import EXIT_INCOMPLETE, RunError
from replay.verdict.thresholds import parse_all


def run_summary(writer: RunWriter, stream: StreamSummary, compare_truth: bool = True) -> Summary:
    """A finished run's summary, judged, made as ``replay report`` makes it from the file (``rebuild.finish``, from
    the accumulators the writer fed: segments, windows, the recorded timeline, the baseline gate, and the truth
    check against the truth logs the file names, complete now that the host has stopped, unless
    ``compare_truth`` is False: the file was damaged under the run, and the check reads it back); with
    ``--history-file``, tonight added to the history once complete (replay.history.gate.record)."""
    try:
        data = stream.run_data(writer.header_data, writer.footer_data)
        summary = finish(stream, data, writer.path, compare_truth=compare_truth)
        if (data.header.get("history_gate") or {}).get("file"):  # tonight, once complete, is a night of the history
            record(summary.to_dict(), data.header, data.footer, writer.path)
    except HistoryError as exc:  # the run has run; its verdict cannot be given, nor tonight kept
        raise RunError(f"--history-file: {exc}", EXIT_INCOMPLETE) from None
    except ValueError as exc:  # a baseline that cannot be read: the run has run, its verdict cannot be given
        raise RunError(f"--baseline could not be read back after the run: {exc}", EXIT_INCOMPLETE) from None
    return summary


def check_history(path: str) -> None:
    """Before the run: ``--history-file`` names a history (or not made yet) and its change points can be found."""
    from replay.history.changes import ChangesUnavailable, require
    from replay.history.store import connect

    try:
        require()
        if Path(path).exists():
            connect(path).close()
    except (ChangesUnavailable, HistoryError) as exc:
        raise RunError(f"--history-file: {exc}") from None


def threshold_check(spec: Any, stream: StreamSummary, writer: RunWriter) -> Callable[[], str | None] | None:
    """For --abort-on-fail: a check the closed loop calls every few seconds (None: no check)."""
    if not (spec.abort_on_fail and spec.thresholds):
        return None
    thresholds = parse_all(spec.thresholds)

    def check() -> str | None:
        summary = stream.summary(writer.header_data).to_dict()
        if not summary["window"]["steady"]:
            return None  # before the steady window opens, figures are warm-up's
        breached = [r["expr"] for r in (t.judge(summary) for t in thresholds) if not r["ok"] and r["value"] is not None]
        return f"threshold breached: {', '.join(breached)}" if breached else None

    return check
