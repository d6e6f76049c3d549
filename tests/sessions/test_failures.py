"""Failures as users meet them: retries and throttled time, honest task accounting, thresholds and exit codes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.records.reader import read_run
from tests.support.trajectories import simple_turns, write_trajectory


def _workload(tmp_path: Path, n: int = 6, turns: int = 10) -> Path:
    path = tmp_path / "w.jsonl"
    for i in range(n):
        write_trajectory(path, f"w{i}", simple_turns(turns, output_tokens=12))
    return path


def _run(tmp_path: Path, *args: str) -> tuple[int, dict, Path]:
    out = tmp_path / "run.jsonl"
    res = CliRunner().invoke(
        main,
        ["run", str(_workload(tmp_path)), "-c", "4", "--sim-profile", "fast", "--tool-time", "none",
         "--sim-truth-log", str(tmp_path / "truth.jsonl"), "--out", str(out), "--json", "-q", *args],
    )  # fmt: skip
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res.exit_code, orjson.loads(res.stdout), out


def _truth(tmp_path: Path) -> list[dict]:
    return [orjson.loads(line) for line in (tmp_path / "truth.jsonl").read_bytes().splitlines()]


FAULTS = "429:0.1:retry-after=0.2,500:0.02,drop:0.01"


def test_retries_honour_retry_after_and_every_attempt_is_a_record(tmp_path: Path) -> None:
    code, summary, out = _run(tmp_path, "--sim-faults", FAULTS, "--sim-fault-seed", "4", "--retries", "6",
                              "--retry-partial")  # fmt: skip
    truth = _truth(tmp_path)
    run = read_run(out)
    assert len(run.requests) == len(truth)  # one attempt record per request the host saw
    assert {r.id for r in run.requests} == {t["request_id"] for t in truth}
    assert code == 0 and summary["verdict"]["passed"] and summary["error_rate"] == 0  # retried until they passed
    assert summary["attempt_error_rate"] > 0.05
    assert summary["tasks"]["complete"] == 6 and summary["tasks"]["failed"] == 0
    honoured = sum(t["retry_after"] for t in truth if t.get("fault") == "429")
    assert honoured > 0 and summary["tasks"]["throttled_time_total_s"] >= honoured
    retried = [r for r in run.requests if r.attempt > 1]
    assert summary["retries"] == len(retried) > 0
    for rec in run.requests:  # a retried call's wait is what its predecessor's Retry-After asked
        if not rec.final:
            follower = next(r for r in retried if (r.task, r.turn, r.attempt) == (rec.task, rec.turn, rec.attempt + 1))
            if rec.error == "http_429":
                assert follower.wait_s >= 0.2
    assert summary["tasks"]["attempts_per_turn"] > 1


def test_without_retries_the_same_faults_are_errors_and_fail_the_run(tmp_path: Path) -> None:
    code, summary, _ = _run(tmp_path, "--sim-faults", FAULTS, "--sim-fault-seed", "4", "--retries", "0")
    truth = _truth(tmp_path)
    faulted = sum(1 for t in truth if t.get("fault") in ("429", "500", "drop"))
    assert summary["errors"] == faulted and summary["retries"] == 0
    assert summary["error_rate"] == summary["attempt_error_rate"] > 0.10 and code == 2
    assert summary["tasks"]["failed"] > 0  # a task with a failed call is not complete
    assert summary["tasks"]["complete"] + summary["tasks"]["failed"] + summary["tasks"]["partial"] == 6


def test_a_breached_threshold_exits_2_and_names_itself(tmp_path: Path) -> None:
    code, summary, out = _run(tmp_path, "--sim-faults", "500:0.05", "--sim-fault-seed", "2", "--retries", "0",
                              "--threshold", "error_rate<1%", "--threshold", "ttft_p95<10s")  # fmt: skip
    assert 0.01 < summary["error_rate"] < 0.10 and code == 2
    assert summary["thresholds"][0] == {"expr": "error_rate<1%", "ok": False, "value": summary["error_rate"],
                                        "figure": "error_rate"}  # fmt: skip
    assert summary["thresholds"][1]["ok"] is True
    text = CliRunner().invoke(main, ["report", str(out)]).output
    assert "threshold error_rate<1%" in text and "BREACHED" in text and "exit code 2" in text


def test_end_task_stops_a_task_at_its_failed_turn(tmp_path: Path) -> None:
    _code, summary, out = _run(tmp_path, "--sim-faults", "500:0.1", "--sim-fault-seed", "1", "--retries", "0",
                              "--on-error", "end-task")  # fmt: skip
    run = read_run(out)
    failed = [t for t in run.tasks if t.status == "failed"]
    assert failed and all(t.ended_by == "end-task" and t.turns < t.turns_total for t in failed)
    for t in failed:  # nothing was sent for the task after its failed turn
        calls = [r for r in run.requests if r.task == t.task]
        assert max(calls, key=lambda r: r.turn).error == "http_5xx"
    assert summary["tasks"]["failed"] == len(failed)


def test_abort_stops_the_run_and_exits_3(tmp_path: Path) -> None:
    code, summary, out = _run(tmp_path, "--sim-faults", "500:0.1", "--sim-fault-seed", "1", "--retries", "0",
                              "--on-error", "abort")  # fmt: skip
    footer = read_run(out).footer
    assert footer is not None and footer["stop_reason"].startswith("aborted: turn ")
    assert code == 3 and "could not complete" in summary["verdict"]["reasons"][-1]


def test_context_overflow_is_its_own_class_and_ends_the_task(tmp_path: Path) -> None:
    _code, summary, out = _run(tmp_path, "--sim-faults", "overflow:0.05", "--sim-fault-seed", "3")
    run = read_run(out)
    overflowed = [r for r in run.requests if r.error == "context_overflow"]
    assert overflowed and summary["errors_by_class"] == {"context_overflow": len(overflowed)}
    for rec in overflowed:
        task = next(t for t in run.tasks if t.task == rec.task)
        assert task.ended_by == "context_overflow" and task.turns == rec.turn + 1


def test_max_rpm_waits_are_throttled_time_and_end_at_the_stop(tmp_path: Path) -> None:
    _code, summary, out = _run(tmp_path, "--max-rpm", "6", "--duration", "2", "--warmup", "0")
    run = read_run(out)
    stop = run.phases["stop"]
    assert all(r.t_call < stop for r in run.requests)  # no call started after the stop
    assert run.phases["end"] < run.phases["start"] + 60  # the waits ended at the stop, not at the next minute's slot
    assert len(run.requests) == 6  # the minute's six calls at once, then waits until the stop
    waited = sum(t.throttled_time_s for t in run.tasks)
    assert [t.throttled_time_s > 0 for t in run.tasks] == [True] * 4  # all four sessions waited for a slot
    assert waited <= 4 * (stop - run.phases["start"]) + 1e-5  # ... each at most until the stop
    assert summary["tasks"]["throttled_time_total_s"] == pytest.approx(waited, abs=1e-5)  # summed in µs
