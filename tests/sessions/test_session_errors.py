"""A session that raises is a failed session, never a lost one (issue 25, items 1 and 5).

An exception is injected at each stage of a call (sending, the stream's interpretation, filling the record) and of
the writer (the file, the summary's sink, the task record): the task is recorded as failed with the error named,
the run goes on or stops as ``--on-error`` says, the verdict and exit code say the run could not complete, and
asyncio never reports a task exception that nobody retrieved. A full disk stops the run at once, named.
"""

from __future__ import annotations

import errno
import gc
import logging
from pathlib import Path
from typing import Any

import pytest

import replay
from replay.clients import client as client_mod
from replay.clients.transport import Transport
from replay.loops.closed_loop import LoadConfig
from replay.metrics.streaming import StreamSummary
from replay.records import run_file
from replay.records.reader import read_run
from replay.records.run_file import RunWriter
from tests.support.hostile import PATHS, answer, streaming, threaded_host
from tests.support.trajectories import simple_turns, write_trajectory

TASKS, TURNS = 4, 3


class Injected(RuntimeError):
    pass


def _workload(tmp_path: Path) -> Path:
    path = tmp_path / "w.jsonl"
    for i in range(TASKS):
        write_trajectory(path, f"w{i}", simple_turns(TURNS, output_tokens=3))
    return path


def _after(n: int, fn: Any, make: Any = lambda: Injected("injected")) -> Any:
    """``fn`` that raises on its ``n``-th call (counted from 1) and behaves after that."""
    seen = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        seen[0] += 1
        if seen[0] == n:
            raise make()
        return fn(*args, **kwargs)

    return wrapped


def _async_after(n: int, fn: Any) -> Any:
    seen = [0]

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        seen[0] += 1
        if seen[0] == n:
            raise Injected("injected")
        return await fn(*args, **kwargs)

    return wrapped


def _broken_steps() -> Any:
    raise Injected("injected")
    yield  # a generator, as interpret_steps is


def _interpret(mp: pytest.MonkeyPatch) -> None:
    """The second call's stream interpretation raises from inside the interpreter's step."""
    real, seen = client_mod.interpret_steps, [0]

    def steps(*args: Any, **kwargs: Any) -> Any:
        seen[0] += 1
        return _broken_steps() if seen[0] == 2 else real(*args, **kwargs)

    mp.setattr(client_mod, "interpret_steps", steps)


STAGES = {
    "send": lambda mp: mp.setattr(Transport, "post", _async_after(2, Transport.post)),
    "interpret": _interpret,
    "fill": lambda mp: mp.setattr(client_mod.HostClient, "_fill", _after(2, client_mod.HostClient._fill)),
    "sink": lambda mp: mp.setattr(StreamSummary, "request", _after(2, StreamSummary.request,
                                                                   lambda: OverflowError("injected"))),
    "task_record": lambda mp: mp.setattr(StreamSummary, "task", _after(1, StreamSummary.task)),
}  # fmt: skip


def _run(tmp_path: Path, on_error: str = "continue") -> replay.RunResult:
    with threaded_host({PATHS["chat"]: streaming(answer("chat"))}) as url:
        spec = replay.RunSpec([str(_workload(tmp_path))], host=url, model="m", retries=0, out=str(tmp_path / "r.jsonl"),
                              load=LoadConfig(concurrency=2, on_error=on_error))  # fmt: skip
        return replay.run(spec)


@pytest.mark.parametrize("stage", sorted(STAGES))
@pytest.mark.parametrize("on_error", ["continue", "abort"])
def test_an_exception_at_any_stage_fails_its_session_by_name(tmp_path, monkeypatch, caplog, stage, on_error) -> None:
    STAGES[stage](monkeypatch)
    caplog.set_level(logging.ERROR, logger="asyncio")
    result = _run(tmp_path, on_error)
    gc.collect()  # an unretrieved task exception is logged when its task is collected
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    verdict = result.summary["verdict"]
    assert result.exit_code == 3, verdict
    assert any("injected" in reason for reason in verdict["reasons"]), verdict
    run = read_run(result.path)
    assert run.footer is not None and run.footer["requests"] == len(run.requests)
    if stage != "task_record":  # the task is recorded as failed, the error named
        failed = [t for t in run.tasks if t.error is not None]
        assert failed and all("injected" in t.error and t.status == "failed" for t in failed)
    if on_error == "continue" and stage != "task_record":  # the run went on: every task was started and recorded
        assert len(run.tasks) == TASKS
        assert not run.footer["stop_reason"].startswith("aborted")
    else:  # --on-error abort, or a task that could not be recorded: the run stops
        assert run.footer["stop_reason"].startswith("aborted: task ") and "injected" in run.footer["stop_reason"]
        assert len(run.requests) < TASKS * TURNS


class _Full:
    """A run file on a disk that fills up after ``room`` bytes."""

    def __init__(self, handle: Any, room: int) -> None:
        self.handle, self.room = handle, room

    def write(self, data: bytes) -> int:
        self.room -= len(data)
        if self.room < 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.handle.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)


def test_a_full_disk_stops_the_run_at_once_and_says_so(tmp_path, monkeypatch, caplog) -> None:
    real = run_file.open_locked
    monkeypatch.setattr(run_file, "open_locked", lambda path: _Full(real(path), 12_000))
    caplog.set_level(logging.ERROR, logger="asyncio")
    result = _run(tmp_path)
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    assert result.exit_code == 3
    reasons = " ".join(result.summary["verdict"]["reasons"])
    assert "No space left on device" in reasons and str(tmp_path / "r.jsonl") in reasons
    assert result.footer is not None and "No space left on device" in result.footer["run_file_error"]


def test_the_run_file_error_is_named_once_and_later_writes_fail_fast(tmp_path) -> None:
    writer = RunWriter(tmp_path / "r.jsonl")
    writer._file = _Full(writer._file, 10)  # type: ignore[assignment]
    with pytest.raises(run_file.RunFileError, match="No space left"):
        writer.header({"x": 1})
    writer._file.room = 10**9  # space freed: records still refused (the file has a hole), the footer is tried
    with pytest.raises(run_file.RunFileError):
        writer.request(run_file.RequestRecord(id="r", session=0, task=0, trajectory="t", turn=0))
    writer.phase("start", 1.0)  # the loop's own marks never raise into it: the next record names the failure
    writer.footer({"stop_reason": "completed"})
    writer.close()
    assert writer.footer_data is not None and "No space left" in writer.footer_data["run_file_error"]


INJECT = """
import os
if os.environ.get("REPLAY_TEST_INJECT"):
    from replay.clients import client
    real, seen = client.HostClient._fill, [0]
    def _fill(self, rec, got, st):
        seen[0] += 1
        if seen[0] == 3:
            raise RuntimeError("injected in a worker")
        return real(self, rec, got, st)
    client.HostClient._fill = _fill
"""


def test_a_session_that_raises_in_a_worker_process_is_a_failed_session_too(tmp_path: Path) -> None:
    """The same in each of ``--workers 2``: its task fails by name, the run goes on, exit 3, and no process says a
    task exception was never retrieved."""
    import os
    import subprocess
    import sys

    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(INJECT)
    path = os.pathsep.join(p for p in (str(tmp_path / "hook"), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "REPLAY_TEST_INJECT": "1", "PYTHONPATH": path}
    out = tmp_path / "r.jsonl"
    cmd = [sys.executable, "-m", "replay", "run", str(_workload(tmp_path)), "-c", "4", "--workers", "2", "-q",
           "--out", str(out), "--json"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
    assert done.returncode == 3, done.stderr.decode()
    assert b"never retrieved" not in done.stderr and b"Traceback" not in done.stderr
    run = read_run(out)
    failed = [t for t in run.tasks if t.error is not None]
    assert len(failed) == 2 and all("injected in a worker" in t.error for t in failed)  # one in each worker
    assert len(run.tasks) == TASKS and run.footer is not None and not run.footer["stop_reason"].startswith("aborted")
