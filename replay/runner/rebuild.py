"""A run's summary finished: the one way it is made, live (``replay run``) and from its file (``replay report``,
``replay.summarize``).

Both feed the run's records to a ``StreamSummary`` (the live run as it writes them, the report as it reads them
back, a resumed run its earlier segments first), and ``finish`` makes the summary from it: the figures, then the
truth-log check, the segments, the windows over time, the replay beside its recorded timeline, the verdict of the
thresholds the header names, the baseline gate and the history gate. So ``replay run --json`` and ``replay report
RUN --json`` are the same JSON whatever the mode. The HTML and CSV reports need every record and read the file
again; a span (``--from``/``--to``) is summarised from the run's window records.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.history import gate as history_gate
from replay.metrics.goodput import CallSlo
from replay.metrics.host import speculation
from replay.metrics.recorded_timeline import TaskDrift, recorded
from replay.metrics.streaming import StreamSummary, read_stream
from replay.metrics.summary import header_slo
from replay.metrics.summary_types import Summary, Verdict
from replay.metrics.truth_compare import compare_file, find_truth_log
from replay.metrics.windows import has_windows, series, span
from replay.records.reader import read_run
from replay.records.run_file import RunData
from replay.verdict import baseline
from replay.verdict.judge import judge


@dataclass(slots=True)
class Rebuilt:
    summary: Summary
    data: RunData  # its requests are read only when asked for (records=True)
    drift: list[TaskDrift]  # per-task replayed vs recorded times (HTML)


def finish(
    stream: StreamSummary,
    data: RunData,
    run_file: str | Path,
    truth: str | Path | None = None,
    between: tuple[float | None, float | None] | None = None,
    compare_truth: bool = True,
) -> Summary:
    """The summary of the run ``stream`` holds (``data``: ``stream.run_data``), as written to ``run_file``:
    ``between`` (seconds after the start) summarises only the windows of that span; ``truth`` names a truth log
    (default: the one the header names, if it is there)."""
    if between is None:
        summary = stream.summary(data.header, data.footer)
        summary.recorded_timeline = stream.timeline.figures()
    else:
        if not has_windows(data):
            raise ValueError(f"{run_file}: the run has no window records to summarise a span from (run with --window)")
        lo, hi = between
        summary = span(data, lo or 0.0, hi if hi is not None else float("inf"))
        summary.span = {"from_s": lo or 0.0, "to_s": hi}
    truth = truth or find_truth_log(run_file, data.header)
    if truth and between is None and compare_truth:
        logs = [Path(truth), *_segment_truth_logs(run_file, data)]
        summary.truth = compare_file(run_file, logs, summary.requests)
    if data.later_phases or any(m["type"] == "segment" for m in data.marks):
        summary.segments = segments(data)
    if has_windows(data):
        summary.windows = series(data)
        if summary.host_figures.get("speculation") is None:  # no call said: the host's counters, if scraped
            lo, hi = between or (None, None)
            inside = [
                w
                for w in summary.windows
                if w["start_s"] >= (lo or 0.0) - 1e-9 and (hi is None or w["end_s"] <= hi + 1e-9)
            ]
            summary.host_figures["speculation"] = speculation.over_windows(inside)
    judged = judge(summary.to_dict(), data.header, data.footer)
    gate = data.header.get("baseline") or {}
    if gate.get("file") and between is None and Path(gate["file"]).is_file() and Path(gate["file"]) != Path(run_file):
        before = rebuild_run(gate["file"]).summary.to_dict()
        baseline.apply(judged, baseline.compare(judged, before, gate.get("tolerance", 0.1)), gate["file"])
        summary.baseline = judged["baseline"]
    if (data.header.get("history_gate") or {}).get("file") and between is None:
        history_gate.apply(judged, history_gate.judge(judged, data.header, run_file))
        summary.history = judged["history"]
    summary.thresholds, summary.verdict = judged["thresholds"], Verdict(**judged["verdict"])
    return summary


def rebuild_run(
    run_file: str | Path,
    truth: str | Path | None = None,
    records: bool = False,
    between: tuple[float | None, float | None] | None = None,
    slo: CallSlo | None = None,
) -> Rebuilt:
    """The summary of ``run_file`` (ValueError naming the file when it cannot be read), read once in flat memory;
    ``records`` also reads every record (the HTML and CSV reports); ``slo``: goodput judged at this per-call SLO
    instead of the run's own (``replay report --slo``)."""
    stream = StreamSummary(keep_tasks=True, recorded=lambda header: recorded(run_file, header), slo=slo)
    stream, data = read_stream(run_file, stream=stream)
    own = header_slo(data.header)
    if slo is not None and between is not None and (own is None or own.exprs != slo.exprs):
        own_text = own.expr if own else "none"
        raise ValueError(f"{run_file}: --slo with --from/--to: the window records were judged at the run's own SLO "
                         f"({own_text}); summarise the whole run to judge it at another")  # fmt: skip
    summary = finish(stream, data, run_file, truth, between)
    if records:
        full = read_run(run_file, notes=lambda _: None)  # the notes were said by the first pass
        full.marks = data.marks
        data = full
    return Rebuilt(summary, data, stream.timeline.rows if between is None else [])


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
