"""Lining a run's records up with a truth log: the arithmetic, on records whose answers are known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from replay.metrics.truth_compare import TruthLogError, _Deviations, _spread, compare, load_truth
from replay.records.run_file import RequestRecord


def _record(rid: str, t_sent: float, chunks: list[float], **kw) -> RequestRecord:
    first = t_sent + chunks[0] if chunks else None
    return RequestRecord(
        id=rid, session=0, task=0, trajectory="t", turn=0, t_sent=t_sent, t_first_token=first, chunks=chunks, **kw
    )


def test_deviations_are_client_minus_host_per_call_token_and_gap() -> None:
    # client: sent at 10.000, tokens read at +50, +60, +80 ms; host: arrived 10.001, wrote at 10.049 / .059 / .078
    rec = _record("a", 10.0, [0.050, 1, 0.060, 1, 0.080, 1], output_tokens=3, cached_tokens=7)
    truth = {
        "a": {
            "request_id": "a",
            "arrival": 10.001,
            "first_token": 10.049,
            "writes": [10.049, 1, 10.059, 1, 10.078, 1],
            "output_tokens": 3,
            "cached_tokens": 7,
            "queue_wait": 0.004,
            "prefill_time": 0.040,
            "preemptions": 1,
        }
    }
    cmp = compare([rec, _record("unknown-to-the-host", 11.0, [0.01, 1])], truth)
    assert (cmp["requests"], cmp["matched"], cmp["aligned"]) == (2, 1, 1)
    assert cmp["ttft_dev_s"]["max"] == pytest.approx(0.050 - 0.048)
    assert cmp["token_dev_s"]["n"] == 3 and cmp["token_dev_s"]["max"] == pytest.approx(0.002)
    assert cmp["token_dev_s"]["bias"] == pytest.approx(0.001)
    assert cmp["itl_dev_s"]["n"] == 2 and cmp["itl_dev_s"]["max"] == pytest.approx(0.001)
    assert (cmp["output_tokens_equal"], cmp["cached_tokens_equal"], cmp["cached_tokens_reported"]) == (1, 1, 1)
    # the one percentile method holds values at 3 significant digits (replay.histogram): 4 ms reads 4.001 ms
    assert cmp["host_queue_wait_s"]["p50"] == pytest.approx(0.004, rel=1e-3) and cmp["host_preemptions"] == 1
    # the host's TTFT (48 ms) = intake 4 ms (the rest) + queue wait 4 ms + prefill 40 ms
    assert cmp["host_ttft_s"]["p50"] == pytest.approx(0.048, rel=1e-3)
    assert cmp["host_intake_s"]["p50"] == pytest.approx(0.004, rel=1e-3)
    assert cmp["host_intake_s"]["n"] == cmp["host_queue_wait_s"]["n"] == cmp["host_prefill_s"]["n"] == 1


def test_counts_that_differ_and_streams_that_do_not_line_up_are_told_apart() -> None:
    rec = _record("a", 0.0, [0.01, 2], output_tokens=2, cached_tokens=0)  # one read of 2 events
    truth = {"a": {"request_id": "a", "arrival": 0.0, "first_token": 0.009, "writes": [0.009, 3], "output_tokens": 3,
                   "cached_tokens": 5}}  # fmt: skip
    cmp = compare([rec], truth)
    assert cmp["matched"] == 1 and cmp["aligned"] == 0 and cmp["token_dev_s"]["n"] == 0
    assert cmp["output_tokens_equal"] == 0 and cmp["cached_tokens_equal"] == 0
    assert cmp["ttft_dev_s"]["n"] == 1


def test_load_truth_names_the_bad_line_and_skips_a_torn_last_one(tmp_path: Path) -> None:
    good = orjson.dumps({"request_id": "a", "arrival": 1.0})
    path = tmp_path / "truth.jsonl"
    path.write_bytes(good + b"\n" + b'{"request_id": "b", "arr')  # the host died while writing
    assert list(load_truth(path)) == ["a"]
    path.write_bytes(good + b"\n" + b"{oops\n" + good + b"\n")
    with pytest.raises(TruthLogError, match=r"truth.jsonl:2: not JSON"):
        load_truth(path)
    path.write_bytes(b'{"arrival": 1.0}\n')
    with pytest.raises(TruthLogError, match=r"truth.jsonl:1: field 'request_id' missing"):
        load_truth(path)


def test_a_long_run_is_checked_on_every_kth_call_in_bounded_memory(tmp_path: Path, monkeypatch) -> None:
    from replay.loops.closed_loop import LoadConfig
    from replay.metrics import truth_compare
    from replay.runner.single_run import RunSpec, execute
    from replay.sessions.tool_time import ToolTimePolicy
    from tests.support.trajectories import simple_turns, write_trajectory

    work = tmp_path / "w.jsonl"
    for i in range(3):
        write_trajectory(work, f"w{i}", simple_turns(7, output_tokens=5))
    monkeypatch.setattr(truth_compare, "MAX_COMPARED", 5)
    spec = RunSpec(trajectories=[str(work)], sim_profile="instant", progress=False, out=str(tmp_path / "r.jsonl"),
                   load=LoadConfig(concurrency=3, tool_time=ToolTimePolicy.parse("none")))  # fmt: skip
    tr = execute(spec).summary["truth"]
    assert tr["of_requests"] == 21 and tr["every"] == 5  # ceil(21 / 5)
    assert tr["requests"] == tr["matched"] == 5 and tr["output_tokens_equal"] == 5  # calls 0, 5, 10, 15, 20
    ids = {orjson.loads(line)["request_id"] for line in (tmp_path / "r.truth.jsonl").read_bytes().splitlines()}
    assert len(truth_compare.load_truth(tmp_path / "r.truth.jsonl", set(sorted(ids)[:2]))) == 2


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_the_hosts_ttft_split_adds_up_to_its_ttft_on_a_run(tmp_path: Path, api: str) -> None:
    """Issue 24: "queue wait + prefill" left out the intake (reading and tokenising the prompt): 0.8 + 1.7 ms of a
    77 ms TTFT on completions. Now the three parts add up, and the host's TTFT is the client's, less the wire."""
    from click.testing import CliRunner

    from replay.cli import main
    from tests.support.trajectories import simple_turns, write_trajectory

    work = tmp_path / "w.jsonl"
    for i in range(2):
        write_trajectory(work, f"w{i}", simple_turns(4, output_tokens=8, tool_time_s=0.0))
    res = CliRunner().invoke(main, ["run", str(work), "-c", "2", "--api", api, "--sim-profile", "fast", "-q", "--json",
                                    "--out", str(tmp_path / "run.jsonl")])  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = orjson.loads(res.stdout)
    tr = summary["truth"]
    host, parts = tr["host_ttft_s"], [tr[k] for k in ("host_intake_s", "host_queue_wait_s", "host_prefill_s")]
    assert host["n"] == 8 and all(p["n"] == 8 for p in parts)
    assert sum(p["mean"] for p in parts) == pytest.approx(host["mean"], abs=1e-9)
    assert all(p["p50"] >= 0 for p in parts)
    assert tr["ttft_dev_s"]["n"] == 8


def test_token_deviations_gathered_in_batches_read_as_held_whole() -> None:
    """The token and gap deviations are gathered into histograms a batch at a time (a long run's compared calls
    carry millions of tokens): the same percentiles, worst value, bias and count as of all of them at once."""
    rng = np.random.default_rng(7)
    parts = [np.round(rng.normal(2e-4, 4e-4, int(n)), 6) for n in rng.integers(0, 3_000, 120)]
    parts.append(np.zeros(50))  # deviations that round to 0 µs, ranked between the signs
    gathered = _Deviations()
    for part in parts:
        gathered.add(part)
    assert gathered.spread() == _spread(np.concatenate(parts))
    assert _Deviations().spread() == _spread([])
