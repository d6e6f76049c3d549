"""A running run's window records are written out, not kept: its memory stays flat however many windows it writes,
and the records read back are the JSON the run file holds (so the figures over time are the report's)."""

from __future__ import annotations

import tracemalloc
from typing import Any

import orjson

from replay.metrics.streaming import StreamSummary
from replay.records.mark_log import MarkLog


def _window(index: int) -> dict[str, Any]:
    """A window record the size of a busy soak minute's: one entry per task that ended in it."""
    firsts = [[index * 500 + k, 1000.0 + index * 60 + k / 7, 0.001 * k] for k in range(500)]
    complete = [[index * 500 + k, True] for k in range(500)]
    return {"type": "window", "index": index, "t_start": index * 60.0, "t_end": index * 60.0 + 60.0,
            "steady": {"recipe": {"firsts": firsts}, "tasks_ended": {"complete": complete}},
            "other": {}, "host_metrics": {"x": 1.5}}  # fmt: skip


def test_windows_are_not_kept_in_memory() -> None:
    stream = StreamSummary()
    n, written = 60, 0
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(n):
            record = _window(i)
            written += len(orjson.dumps(record))
            stream.mark(record)
            del record
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert written > 1_000_000  # in memory, these records take several times that
    assert grown < written / 20, f"{grown:,} bytes kept for {n} window records of {written:,} bytes"
    assert len(stream.marks) == n


def test_records_read_back_as_written_in_order() -> None:
    log = MarkLog()
    segment = {"type": "segment", "index": 1, "after": "signal"}
    records = [_window(0), segment, _window(1), _window(2)]
    for r in records:
        log.append(r)
    assert log.kept_in_memory() == 1  # the segment
    assert list(log) == [orjson.loads(orjson.dumps(r)) for r in records]
    assert log[2] == orjson.loads(orjson.dumps(records[2]))
    assert [m["index"] for m in log[1:3]] == [1, 1]
    assert [m["type"] for m in log if m["type"] == "window"] == ["window"] * 3


def test_run_data_hands_the_log_to_the_reports() -> None:
    stream = StreamSummary()
    stream.mark(_window(0))
    stream.mark(_window(1))
    data = stream.run_data({"format": 1}, None)
    assert [m["index"] for m in data.marks if m["type"] == "window"] == [0, 1]


def test_without_temporary_space_the_windows_are_kept_in_memory(monkeypatch: Any) -> None:
    def full(*_a: Any, **_k: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("replay.records.mark_log.tempfile.mkstemp", full)
    log = MarkLog()
    for i in range(3):
        log.append(_window(i))
    assert log.kept_in_memory() == 3
    assert [orjson.dumps(r) for r in log] == [orjson.dumps(_window(i)) for i in range(3)]
