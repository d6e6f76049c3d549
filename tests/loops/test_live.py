"""The progress line a newcomer reads: tasks done of total, time left, sessions in tool pauses and for how long."""

from __future__ import annotations

from time import perf_counter

from replay.loops.live import LiveState, ProgressLine
from replay.records.run_file import RequestRecord, TaskRecord


def _call(t_call: float, seconds: float) -> RequestRecord:
    return RequestRecord(id="r", session=0, task=0, trajectory="t", turn=0, t_call=t_call, t_sent=t_call,
                         t_done=t_call + seconds, output_events=10)  # fmt: skip


def test_the_line_counts_tasks_of_their_total_and_estimates_the_time_left() -> None:
    s = LiveState(tasks_total=4)
    s.tasks_started = 2
    now = perf_counter()
    for _ in range(4):
        s.request(_call(now - 10, 2.0))  # calls take 2 s
    s.turn(0, 3, 10.0)  # session 0: 3 calls and 10 s of pauses left
    s.turn(1, 1, 0.0)
    s.task(TaskRecord(task=9, session=5, trajectory="t", t_start=0, t_end=20, turns=1, turns_total=1,
                      model_time_s=1, tool_time_s=0, complete=True))  # fmt: skip
    left = s.time_left()
    # the slowest running session (3 × 2 s + 10 s), then two queued tasks over two sessions at 20 s each
    assert left is not None and abs(left - (16 + 20)) < 1e-6
    s.pausing(0, perf_counter() + 60)
    line = ProgressLine(s).line(draining=False)
    assert "tasks 1/4" in line and "about" in line and "s left" in line
    assert "1 session in tool pauses (longest ends in 60 s)" in line or "(longest ends in 59 s)" in line


def test_a_duration_run_says_how_long_is_left_and_no_estimate_before_any_call() -> None:
    s = LiveState(duration_s=300)
    assert LiveState(tasks_total=3).time_left() is None
    line = ProgressLine(s).line(draining=True)
    assert "s left" in line and "(draining)" in line and "tasks 0 " in line + " "
