"""The gate on a history (replay run --history-file): exit 2 the night a figure starts a worse regime, 0 on the
others, 3 when tonight's client set its figures; tonight is judged among the nights before it (live equals
offline), and added only once its run is complete (a kill -9 leaves the history as it was)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.history import gate
from replay.history.store import add, connect, night_from
from tests.history.test_history_store import header
from tests.verdict.test_baseline_gate import night as modelled

pytest.importorskip("ruptures")
pytest.importorskip("scipy")


def steady(seed: int, speed: float = 1.0) -> dict:
    """A night of a host whose windows are 8 % apart (its nights about 2 %): a 15 % step is 7 nights' spreads."""
    return modelled(seed, speed, jitter=0.08)


def judged(tmp_path: Path, speeds: list[float], tonight: dict, i: int | None = None) -> dict:
    """Tonight's summary (verdict passed before the gate) judged against a history of nights at ``speeds``."""
    path = tmp_path / "nights.db"
    if not path.exists():
        db = connect(path, create=True)
        for k, speed in enumerate(speeds):
            add(db, *night_from(header(k), steady(500 + k, speed), f"/runs/{k}.jsonl"))
        db.close()
    h = {**header(len(speeds) if i is None else i), "history_gate": {"file": str(path)}}
    summary = {**tonight, "verdict": {"passed": True, "exit_code": 0, "reasons": []}}
    gate.apply(summary, gate.judge(summary, h, "/runs/tonight.jsonl"))
    return summary


def test_a_slower_night_exits_2_a_steady_one_0(tmp_path):
    slow = judged(tmp_path, [1.0] * 30, steady(900, 0.85))
    assert slow["verdict"]["exit_code"] == 2
    assert "throughput.total_tps" in slow["history"]["regressed"]
    assert "started a worse regime in the history" in slow["verdict"]["reasons"][0]
    change = slow["history"]["figures"]["throughput.total_tps"]["change_point"]
    assert change["direction"] == "worse" and change["nights"] == 1 and change["run"] == "/runs/tonight.jsonl"
    same = judged(tmp_path, [1.0] * 30, steady(901, 1.0))
    assert same["verdict"]["exit_code"] == 0 and same["history"]["regressed"] == []
    faster = judged(tmp_path, [1.0] * 30, steady(902, 1.25))  # a better regime is no failure
    assert faster["verdict"]["exit_code"] == 0
    assert faster["history"]["figures"]["throughput.total_tps"]["change_point"]["direction"] == "better"


def test_the_night_after_the_step_is_in_the_new_regime_and_passes(tmp_path):
    nights = [1.0] * 30 + [0.85]  # the step came last night (its gate said 2): tonight is as slow, not slower
    tonight = judged(tmp_path, nights, steady(903, 0.85))
    assert tonight["verdict"]["exit_code"] == 0, tonight["history"]["regressed"]


def test_a_night_whose_client_was_held_up_is_not_judged_exit_3(tmp_path):
    s = steady(904, 0.85)
    s["client"] = {"held_up": True, "loop_lag_p99_ms": 250.0, "machine_load": 7.5}
    busy = judged(tmp_path, [1.0] * 30, s)
    assert busy["verdict"]["exit_code"] == 3 and busy["history"]["regressed"] == []
    assert busy["history"]["unjudged"].startswith("tonight's figures are not the host's: its client was held up")


def test_the_first_nights_judge_nothing_and_say_so(tmp_path):
    first = judged(tmp_path, [1.0, 1.0], steady(905, 0.5))
    assert first["verdict"]["exit_code"] == 0
    assert first["history"]["judged_before"] == 2 and "build its regime" in first["history"]["note"]


def test_later_nights_and_tonights_own_row_are_left_out(tmp_path):
    """Judged again after it was added, and after later nights: the same judgement (replay report = replay run)."""
    speeds = [1.0] * 30
    first = judged(tmp_path, speeds, steady(906, 0.85), i=30)
    db = connect(tmp_path / "nights.db")
    h = {**header(30), "history_gate": {"file": str(tmp_path / "nights.db")}}
    add(db, *night_from(h, steady(906, 0.85), "/runs/tonight.jsonl"))  # tonight, as the run adds it
    for k in range(31, 36):  # and five later nights back at full speed
        add(db, *night_from(header(k), steady(500 + k, 1.0), f"/runs/{k}.jsonl"))
    db.close()
    again = judged(tmp_path, speeds, steady(906, 0.85), i=30)
    assert again["history"] == first["history"]


def run_cmd(out: Path, hist: Path, seed: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "replay", "run", "-c", "2", "--tool-time", "none", "--warmup", "1", "--window",
            "1", "--seed", str(seed), "--json", "-q", "--out", str(out), "--history-file", str(hist),
            *extra]  # fmt: skip


def test_a_real_night_against_a_faster_history_exits_2_and_is_added(tmp_path):
    hist = tmp_path / "nights.db"
    first = tmp_path / "first.jsonl"
    done = subprocess.run(run_cmd(first, hist, 1, "--duration", "4"), capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 3), done.stderr[-2000:]
    live = json.loads(done.stdout)
    assert live["history"]["nights_before"] == 0
    db = connect(hist)
    assert db.execute("SELECT path FROM runs").fetchall() == [(str(first.resolve()),)]  # added once complete
    with db:  # it served to make a header of this identity: the history is ten nights before it instead
        db.execute("DELETE FROM runs")
    # ten earlier nights of the same identity (the real run's header, earlier clocks), each three times as fast
    real = json.loads(first.read_bytes().splitlines()[0])
    for k in range(10):
        h = {**real, "clock": {**real["clock"], "unix": real["clock"]["unix"] - 86400 * (10 - k)}, "created": f"n{k}"}
        s = modelled(700 + k, 1.0)
        s["throughput"]["total_tps"] = 3 * live["throughput"]["total_tps"] * s["throughput"]["total_tps"] / 30_000
        add(db, *night_from(h, s, f"/runs/{k}.jsonl"))
    db.close()
    tonight = tmp_path / "tonight.jsonl"
    done = subprocess.run(run_cmd(tonight, hist, 2, "--duration", "4"), capture_output=True, text=True, timeout=300)
    live = json.loads(done.stdout)
    assert done.returncode == live["verdict"]["exit_code"]
    if live["history"]["unjudged"]:  # the busy machine held tonight's client up: exit 3, said why
        assert done.returncode == 3
    else:
        assert done.returncode == 2 and "throughput.total_tps" in live["history"]["regressed"]
    offline = json.loads(CliRunner().invoke(main, ["report", str(tonight), "--json"]).stdout)
    assert offline["history"] == live["history"] and offline["verdict"] == live["verdict"]
    with sqlite3.connect(hist) as db:
        assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 11  # tonight added, regressed or not


def test_a_killed_night_is_not_added_and_its_resume_is(tmp_path):
    hist, out = tmp_path / "nights.db", tmp_path / "night.jsonl"
    proc = subprocess.Popen(run_cmd(out, hist, 3, "--duration", "12"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and out.read_bytes().count(b'"type":"request"') >= 5:
                break
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)  # mid-run: no footer, no summary
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert not hist.exists()  # nothing of the killed night: the history is not even made
    res = CliRunner().invoke(main, ["history", "add", str(out), "--file", str(hist)])
    assert res.exit_code == 1 and "did not finish" in res.output
    done = subprocess.run([sys.executable, "-m", "replay", "run", "--resume", str(out), "-q"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode in (0, 3), done.stderr[-2000:]
    with sqlite3.connect(hist) as db:
        assert db.execute("SELECT path FROM runs").fetchall() == [(str(out.resolve()),)]


def test_a_history_file_that_is_not_one_is_refused_before_the_run(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("these are notes, not a history " * 50)
    res = CliRunner().invoke(main, ["run", "--duration", "2", "--out", str(tmp_path / "r.jsonl"),
                                    "--history-file", str(bad)])  # fmt: skip
    assert res.exit_code == 1 and "--history-file" in res.output and "notes.txt: not a history file" in res.output
    assert not (tmp_path / "r.jsonl").exists()


def test_history_takes_the_nights_file_as_history_file_does(tmp_path):
    """``replay run --history FILE`` is ``--history-file FILE`` (recorded and live still name the conversation's
    history); a second, different file is refused, and a FILE outside replay run is no conversation history."""
    bad = tmp_path / "notes.txt"
    bad.write_text("these are notes, not a history " * 50)
    res = CliRunner().invoke(main, ["run", "--duration", "2", "--out", str(tmp_path / "r.jsonl"),
                                    "--history", str(bad)])  # fmt: skip
    assert res.exit_code == 1 and "notes.txt: not a history file" in res.output
    assert not (tmp_path / "r.jsonl").exists()
    both = CliRunner().invoke(main, ["run", "--duration", "2", "--out", str(tmp_path / "r.jsonl"),
                                     "--history", str(bad), "--history-file", str(tmp_path / "other.db")])  # fmt: skip
    assert both.exit_code == 1 and "give the history of nights once" in both.output
    sweep = CliRunner().invoke(main, ["sweep", "--concurrency", "1,2", "--history", str(bad)])
    assert sweep.exit_code == 1 and "not one of recorded, live" in sweep.output
