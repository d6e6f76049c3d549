"""Per-user decode speed is a figure only where the tokens came in reads apart in time: an answer read at once (a
host's single write split over socket reads, a backlog drained after a stall) has no speed, not an unbounded one.

Checked three ways on the simulated host: live (``replay run --json``) equals offline (``replay report --json``), an
independent recount from the run file's raw lines (tests/support/oracle.py), and the host's truth log (how many
writes it sent each answer in).
"""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.metrics.host.host_tally import tally_of
from replay.metrics.recipes.recipe_tally import decode_tps
from replay.records.run_file import RequestRecord
from tests.support import oracle
from tests.support.trajectories import simple_turns, write_trajectory


def _record(chunks: list[float], output_tokens: int) -> RequestRecord:
    t_sent = 100.0
    return RequestRecord(id="a", session=0, task=0, trajectory="t", turn=0, t_sent=t_sent,
                         t_first_token=t_sent + chunks[0], t_last_token=t_sent + chunks[-2], chunks=chunks,
                         output_tokens=output_tokens, output_events=int(sum(chunks[1::2])))  # fmt: skip


def test_an_answer_read_at_once_has_no_speed() -> None:
    # 278 tokens in two reads 8 µs apart (sim:instant's answers): the old figure was 35 million tokens/s
    assert decode_tps(_record([0.004663, 256, 0.004671, 22], 278)) is None
    # 1,500 tokens over 0.7 ms of reads: 2 million tokens/s, a socket drain, not a decode
    assert decode_tps(_record([0.010, 500, 0.0103, 500, 0.0107, 500], 1500)) is None
    assert decode_tps(_record([0.010, 1], 1)) is None  # one token: no speed after the first


def test_tokens_spread_over_time_have_their_speed() -> None:
    assert decode_tps(_record([0.010, 1, 0.020, 1, 0.110, 1], 3)) == pytest.approx(2 / 0.1)
    assert decode_tps(_record([0.010, 1, 0.0101, 1], 2)) == pytest.approx(10_000)  # 0.1 ms a token: a fast host
    # several tokens an event (a host's usage says 40 over 4 events): the host's count, over the reads' span
    assert decode_tps(_record([0.0, 1, 0.01, 1, 0.02, 1, 0.03, 1], 40)) == pytest.approx(39 / 0.03)


def test_speed_modes_and_load_rows_leave_out_calls_without_a_speed() -> None:
    burst = _record([0.004663, 256, 0.004671, 22], 278)
    burst.inflight = 1
    t = tally_of([burst])
    assert t.speeds == {} and t.load == {}


def _run(tmp_path, profile: str, output_tokens: int) -> tuple[dict, dict, list[dict], dict, list[dict]]:
    work = tmp_path / "w.jsonl"
    for i in range(3):
        write_trajectory(work, f"w{i}", simple_turns(4, output_tokens=output_tokens))
    out, truth = tmp_path / "run.jsonl", tmp_path / "truth.jsonl"
    args = ["run", str(work), "--sim-profile", profile, "-c", "3", "--tool-time", "none", "--sim-truth-log",
            str(truth), "--out", str(out), "-q", "--json"]  # fmt: skip
    live = CliRunner().invoke(main, args)
    assert live.exit_code == 0, live.output
    offline = CliRunner().invoke(main, ["report", str(out), "--json"])
    assert offline.exit_code == 0, offline.output
    raw = oracle.read(out)
    host = [orjson.loads(line) for line in truth.read_bytes().splitlines()]
    return orjson.loads(live.stdout), orjson.loads(offline.stdout), raw.requests, oracle.figures(raw), host


def test_answers_the_host_wrote_at_once_have_no_speed_in_any_figure(tmp_path) -> None:
    live, offline, records, recount, host = _run(tmp_path, "instant", 1500)
    assert live["user_decode_tps"] == offline["user_decode_tps"]
    assert live["breakdown"] == offline["breakdown"]
    d = live["user_decode_tps"]
    for h in host:  # the host's truth: each answer written out at once (256 tokens a write, back to back)
        w = h["writes"]
        assert w[-2] == w[0] or (h["output_tokens"] - 1) / (w[-2] - w[0]) > oracle.MAX_DECODE_TPS
    assert any(len(r["chunks"]) > 2 for r in records)  # ... read by the client in several reads
    assert [r["user_decode_tps"] for r in records] == [None] * len(records)
    assert (d["n"], d["p25"], d["p50"], d["p75"]) == (0, None, None, None)
    assert d["not_measured"] == recount["decode_not_measured"] == live["window"]["requests"] == len(records)
    assert all(row["decode_tps"]["p25"] is None for row in live["breakdown"]["by_context"])
    assert live["speed_modes"] == [] and live["speed_by_load"]["rows"] == []


def test_paced_answers_have_the_speed_the_raw_records_give(tmp_path) -> None:
    live, offline, records, recount, host = _run(tmp_path, "fast", 40)
    assert live["user_decode_tps"] == offline["user_decode_tps"]
    d = live["user_decode_tps"]
    assert d["n"] == len(recount["decode"]) > 0
    assert d["n"] + d["not_measured"] == live["window"]["requests"]
    writes = {h["request_id"]: len(h["writes"]) // 2 for h in host}
    for r in records:
        assert r["user_decode_tps"] == oracle._decode(r), r["id"]
        if r["user_decode_tps"] is not None:
            assert writes[r["id"]] >= 2  # the host's truth: it sent the answer in more than one write
