"""What a run of many sessions needs from the machine, checked before it starts (``replay.clients.limits``): the
open-file limit raised or the run refused, local ports enough for its connections or the run refused saying how many
``--source-address`` to give, and each source address one of this machine's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.clients.limits import LimitError, check_ports, check_source_addresses, local_ports
from tests.support.trajectories import simple_turns, write_trajectory


def test_a_run_past_one_address_s_ports_is_refused_naming_how_many_addresses_it_needs() -> None:
    usable = int(0.9 * local_ports())
    check_ports(usable, [])  # fits
    with pytest.raises(LimitError, match=r"--concurrency 60000 needs 60000 connections .* give --source-address 3 "):
        check_ports(60_000, [])
    check_ports(2 * usable, ["127.0.0.2", "127.0.0.3"])  # two addresses, twice the ports
    with pytest.raises(LimitError, match="2 source addresses have"):
        check_ports(2 * usable + 1, ["127.0.0.2", "127.0.0.3"])


def test_a_source_address_must_be_an_address_of_this_machine() -> None:
    check_source_addresses(["127.0.0.1", "127.0.0.2", "127.0.0.3"])  # all of 127/8 is this machine's on Linux
    with pytest.raises(LimitError, match=r"--source-address 'nonsense': not an IP address"):
        check_source_addresses(["127.0.0.2", "nonsense"])
    with pytest.raises(LimitError, match=r"--source-address 192\.0\.2\.7: not an address of this machine"):
        check_source_addresses(["192.0.2.7"])  # TEST-NET-1: never assigned to a machine


OPEN_FILES = """
import resource, sys
from replay.clients.limits import LimitError, ensure_open_files
resource.setrlimit(resource.RLIMIT_NOFILE, (128, 400))
ensure_open_files(100)  # 264 files: raised within the hard limit
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
try:
    ensure_open_files(300)  # 664 files: past the hard limit
except LimitError as exc:
    print(exc)
"""


def test_the_open_file_limit_is_raised_or_the_run_refused() -> None:
    done = subprocess.run([sys.executable, "-c", OPEN_FILES], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    raised, refusal = done.stdout.splitlines()
    assert raised == "264"
    assert refusal.startswith("300 sessions need about 664 open files, and this process may open only 264 (hard limit")
    assert "ulimit -n 664" in refusal


def test_the_command_refuses_before_anything_is_written(tmp_path: Path) -> None:
    work = write_trajectory(tmp_path / "w.jsonl", "t", simple_turns(1))
    out = tmp_path / "r.jsonl"
    base = ["run", str(work), "--host", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(out), "-q"]
    result = CliRunner().invoke(main, [*base, "-c", "60000"])
    assert result.exit_code == 1 and "give --source-address 3 times" in result.output, result.output
    result = CliRunner().invoke(main, [*base, "--source-address", "192.0.2.7"])
    assert result.exit_code == 1 and "not an address of this machine" in result.output, result.output
    assert not out.exists()
