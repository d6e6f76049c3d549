"""A soak survives its client: killed with SIGKILL mid-run and resumed, the run file holds one run of two segments,
with no finished request lost or counted twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.records.reader import read_run
from tests.support.trajectories import simple_turns, write_trajectory


def _lines(path: Path, kind: bytes) -> list[dict]:
    tag = b'"type":"' + kind + b'"'
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if tag in line and line.endswith(b"}")]


def test_sigkill_then_resume_keeps_every_request_once(tmp_path: Path) -> None:
    work = tmp_path / "w.jsonl"
    for i in range(6):
        write_trajectory(work, f"w{i}", simple_turns(40, output_tokens=30, tool_time_s=0.05))
    out = tmp_path / "run.jsonl"
    args = [str(work), "-c", "4", "--sim-profile", "fast", "--duration", "8", "--window", "1", "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "replay", "run", *args, "-q"], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while (out.read_bytes().count(b'"type":"window"') < 2 if out.exists() else True) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a condition on disk, not standing in for synchronisation
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    before = {r["id"] for r in _lines(out, b"request")}
    assert before and b'"type":"footer"' not in out.read_bytes()

    res = CliRunner().invoke(main, ["run", *args[:-2], "--resume", str(out), "--json", "-q"])
    assert res.exit_code == 0, res.output
    summary = orjson.loads(res.stdout)
    requests = _lines(out, b"request")
    ids = [r["id"] for r in requests]
    assert len(ids) == len(set(ids)) and before <= set(ids) and len(ids) > len(before)
    assert summary["requests"] == len(requests)  # both segments, each request once
    assert [s["index"] for s in summary["segments"]] == [0, 1] and summary["segments"][1]["after"].startswith("killed")
    windows = _lines(out, b"window")
    assert [w["index"] for w in windows] == list(range(len(windows)))  # numbering goes on across segments
    tasks = {t["task"] for t in _lines(out, b"task")}
    assert len(tasks) == len(_lines(out, b"task"))  # no task replayed twice
    assert summary["truth"]["matched"] == len(requests)  # both segments' truth logs
    # The 8 s asked for, in two segments: the first ran from its start to its last record (killed), the second for
    # what was left, and its stop never came early (a busy machine makes it late; a late stop only adds). The steady
    # windows lie within the segments.
    data = read_run(out)
    (mark,) = [m for m in data.marks if m["type"] == "segment"]
    first, second = data.phases, data.later_phases[0]
    last = max([r.t_done or r.t_sent for r in data.requests if r.t_sent < second["start"]]
               + [t.t_end for t in data.tasks if t.t_end < second["start"]])  # fmt: skip
    ran = last - first["start"]
    assert mark["elapsed_before_s"] == pytest.approx(ran, abs=2e-6)
    assert ran + (second["stop"] - second["start"]) >= max(8.0, ran + 1.0) - 2e-6
    assert 0 < summary["window_s"] <= ran + (second["stop"] - second["start"])
    report = orjson.loads(CliRunner().invoke(main, ["report", str(out), "--json"]).stdout)
    assert report["requests"] == summary["requests"] and report["segments"] == summary["segments"]


def test_a_resume_must_match_the_run_and_a_finished_run_has_nothing_to_resume(tmp_path: Path) -> None:
    work = write_trajectory(tmp_path / "w.jsonl", "w", simple_turns(3, output_tokens=5))
    out = tmp_path / "run.jsonl"
    base = [str(work), "--sim-profile", "instant", "--tool-time", "none", "-q"]
    assert CliRunner().invoke(main, ["run", *base, "--out", str(out)]).exit_code == 0
    done = CliRunner().invoke(main, ["run", *base, "--resume", str(out)])
    assert done.exit_code == 1 and "nothing to resume" in done.output
    text = out.read_bytes().replace(b'"stop_reason":"tasks"', b'"stop_reason":"interrupted (SIGTERM)"')
    out.write_bytes(text)
    other = CliRunner().invoke(main, ["run", *base, "-c", "3", "--resume", str(out)])
    assert other.exit_code == 1 and "load.concurrency" in other.output
    assert out.read_bytes() == text  # a refused resume writes nothing


def test_resume_alone_takes_the_runs_options_from_its_header(tmp_path: Path) -> None:
    """Issue 24: `replay run --resume FILE` alone was refused ("the run was made with --duration 2.0 s; this one
    asks for None"): after a crash the user had to retype every option the file holds."""
    work = tmp_path / "w.jsonl"
    for i in range(3):
        write_trajectory(work, f"w{i}", simple_turns(30, output_tokens=20, tool_time_s=0.05))
    out = tmp_path / "run.jsonl"
    first = CliRunner().invoke(main, ["run", str(work), "-c", "2", "--sim-profile", "fast", "--duration", "2",
                                      "--window", "1", "--tool-time", "scale:0.5", "--seed", "3",
                                      "--threshold", "error_rate<50%", "--price-per-hour", "12", "-q",
                                      "--out", str(out)])  # fmt: skip
    assert first.exit_code == 0, first.output
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(line for line in lines if b'"type":"footer"' not in line))  # as a kill leaves it
    kept = out.read_bytes()
    other = CliRunner().invoke(main, ["run", "--resume", str(out), "-c", "3", "-q"])
    assert other.exit_code == 1 and "load.concurrency = 2" in other.output  # a given option must match the run
    assert out.read_bytes() == kept
    res = CliRunner().invoke(main, ["run", "--resume", str(out), "--json", "-q"])
    assert res.exit_code == 0, res.output
    s = orjson.loads(res.stdout)
    assert [g["index"] for g in s["segments"]] == [0, 1]
    assert (s["run"]["seed"], s["run"]["tool_time"], s["run"]["concurrency"]) == (3, "scale:0.5", 2)
    assert [t["expr"] for t in s["thresholds"]] == ["error_rate<50%"] and s["cost"]["hourly"]["price_per_hour"] == 12
    header = orjson.loads(out.read_bytes().splitlines()[0])
    assert header["workload"]["paths"] == [str(work)]  # the workload the header names, found where it was
