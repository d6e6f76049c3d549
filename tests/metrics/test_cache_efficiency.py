"""Cache efficiency sets the host's hit ratio beside the client's reuse over the same calls: a host that reported
cached tokens for 40 of 42 calls is judged against the client's reuse of those 40, not of all 42. Checked against a
recount from the raw records (this file does not use replay to count), live and offline."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.loops.closed_loop import LoadConfig
from replay.metrics.accumulator import Accumulator
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from tests.support.trajectories import simple_turns, write_trajectory


def _report(path: Path) -> dict:
    res = CliRunner().invoke(main, ["report", str(path), "--json"])
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


def _recount(records: list[dict]) -> dict[str, float]:
    ok = [r for r in records if r["error"] is None and r["phase"] == "measured"]
    rep = [r for r in ok if r["prompt_tokens"] is not None and r["cached_tokens"] is not None]
    hit = sum(r["cached_tokens"] for r in rep) / sum(r["prompt_tokens"] for r in rep)
    reuse_all = sum(r["reusable_prefix_tokens"] for r in ok) / sum(r["prompt_tokens_est"] for r in ok)
    reuse_rep = sum(r["reusable_prefix_tokens"] for r in rep) / sum(r["prompt_tokens_est"] for r in rep)
    return {"calls": len(ok), "reported": len(rep), "hit": hit, "reuse": reuse_all, "efficiency": hit / reuse_rep}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[dict, Path]:
    tmp = tmp_path_factory.mktemp("eff")
    work = tmp / "w.jsonl"
    for i in range(6):  # turns whose reusable share grows: the first calls of a task reuse least
        write_trajectory(work, f"w{i}", simple_turns(7, output_tokens=12, grow="some more words " * (i + 1)))
    spec = RunSpec(trajectories=[str(work)], load=LoadConfig(concurrency=3, tool_time=ToolTimePolicy.parse("none")),
                   out=str(tmp / "run.jsonl"), sim_profile="fast", progress=False)  # fmt: skip
    return execute(spec).summary.to_dict(), tmp / "run.jsonl"


def test_the_efficiency_is_over_the_calls_the_host_reported(run) -> None:
    live, path = run
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    records = [r for r in lines if r.get("type") == "request"]
    full = _recount(records)
    assert full["reported"] == full["calls"] == live["cache"]["requests"] == 42
    assert live["cache"] == _report(path)["cache"]  # live == offline
    assert live["cache"]["efficiency"] == pytest.approx(full["efficiency"], rel=1e-12)
    # A host that left out the cached count of the second calls of two tasks (early calls reuse least): 40 of 42
    dropped = 0
    for r in records:
        if r["turn"] == 1 and r["error"] is None and dropped < 2:
            r["cached_tokens"], dropped = None, dropped + 1
    partial = path.with_name("partial.jsonl")
    partial.write_bytes(b"\n".join(orjson.dumps(r) for r in lines) + b"\n")
    want = _recount(records)
    assert want["reported"] == 40 and want["calls"] == 42
    got = _report(partial)["cache"]
    assert got["requests_with_cached_tokens"] == 40 and got["requests"] == 42
    assert got["host_hit_ratio"] == pytest.approx(want["hit"], rel=1e-12)
    assert got["client_reuse_ratio"] == pytest.approx(want["reuse"], rel=1e-12)  # the client's figure: all 42
    assert got["efficiency"] == pytest.approx(want["efficiency"], rel=1e-12)
    assert got["efficiency"] != pytest.approx(want["hit"] / want["reuse"], rel=1e-6)  # a 40-call over a 42-call ratio
    second = _recount([r for r in records if r["turn"] == 1])  # the turn-1 row of the breakdown: 4 of its 6 calls
    row = next(b for b in _report(partial)["breakdown"]["by_turn"] if b["bucket"] == "1")
    assert (second["calls"], second["reported"]) == (6, 4)
    assert row["cache_efficiency"] == pytest.approx(second["efficiency"], rel=1e-12)


def test_an_accumulator_written_before_reads_as_it_did() -> None:
    """Window records written before the client's counts over the reported calls were kept: those of all the
    calls stand in for them (the efficiency they gave then)."""
    data = Accumulator().encode()
    data["sums"] = {k: v for k, v in data["sums"].items() if not k.startswith("m_reported_")}
    data["sums"].update(m_est=100, m_reusable=80, m_reported=1, m_host_prompt=100, m_host_cached=40)
    data["by_turn"] = [b[:8] for b in data["by_turn"]]
    acc = Accumulator.decode(data)
    assert acc.sums["m_reported_est"] == 100 and acc.sums["m_reported_reusable"] == 80
    assert all(b.reported_est == b.est for b in acc.by_turn)
