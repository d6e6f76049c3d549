"""A sharded run's collector (``replay.scale.collect``): the workers summarise their own records and the parent merges
their parts, doing no per-record work, and the figures are exactly those of every record in the file: the live
summary equals the report's, the window records rebuild it, the Prometheus counters are the records' own."""

from __future__ import annotations

import itertools
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.metrics.streaming import StreamSummary, summarize_file
from replay.metrics.summary import steady_window, summarize
from replay.metrics.windows import Tee, WindowRecorder, rebuild
from replay.records.reader import read_run
from replay.records.run_file import RequestRecord, TaskRecord
from replay.reports.prometheus_export import PrometheusSink
from replay.scale.collect import Uncovered, WorkerCollector, plan
from tests.support.trajectories import simple_turns, write_trajectory


def _workload(tmp_path: Path) -> Path:
    path = tmp_path / "w.jsonl"
    for i in range(8):
        write_trajectory(path, f"w{i}", simple_turns(30, output_tokens=40 + i, tool_time_s=0.05))
    return path


def _run(tmp_path: Path, *args: str) -> tuple[Path, dict]:
    out = tmp_path / "run.jsonl"
    res = CliRunner().invoke(main, ["run", str(_workload(tmp_path)), "-c", "12", "--workers", "2", "--sim-profile",
                                    "fast", "--out", str(out), "-q", "--json", *args])  # fmt: skip
    assert res.exit_code == 0, res.output
    return out, orjson.loads(res.stdout)


def test_the_merged_live_summary_is_the_report_s(tmp_path: Path) -> None:
    out, live = _run(tmp_path, "--duration", "3", "--rate-card", "groq/gpt-oss-120b")
    run = read_run(out)
    assert run.phases["start"] < run.phases["steady_start"] < run.phases["stop"] < run.phases["end"]
    assert any(r.t_sent < run.phases["steady_start"] for r in run.requests)  # warm-up calls, left out
    assert any((r.t_done or 0) > run.phases["stop"] for r in run.requests)  # the drain, cut at the stop
    report = CliRunner().invoke(main, ["report", str(out), "--json"])
    rebuilt = orjson.loads(report.stdout)
    assert rebuilt == live  # the same figures, exactly (the truth log's and the recorded timeline's comparisons too)
    assert live["truth"]["matched"] == len(run.requests)
    assert summarize(run)["cost"] == live["cost"] and live["cost"]["priced_requests"] == len(run.requests)
    assert live["requests"] == len(run.requests) == run.footer["requests"]


def test_window_records_made_of_the_workers_parts_rebuild_the_whole_run(tmp_path: Path) -> None:
    out, _ = _run(tmp_path, "--duration", "4", "--window", "1")
    summary, data = summarize_file(out)
    windows = [m for m in data.marks if m["type"] == "window"]
    assert len(windows) >= 4 and all(a["t_end"] == b["t_start"] for a, b in itertools.pairwise(windows))
    assert rebuild(data, steady_window(read_run(out))) == summary  # every record is in exactly one window's part
    assert summarize(read_run(out)) == summary


def _rec(i: int, t: float) -> RequestRecord:
    stamps = {"t_sent": t, "t_headers": t + 0.01, "t_first_token": t + 0.02, "t_last_token": t + 0.5, "t_done": t + 0.5}
    return RequestRecord(id=f"r{i}", session=i % 4, task=i, trajectory="t", turn=0, status=200, output_tokens=10,
                         output_events=10, prompt_tokens=100, cached_tokens=50, chunks=[0.02, 1.0, 0.1, 9.0],
                         **stamps)  # fmt: skip


def test_a_record_is_placed_by_the_marks_made_before_its_end_and_only_then() -> None:
    """The worker holds a record until the parent's clock passes its end: by then it knows every mark that can
    place it, as the parent, writing it, did."""
    parent = Tee(StreamSummary())
    sent: list = []
    worker = WorkerCollector(sent.append, plan(parent), {}, 0.0)
    parent.phase("start", 0.0)
    worker.phase("start", 0.0)
    early, late = _rec(0, 1.0), _rec(1, 3.0)  # sent before the window opens at 2.0 / after it
    worker.request(early)
    worker.parent_clock(1.2)  # before early's end (1.5): not placed yet
    assert worker.summarised == 0
    worker.parent_clock(1.6)
    assert worker.summarised == 1
    worker.request(late)
    parent.phase("steady_start", 2.0)
    worker.phase("steady_start", 2.0)
    worker.parent_clock(3.6)
    worker.ship()
    kind, covered, part = sent[-1]
    assert kind == "part" and covered == 2
    parent.merge_part(part)
    alone = StreamSummary()
    alone.phase("start", 0.0)
    alone.request(_rec(0, 1.0))
    alone.phase("steady_start", 2.0)
    alone.request(_rec(1, 3.0))
    header = {"format": "replay.run/1"}
    assert parent.sinks[0].summary(header) == alone.summary(header)
    assert [m[0] for m in sent[:-1]] == ["line", "line"]


def test_the_lines_of_a_dead_worker_s_unshipped_records_are_summarised_by_the_parent() -> None:
    got: list = []

    class Sink:
        def request(self, r: RequestRecord) -> None:
            got.append(("request", r))

        def task(self, t: TaskRecord) -> None:
            got.append(("task", t))

    lines: list = []
    worker = WorkerCollector(lines.append, [], {}, 0.0)
    for i in range(3):
        worker.request(_rec(i, float(i)))
    worker.task(TaskRecord(0, 0, "t", 0.0, 3.0, 3, 3, 1.5, 1.5, True))
    uncovered = Uncovered()
    for _, is_request, line in lines:
        uncovered.add(is_request, line)
    uncovered.cover(2)  # a part covered the first two
    assert uncovered.summarise(Sink()) == 2
    assert [(k, getattr(r, "id", None)) for k, r in got] == [("request", "r2"), ("task", None)]
    assert got[0][1] == _rec(2, 2.0)  # the record itself, back from its line


def test_prometheus_counters_merged_from_parts_are_those_of_every_record() -> None:
    records = [_rec(i, float(i)) for i in range(50)]
    records[7].error = "timeout"
    one, merged = PrometheusSink("h"), PrometheusSink("h")
    parts = [PrometheusSink("h"), PrometheusSink("h")]
    for i, r in enumerate(records):
        one.request(r)
        parts[i % 2].request(r)
    for p in parts:
        merged.merge_part(p.take_part())
    assert merged.exposition() == one.exposition()
    assert b'replay_requests_total{host="h",outcome="timeout"} 1.0' in one.exposition()
    assert b'replay_ttft_seconds_count{host="h"} 49.0' in one.exposition()


def test_a_worker_mirrors_the_parent_s_sinks() -> None:
    sinks = Tee(StreamSummary(), WindowRecorder(60.0, 3), PrometheusSink("sim"))
    assert plan(sinks) == [("summary", None), ("windows", (60.0, 3)), ("prometheus", "sim")]
    assert plan(None) == []
    with pytest.raises(TypeError, match="cannot merge"):
        plan(Tee(object()))
