"""A SIGTERM as a run ends, sent at each point around the end (deterministically, from a hook at that point): the
command always stops with 143, the verdict "passed" is never printed after it, the run file says what is true, and
the signal is never lost in a finaliser ("Exception ignored ... KeyboardInterrupt: SIGTERM", then "Verdict: passed"
and exit 0: a handler that raised ran inside a ``__del__``)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import replay.reports.text_report as text_report
import replay.runner.single_run as single_run
from replay.cli import main
from replay.records.run_file import RunWriter
from tests.support.trajectories import simple_turns, write_trajectory


class _Dying:
    """Sends SIGTERM from its finaliser: where an exception raised by a signal handler is lost."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)


def _term(in_finaliser: bool) -> None:
    if in_finaliser:
        _Dying()  # collected at once (no reference kept): its __del__ runs here
    else:
        os.kill(os.getpid(), signal.SIGTERM)


def _before(target: Any, name: str, in_finaliser: bool) -> Callable[..., Any]:
    """``target.name`` patched to send SIGTERM first."""
    original = getattr(target, name)

    def hooked(*args: Any, **kwargs: Any) -> Any:
        _term(in_finaliser)
        return original(*args, **kwargs)

    return hooked


def _after(target: Any, name: str, in_finaliser: bool) -> Callable[..., Any]:
    original = getattr(target, name)

    def hooked(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        _term(in_finaliser)
        return result

    return hooked


# Where the signal is sent, and whether the footer (written by then or not) says so.
POINTS: dict[str, tuple[Any, str, Callable[..., Any], bool]] = {
    "before the loop (the host started)": (single_run, "host_sampler", _before, True),
    "as the loop returns": (single_run.event_loop, "run", _after, True),
    "as the footer is written (signals held)": (RunWriter, "footer", _before, False),
    "as the run is summarised (footer written)": (single_run, "run_summary", _before, False),
    "as the summary is made, before it is printed": (text_report, "to_text", _before, False),
}


@pytest.fixture(autouse=True)
def _sigterm_default() -> Any:
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as a command starts (pytest's own handler aside)
    yield
    signal.signal(signal.SIGTERM, before)


@pytest.mark.parametrize("in_finaliser", [False, True], ids=["plain", "in a finaliser"])
@pytest.mark.parametrize("point", sorted(POINTS))
def test_a_sigterm_around_the_end_always_stops_the_command_with_143(
    tmp_path: Path, monkeypatch, capfd, point: str, in_finaliser: bool
) -> None:
    target, name, hook, in_footer = POINTS[point]
    monkeypatch.setattr(target, name, hook(target, name, in_finaliser))
    work, out = tmp_path / "w.jsonl", tmp_path / "r.jsonl"
    write_trajectory(work, "t", simple_turns(3, output_tokens=4, tool_time_s=0.0))
    res = CliRunner().invoke(main, ["run", str(work), "-q", "--out", str(out)])
    err = capfd.readouterr().err + res.output
    assert res.exit_code == 143, (res.exit_code, res.output, repr(res.exception))
    assert "Exception ignored" not in err and "Traceback" not in err, err
    assert "Verdict: passed" not in res.stdout, res.stdout
    assert "interrupted (SIGTERM)" in err and "every finished request is in the run file" in err, err
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    footer = lines[-1]
    assert footer["type"] == "footer"
    assert footer["requests"] == sum(1 for r in lines if r["type"] == "request")  # the file is whole either way
    if in_footer:
        assert footer["signal"] == "SIGTERM" and footer["stop_reason"] == "interrupted (SIGTERM)", footer
    else:  # it came after the footer: the file is the run's, complete; the command stops as asked
        assert "signal" not in footer, footer


def test_ctrl_c_before_the_run_file_exists_says_there_is_none(tmp_path: Path, monkeypatch, capfd) -> None:
    """It said "every finished request is in the run file" where no run file had been written."""

    def interrupted(*_args: Any, **_kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C as the simulated host starts
        raise AssertionError("SIGINT raises KeyboardInterrupt at once")

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    monkeypatch.setattr(single_run, "run_host", interrupted)
    work, out = tmp_path / "w.jsonl", tmp_path / "r.jsonl"
    write_trajectory(work, "t", simple_turns(3, output_tokens=4, tool_time_s=0.0))
    try:
        res = CliRunner().invoke(main, ["run", str(work), "-q", "--out", str(out)])
    finally:
        signal.signal(signal.SIGINT, before)
    err = capfd.readouterr().err + res.output
    assert res.exit_code == 130, (res.exit_code, res.output, repr(res.exception))
    assert "every finished request" not in err and "before the run started: no run file" in err, err
    assert not out.exists()


def test_a_sigterm_in_a_side_by_side_run_exits_143_and_names_the_run_files_written(
    tmp_path: Path, monkeypatch, capfd
) -> None:
    """``--host A --host B``: a SIGTERM as the first host's run is summarised stops the command; it exited 130
    whatever the signal, saying "every finished request is in the run files" (the second had none)."""
    monkeypatch.setattr(single_run, "run_summary", _before(single_run, "run_summary", False))
    work, out = tmp_path / "w.jsonl", tmp_path / "r.jsonl"
    write_trajectory(work, "t", simple_turns(2, output_tokens=4, tool_time_s=0.0))
    res = CliRunner().invoke(main, ["run", str(work), "-q", "--host", "sim:instant", "--host", "sim:default",
                                    "--out", str(out)])  # fmt: skip
    err = capfd.readouterr().err + res.output
    assert res.exit_code == 143, (res.exit_code, res.output, repr(res.exception))
    written = sorted(p for p in tmp_path.glob("r.*.jsonl") if not p.name.endswith(".truth.jsonl"))
    assert len(written) == 1 and f"interrupted (SIGTERM): every finished request is in {written[0]}" in err, err
