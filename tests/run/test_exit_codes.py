"""Exit codes as the README's table says them (issue 25, items 9 and 10, and the run-file items of 11): 3 for every
run that started and could not complete, 1 only when nothing ran; one writer per run file; the output path
checked before the first call; the footer written on every signal."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from replay.records.reader import read_run
from tests.support.hostile import PATHS, answer, raw_host, streaming, threaded_host
from tests.support.trajectories import simple_turns, write_trajectory


def _workload(tmp_path: Path, turns: int = 40, tool_s: float = 0.05) -> Path:
    work = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(turns, output_tokens=8, tool_time_s=tool_s))
    return work


def _replay(*args: str, **kwargs) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "replay", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            **kwargs)  # fmt: skip


def _until_requests(proc: subprocess.Popen[bytes], out: Path, n: int = 4) -> None:
    deadline = time.monotonic() + 60
    while (out.read_bytes().count(b'"type":"request"') if out.exists() else 0) < n:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()  # type: ignore
        time.sleep(0.02)  # polling a condition on disk, not standing in for synchronisation


def test_an_unreachable_host_without_a_model_is_a_run_that_could_not_complete(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _replay("run", str(_workload(tmp_path, 2)), "--host", f"http://127.0.0.1:{port}/v1", "-q",
                   "--out", str(tmp_path / "r.jsonl"))  # fmt: skip
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err.decode()
    assert b"the host was never reached" in err and b"Traceback" not in err


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_a_run_file_deleted_or_truncated_under_the_run_is_a_run_that_could_not_complete(tmp_path, damage) -> None:
    out = tmp_path / "r.jsonl"
    proc = _replay("run", str(_workload(tmp_path, 40, 0.1)), "-c", "4", "--out", str(out), "-q", "--json")
    _until_requests(proc, out)
    if damage == "deleted":
        out.unlink()
    else:
        os.truncate(out, 0)
    stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err.decode()
    reasons = " ".join(orjson.loads(stdout)["verdict"]["reasons"])
    assert f"was {damage} during the run" in reasons


def test_stdout_closed_by_its_reader_is_a_run_that_could_not_complete(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    proc = _replay("run", str(_workload(tmp_path, 3, 0.0)), "-c", "2", "--out", str(out), "-q")
    proc.stdout.close()  # type: ignore[union-attr]  # the reader went away (``| head -0``)
    err = proc.stderr.read()  # type: ignore[union-attr]
    proc.wait(timeout=60)
    assert proc.returncode == 3, err.decode()
    assert b"stdout was closed" in err and b"Traceback" not in err and b"BrokenPipe" not in err
    assert read_run(out).footer is not None


def test_a_full_disk_is_a_run_that_could_not_complete_and_says_so(tmp_path: Path) -> None:
    """A file size limit stands in for a full disk: writes past it fail with EFBIG (Python ignores SIGXFSZ)."""
    out = tmp_path / "r.jsonl"
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (30_000, 30_000))  # noqa: E731
    with threaded_host({PATHS["chat"]: streaming(answer("chat"))}) as url:
        proc = _replay("run", str(_workload(tmp_path, 30, 0.0)), "--host", url, "--model", "m", "-c", "2",
                       "--retries", "0", "--out", str(out), "-q", "--json", preexec_fn=limit)  # fmt: skip
        stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err.decode()
    assert b"Traceback" not in err
    reasons = " ".join(orjson.loads(stdout)["verdict"]["reasons"])
    assert "File too large" in reasons and str(out) in reasons
    assert out.stat().st_size <= 30_000


def test_a_second_writer_of_a_run_file_is_refused_before_it_writes(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    work = _workload(tmp_path, 40, 0.1)
    first = _replay("run", str(work), "-c", "4", "--duration", "60", "--out", str(out), "-q")
    try:
        _until_requests(first, out)
        for args in (["--out", str(out)], ["--resume", str(out), "--duration", "60"]):
            second = _replay("run", str(work), "-c", "4", *args, "-q")
            _, err = second.communicate(timeout=60)
            assert second.returncode == 1, err.decode()
            assert b"is being written by another replay process" in err and b"baseline" not in err
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode == 143
    lines = out.read_bytes().splitlines()
    kinds = [orjson.loads(line)["type"] for line in lines]
    assert kinds.count("header") == 1 and kinds.count("footer") == 1 and kinds[-1] == "footer"


PATHS_REFUSED: dict[str, Callable[[Path], str]] = {
    "under a file": lambda tmp: (tmp.joinpath("file").write_text("x"), str(tmp / "file" / "r.jsonl"))[1],
    "a device": lambda tmp: "/dev/full",
    "a directory": lambda tmp: str(tmp),
}


@pytest.mark.parametrize("case", sorted(PATHS_REFUSED))
def test_an_output_path_that_cannot_be_written_is_refused_before_the_first_call(tmp_path, case) -> None:
    seen: list[int] = []

    async def counted(request):  # the host must not hear from a run that cannot be written
        seen.append(1)
        return await streaming(answer("chat"))(request)

    with threaded_host({PATHS["chat"]: counted}) as url:
        proc = _replay("run", str(_workload(tmp_path, 2)), "--host", url, "--model", "m", "-q",
                       "--out", PATHS_REFUSED[case](tmp_path))  # fmt: skip
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err.decode()
    assert (b"Error: " in err and b"'--out'" in err) or b"--out: " in err, err.decode()
    assert b"Traceback" not in err
    assert seen == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ro").mkdir(mode=0o555)
    proc = _replay("run", str(_workload(tmp_path, 2)), "-q", "--out", str(tmp_path / "ro" / "r.jsonl"))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and b"is not writable" in err, err.decode()


SIGTERM_AFTER_THE_LOOP = """
import os, signal, sys, time
import replay.event_loop as el
real = el.run
def run(coro):
    result = real(coro)
    os.kill(os.getpid(), signal.SIGTERM)  # just after the loop ended, before the footer
    time.sleep(5)
    return result
el.run = run
from replay.cli import entry
sys.argv = ["replay", *sys.argv[1:]]
entry()
"""


def test_sigterm_just_after_the_loop_ends_still_writes_the_footer(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    cmd = [sys.executable, "-c", SIGTERM_AFTER_THE_LOOP, "run", str(_workload(tmp_path, 3, 0.0)), "-c", "2", "--out",
           str(out), "-q"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err.decode()
    run = read_run(out)
    assert run.footer is not None and run.footer["signal"] == "SIGTERM"
    assert run.footer["stop_reason"] == "interrupted (SIGTERM)" and run.footer["requests"] == len(run.requests) == 12


def test_prometheus_on_a_busy_or_impossible_address_fails_before_the_run(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        for address, words in ((f"127.0.0.1:{port}", b"Address already in use"), ("127.0.0.1:99999", b"1..65535"),
                               ("203.0.113.7:9464", b"cannot listen at")):  # fmt: skip
            proc = _replay("run", str(_workload(tmp_path, 2)), "-q", "--prometheus", address,
                           "--out", str(tmp_path / "r.jsonl"))  # fmt: skip
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 1 and words in err and b"Traceback" not in err, err.decode()
            assert not (tmp_path / "r.jsonl").exists()


def test_stdout_closed_before_the_command_started_is_a_run_that_could_not_complete(tmp_path: Path) -> None:
    """``replay run ... >&-``: Python starts with no ``sys.stdout``; the summary cannot be printed (exit 3)."""
    out = tmp_path / "r.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "replay", "run", str(_workload(tmp_path, 3, 0.0)), "-c", "2",
                             "--out", str(out), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: os.close(1))  # fmt: skip
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err.decode()
    assert b"stdout was closed" in err and b"Traceback" not in err
    assert read_run(out).footer is not None


def test_a_host_that_never_answers_in_http_was_reached_and_the_run_could_not_complete(tmp_path: Path) -> None:
    """Every call answered with bytes that are not HTTP: class ``protocol`` (it was ``connect``, and the verdict said
    the host was never reached), exit 3; the figure recounted from the run file, and the same from the report."""

    async def not_http(r, w) -> None:
        while True:
            await r.readuntil(b"\r\n\r\n")
            w.write(b"SSH-2.0-OpenSSH_9.6\r\n")
            await w.drain()

    out = tmp_path / "r.jsonl"
    with raw_host(not_http) as url:
        proc = _replay("run", str(_workload(tmp_path, 2)), "--host", url, "--model", "m", "--retries", "1", "-q",
                       "--json", "--out", str(out))  # fmt: skip
        stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err.decode()
    summary = orjson.loads(stdout)
    reasons = " ".join(summary["verdict"]["reasons"])
    assert "reached but never answered in HTTP" in reasons and "was never reached" not in reasons, reasons
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    calls = [r for r in records if r["type"] == "request"]
    assert calls and all(r["error"] == "protocol" for r in calls)  # not retried: it would fail the same way
    assert summary["errors_by_class"] == {"protocol": len(calls)}
    report = subprocess.run([sys.executable, "-m", "replay", "report", str(out), "--json"], capture_output=True)
    assert orjson.loads(report.stdout)["errors_by_class"] == summary["errors_by_class"]
