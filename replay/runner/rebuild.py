"""Rebuilding a run's figures from its file: the job behind ``replay report`` and ``replay.summarize``.

One pass over the file makes the summary in flat memory; the truth-log check, the HTML and CSV reports need every
record and read the file again; a span (``--from``/``--to``) is summarised from the run's window records; the
verdict is judged from the thresholds the header names, as the live run judged them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.metrics.recorded_timeline import recorded_timeline
from replay.metrics.streaming import summarize_file
from replay.metrics.truth_compare import compare_file, find_truth_log
from replay.metrics.windows import series, span, window_records
from replay.records.reader import read_run
from replay.records.run_file import RunData
from replay.verdict import baseline
from replay.verdict.judge import judge


@dataclass(slots=True)
class Rebuilt:
    summary: dict[str, Any]
    data: RunData  # its requests are read only when asked for (records=True, or a truth log to compare)
    drift: list[Any]  # per-task replayed vs recorded times (HTML)


def rebuild_run(
    run_file: str | Path,
    truth: str | Path | None = None,
    records: bool = False,
    between: tuple[float | None, float | None] | None = None,
) -> Rebuilt:
    """The summary of ``run_file`` (ValueError naming the file when it cannot be read); ``between`` (seconds after
    the start) summarises only the windows of that span."""
    summary, data = summarize_file(run_file)
    truth = truth or find_truth_log(run_file, data.header)
    if records:
        full = read_run(run_file, notes=lambda _: None)  # the notes were said by the first pass
        full.marks = data.marks
        data = full
    if between is not None:
        if not window_records(data):
            raise ValueError(f"{run_file}: the run has no window records to summarise a span from (run with --window)")
        lo, hi = between
        summary = span(data, lo or 0.0, hi if hi is not None else float("inf"))
        summary["span"] = {"from_s": lo or 0.0, "to_s": hi}
    if truth and between is None:
        logs = [Path(truth), *_segment_truth_logs(run_file, data)]
        summary["truth"] = compare_file(run_file, logs, summary["requests"])
    if data.later_phases or any(m["type"] == "segment" for m in data.marks):
        summary["segments"] = segments(data)
    if window_records(data):
        summary["windows"] = series(data)
    judge(summary, data.header, data.footer)
    gate = data.header.get("baseline") or {}
    if gate.get("file") and between is None and Path(gate["file"]).is_file() and Path(gate["file"]) != Path(run_file):
        before = rebuild_run(gate["file"]).summary
        baseline.apply(summary, baseline.compare(summary, before, gate.get("tolerance", 0.1)), gate["file"])
    drift: list[Any] = []
    if "breakdown" in summary and between is None:
        summary["breakdown"]["recorded_timeline"], drift = recorded_timeline(data, run_file)
    return Rebuilt(summary, data, drift)


def _segment_truth_logs(run_file: str | Path, data: RunData) -> list[Path]:
    """The truth logs a resumed run's later segments wrote (named in their segment records)."""
    found = []
    for mark in data.marks:
        if mark["type"] == "segment" and mark.get("simulated_truth_log"):
            path = find_truth_log(run_file, {"simulated_truth_log": mark["simulated_truth_log"]})
            if path:
                found.append(path)
    return found


def segments(data: RunData) -> list[dict[str, Any]]:
    """A resumed run's segments: when each began (wall clock), what ended the one before, and the gap between
    them (about: a segment's wall clock is taken when its header is written, a second or so before it starts)."""
    out: list[dict[str, Any]] = [{"index": 0, "created": data.header.get("created"), "after": None, "gap_s": None}]
    began, elapsed = (data.header.get("clock") or {}).get("unix"), 0.0
    for mark in data.marks:
        if mark["type"] != "segment":
            continue
        now, before = (mark.get("clock") or {}).get("unix"), mark.get("elapsed_before_s", 0.0)
        gap = now - (began + before - elapsed) if (now is not None and began is not None) else None
        out.append({"index": mark["index"], "created": mark.get("created"), "after": mark.get("after"), "gap_s": gap})
        began, elapsed = now, before
    return out
