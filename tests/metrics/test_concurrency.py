"""The lane tally behind ``concurrency``: what each lane was doing per second, from hand-made records whose answer
is known; parts of a run (windows, workers) merge and travel as JSON to the same figures."""

from __future__ import annotations

import pytest

from replay.metrics.concurrency import LaneTally, concurrency_figures
from replay.records.run_file import RequestRecord, TaskRecord
from replay.verdict.judge import judge

HEADER = {"load": {"concurrency": 2}}
FOOTER = {"sessions": 2, "stop_reason": "duration"}


def _call(lane: int, sent: float, done: float, call: float | None = None, parent: str | None = None) -> RequestRecord:
    return RequestRecord(id=f"{lane}-{sent}", session=lane, task=lane, trajectory="t", turn=0, t_sent=sent,
                         t_done=done, t_call=call, parent=parent)  # fmt: skip


def _task(lane: int, start: float, end: float) -> TaskRecord:
    return TaskRecord(task=lane, session=lane, trajectory="t", t_start=start, t_end=end, turns=1, turns_total=1,
                      model_time_s=0.0, tool_time_s=0.0, complete=True)  # fmt: skip


def _records() -> tuple[list[RequestRecord], list[TaskRecord]]:
    """Lane 0: a task 10.0-14.0 with calls 10.0-10.5 and 12.5-13.5 (begun at 12.25), a subagent's call 11.0-12.0
    inside its pause; lane 1: a task 11.5-14.0 with one call 11.5-12.5, idle before it."""
    calls = [_call(0, 10.0, 10.5), _call(0, 12.5, 13.5, call=12.25), _call(0, 11.0, 12.0, parent="t"),
             _call(1, 11.5, 12.5)]  # fmt: skip
    return calls, [_task(0, 10.0, 14.0), _task(1, 11.5, 14.0)]


def _tally(calls: list[RequestRecord], tasks: list[TaskRecord]) -> LaneTally:
    tally = LaneTally()
    for r in calls:
        tally.add(r)
    for t in tasks:
        tally.add_task(t)
    return tally


def test_each_second_says_how_many_lanes_were_in_a_call_in_a_pause_and_idle() -> None:
    f = concurrency_figures(_tally(*_records()), ((10.0, 14.0),), True, HEADER, FOOTER)
    # seconds 10..13: in a call 0.5, 0.5 (lane 1), 0.5 + 0.75 (lane 1; lane 0 from 12.25, when it asked), 0.5
    # (lane 0); the subagent's call is not counted
    assert f.seconds == 4 and f.made_calls == 2
    assert f.in_call_mean == pytest.approx(2.75 / 4) and f.in_call_min == pytest.approx(0.5)
    assert f.client_wait_mean == pytest.approx(0.25 / 4)  # of which lane 0 waited on the client 12.25-12.5
    # in a task: 1, 1.5, 2, 2 lane-seconds
    assert f.active_mean == pytest.approx(6.5 / 4) and f.active_min == pytest.approx(1.0)
    assert f.active_share == pytest.approx(6.5 / 8) and f.idle_mean == pytest.approx(2 - 6.5 / 4)
    assert f.in_tool_mean == pytest.approx(f.active_mean - f.in_call_mean)
    assert f.judged and f.delivered is False and "of its 2 lanes active" in (f.shortfall or "")


def test_a_lane_between_two_tasks_is_taking_its_next_in_a_closed_loop_and_idle_in_an_open_one() -> None:
    """Lane 0: tasks 10.0-11.2 and 11.6-14.0 (the 0.4 s between: taking the next task, or waiting for an arrival);
    lane 1: one task over the whole window. Sent in two parts, as a worker ships them or a soak's windows hold them,
    the gap between the parts is found as it is in one pass."""
    tasks = [_task(0, 10.0, 11.2), _task(1, 10.0, 14.0), _task(0, 11.6, 14.0)]
    whole = _tally([], tasks)
    merged = LaneTally()
    for part in (_tally([], tasks[:2]), _tally([], tasks[2:])):
        merged.merge(LaneTally.decode(part.encode()))
    open_header = {"load": {"concurrency": 2}, "open_loop": {"arrivals": "poisson:5", "max_live": 2}}
    for tally in (whole, merged):
        closed = concurrency_figures(tally, ((10.0, 14.0),), True, HEADER, FOOTER)
        assert closed.between_tasks_mean == pytest.approx(0.4 / 4) and closed.active_share == pytest.approx(1.0)
        assert closed.active_min == pytest.approx(2.0) and closed.delivered
        opened = concurrency_figures(tally, ((10.0, 14.0),), True, open_header, FOOTER)
        assert opened.active_mean == pytest.approx(2 - 0.4 / 4) and opened.active_min == pytest.approx(1.6)


def test_only_the_whole_seconds_of_the_window_count() -> None:
    f = concurrency_figures(_tally(*_records()), ((10.4, 13.6),), True, HEADER, FOOTER)
    assert f.seconds == 2 and f.in_call_mean == pytest.approx(1.75 / 2)  # seconds 11 and 12
    empty = concurrency_figures(_tally(*_records()), ((10.4, 11.6),), True, HEADER, FOOTER)
    assert empty.seconds == 0 and empty.active_share is None and not empty.judged


def test_parts_merged_and_sent_as_json_give_the_same_figures() -> None:
    calls, tasks = _records()
    whole = concurrency_figures(_tally(calls, tasks), ((10.0, 14.0),), True, HEADER, FOOTER)
    merged = LaneTally()
    for part in (_tally(calls[:2], tasks[:1]), _tally(calls[2:], tasks[1:])):
        merged.merge(LaneTally.decode(part.encode()))
    assert concurrency_figures(merged, ((10.0, 14.0),), True, HEADER, FOOTER) == whole


def test_a_run_that_delivered_less_than_asked_exits_3_and_one_measured_whole_or_resumed_is_not_judged() -> None:
    tally = _tally(*_records())
    short = concurrency_figures(tally, ((10.0, 14.0),), True, HEADER, FOOTER)
    verdict = judge({"requests": 4, "concurrency": short.to_dict()}, {}, FOOTER)["verdict"]
    assert verdict == {"passed": False, "exit_code": 3, "reasons": [short.shortfall], "warnings": []}
    whole = concurrency_figures(tally, ((10.0, 14.0),), False, HEADER, FOOTER)
    assert not whole.judged and judge({"requests": 4, "concurrency": whole.to_dict()}, {}, FOOTER)["verdict"]["passed"]
    resumed = concurrency_figures(tally, ((10.0, 12.0), (12.0, 14.0)), True, HEADER, FOOTER)
    assert not resumed.judged and resumed.active_share == short.active_share  # the same seconds, not judged


def test_an_open_loop_is_judged_by_its_arrivals() -> None:
    header = {"load": {"concurrency": 2}, "open_loop": {"arrivals": "poisson:5", "max_live": 2}}
    kept = {"sessions": 2, "open_loop": {"arrived": 20, "never_started": 1}}
    behind = {"sessions": 2, "open_loop": {"arrived": 20, "never_started": 2}}
    ok = concurrency_figures(_tally(*_records()), ((10.0, 14.0),), True, header, kept)
    assert (ok.arrivals_asked, ok.arrivals_started, ok.delivered) == (20, 19, True)  # idle lanes: few arrivals
    late = concurrency_figures(_tally(*_records()), ((10.0, 14.0),), True, header, behind)
    assert late.delivered is False and "18 of 20 arrivals started" in (late.shortfall or "")


def test_before_the_footer_the_lanes_activity_is_not_said() -> None:
    """Mid-run (--abort-on-fail's check), the running tasks have no records yet: their pauses would read as idle."""
    f = concurrency_figures(_tally(*_records()), ((10.0, 14.0),), True, HEADER, None)
    assert f.in_call_mean == pytest.approx(2.75 / 4)  # the calls' records are there
    assert (f.active_mean, f.active_share, f.active_min, f.idle_mean, f.in_tool_mean) == (None,) * 5
    assert not f.judged and f.shortfall is None
