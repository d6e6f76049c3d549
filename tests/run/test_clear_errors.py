"""Bad input gets one clear line naming the option, file, line or field, and exit code 1: never a traceback."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main

TURN = {"append": [{"role": "user", "content": "hi"}], "output": {"content": "a"}, "output_tokens": 3, "tool_time_s": 0}
HEADER = {"format": "replay.trajectory/1", "id": "x"}


def _file(tmp_path: Path, *lines: object) -> str:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(x if isinstance(x, bytes) else orjson.dumps(x) for x in lines) + b"\n")
    return str(path)


def _fails(args: list[str], *expected: str) -> None:
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1, (res.exit_code, res.output)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    error = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and "Traceback" not in res.output, res.output
    for text in expected:
        assert text in error[0], error[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--sim-faults", "bogus:1"], ("--sim-faults", "bogus")),
        (["--sim-faults", "429:2"], ("--sim-faults",)),
        (["--sim-profile", "nope"], ("--sim-profile", "nope", "known:")),
        (["--sim-dialect", "nope"], ("--sim-dialect",)),
        (["--sim-fallback", "lots"], ("--sim-fallback",)),
        (["--threshold", "ttft_p95<<2s"], ("--threshold", "FIGURE OP VALUE")),
        (["--threshold", "speed>3"], ("--threshold", "no figure 'speed'")),
        (["--host", "ftp://x"], ("--host", "http://")),
        (["--max-response-bytes", "lots"], ("--max-response-bytes",)),
        (["--retry-max-wait", "soon"], ("--retry-max-wait",)),
        (["--extra-body", "[1]"], ("--extra-body", "JSON object")),
        (["--extra-body", "{x"], ("--extra-body", "not JSON")),
        (["--tool-time", "sometimes"], ("--tool-time",)),
        (["--api", "soap"], ("--api",)),
        (["--header", "X-A:b\r\nX-Evil: 1"], ("--header", "line break")),  # issue 25: a smuggled second header
        (["--header", "X-A:b\nc"], ("--header", "line break")),
        (["--header", "X-A:b\x01c"], ("--header", "control character", "U+0001")),  # every call failed, exit 3
        (["--header", "X-A:b\x7fc"], ("--header", "control character", "U+007F")),
        (["--header", "X A:b"], ("--header", "name")),
        (["--duration", "0"], ("--duration", "more than 0")),  # ran a whole pass, its progress saying "0 s left"
        (["--request-timeout", "0"], ("--request-timeout", "more than 0")),  # read as the default, 600 s
        (["--stall-timeout", "0s"], ("--stall-timeout", "more than 0")),  # read as the default, 120 s
        (["--window", "0"], ("--window", "more than 0")),  # read as "no windows"
        (["--threshold", ""], ("--threshold", "no threshold")),  # an empty variable: the run went ungated
        (["--threshold", " , "], ("--threshold", "no threshold")),
        (["--sim-truth-log", "/dev/full"], ("--sim-truth-log", "not a regular file")),  # a traceback in the host
        (["--seed", str(2**64)], ("--seed", "range")),  # issue 25: it once reached the header's JSON
        (["--sim-fault-seed", "-1"], ("--sim-fault-seed", "range")),
    ],
)
def test_bad_run_options(tmp_path: Path, args: list[str], expected: tuple[str, ...]) -> None:
    _fails(["run", "--out", str(tmp_path / "r.jsonl"), *args], *expected)
    assert not (tmp_path / "r.jsonl").exists()  # nothing was started


BAD_TRAJECTORIES = {
    "part text not a string": (
        [HEADER, {**TURN, "append": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}],
        "append[0].content[0].text",
    ),
    "part not an object": ([HEADER, {**TURN, "append": [{"role": "user", "content": ["hi"]}]}], "content[0]"),
    "header without id": ([{"format": "replay.trajectory/1"}, TURN], "'id'"),
    "unknown role": ([HEADER, {**TURN, "append": [{"role": "robot", "content": "x"}]}], "append[0].role"),
    "output tokens missing": ([HEADER, {k: v for k, v in TURN.items() if k != "output_tokens"}], "output_tokens"),
    "absurd output tokens": ([HEADER, {**TURN, "output_tokens": 2**63}], "output_tokens"),  # waited out the timeout
    "negative tool time": ([HEADER, {**TURN, "tool_time_s": -1}], "tool_time_s"),
    "absurd tool time": ([HEADER, {**TURN, "tool_time_s": 1e10}, TURN], "more than a day"),  # once slept for ever
    "truncate past the context": ([HEADER, TURN, {**TURN, "truncate_to": 9}], "truncate_to"),
    "no turns": ([HEADER], "no turns"),
    "not JSON": ([HEADER, b"{not json"], "not valid JSON"),
    "turn before a header": ([TURN], "format"),
    "tool call without a name": (
        [HEADER, {**TURN, "output": {"content": None, "tool_calls": [{"function": {"arguments": "{}"}}]}}],
        "output.tool_calls[0].function.name",
    ),
    "spawn of an unknown subagent": ([HEADER, {**TURN, "spawn": [{"trajectory": "ghost"}]}], "spawn[0].trajectory"),
}


@pytest.mark.parametrize("case", sorted(BAD_TRAJECTORIES))
@pytest.mark.parametrize("command", ["run", "inspect", "import"])
def test_bad_trajectories_are_refused_by_every_command(tmp_path: Path, case: str, command: str) -> None:
    lines, expected = BAD_TRAJECTORIES[case]
    path = _file(tmp_path, *lines)
    if command == "import" and case == "spawn of an unknown subagent":
        pytest.skip("spawns resolve across all the files of a workload: checked when it is loaded, by run/inspect")
    args = {"run": ["run", path, "-q", "--out", str(tmp_path / "r.jsonl")], "inspect": ["inspect", path],
            "import": ["import", path, "-o", str(tmp_path / "o.jsonl")]}[command]  # fmt: skip
    _fails(args, f"{path}:", expected)
    assert not (tmp_path / "o.jsonl").exists()


def test_too_few_open_files_for_the_concurrency_is_said_before_the_run(tmp_path: Path) -> None:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (100, 100))

    res = subprocess.run(
        [sys.executable, "-m", "replay", "run", "-c", "256", "-q", "--out", str(tmp_path / "r.jsonl")],
        capture_output=True, text=True, preexec_fn=limit, timeout=60,
    )  # fmt: skip
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "256 sessions need about 576 open files" in res.stderr and "ulimit -n 576" in res.stderr
    assert "lower --concurrency" in res.stderr
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_pipe_or_a_device_as_the_workload_is_refused(tmp_path: Path, kind: str) -> None:
    """A FIFO once hung the load and /dev/zero filled the memory with one endless line."""
    import os

    path = tmp_path / "w.fifo"
    if kind == "fifo":
        os.mkfifo(path)
    target = str(path) if kind == "fifo" else "/dev/zero"
    for args in (["run", target, "-q", "--out", str(tmp_path / "r.jsonl")], ["inspect", target]):
        _fails(args, target, "not a regular file")


@pytest.mark.parametrize("option", ["--request-timeout", "--stall-timeout"])
def test_a_probe_timeout_of_0_is_refused_not_read_as_its_default(tmp_path: Path, option: str) -> None:
    _fails(["probe", "--out", str(tmp_path / "p.toml"), option, "0"], option, "more than 0")


def test_a_truth_log_the_simulated_host_cannot_write_is_refused_before_it_serves() -> None:
    _fails(["sim", "--truth-log", "/dev/full"], "--truth-log", "not a regular file")
