"""``--source-address`` (repeatable): the sessions' connections leave from each of the addresses given, dealt evenly
(also when the lanes are sharded over workers, each of which holds every other lane), as the host sees them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.records.reader import read_run
from tests.support.trajectories import simple_turns, write_trajectory

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import peer_stub


@pytest.fixture(scope="module")
def stub() -> Iterator[int]:
    with peer_stub.started("--tokens", "8", "--mode", "event") as (_, port):
        yield port


@pytest.mark.parametrize("workers", [1, 2])
def test_connections_leave_from_every_source_address_evenly(tmp_path: Path, stub: int, workers: int) -> None:
    work = tmp_path / "w.jsonl"
    for i in range(8):
        write_trajectory(work, f"t{i}", simple_turns(3, output_tokens=8))
    peer_stub.control(stub, "/bench/reset")
    out = tmp_path / "r.jsonl"
    args = ["run", str(work), "--host", f"http://127.0.0.1:{stub}/v1", "--model", "stub", "-c", "8", "--workers",
            str(workers), "--source-address", "127.0.0.2", "--source-address", "127.0.0.3", "--out", str(out),
            "-q", "--json"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    stats = peer_stub.control(stub, "/bench/stats")
    assert stats["peers"].pop("127.0.0.1") == 1  # this test's own /bench/stats call: none of replay's from the default
    assert set(stats["peers"]) == {"127.0.0.2", "127.0.0.3"}
    assert stats["peers"]["127.0.0.2"] == stats["peers"]["127.0.0.3"] == 4  # 8 lanes, a connection each, warmed
    run = read_run(out)
    assert run.header["host"]["source_addresses"] == ["127.0.0.2", "127.0.0.3"]
    assert len(run.requests) == stats["requests"] == 24 and all(r.error is None for r in run.requests)
    assert orjson.loads(result.stdout)["verdict"]["exit_code"] == 0
