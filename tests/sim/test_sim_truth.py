"""At 64 concurrent streams the client's TTFT, token times and ITL agree with the sim's truth within 5 ms.

The sim runs in its own process (as ``replay run`` starts it; profile ``moe-8gpu``, the many-agents host)
and the client replays 64 sessions at once. Answers have different lengths and sessions pause for
different tool times, so calls end and arrive spread out as an agent fleet's do (64 identical answers
would end in one engine step, and the client's per-call work for all of them would hold its event loop
for tens of milliseconds). The comparison is replay.metrics.truth_compare's, the one ``replay report`` prints.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from replay.loops.closed_loop import LoadConfig
from replay.metrics.truth_compare import client_token_times, compare, host_token_times, load_truth
from replay.records.reader import read_run
from replay.runner.embedded_host import embedded_host
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from tests.support.trajectories import simple_turns, write_trajectory

TOLERANCE_S = 0.005
ROUNDING_S = 2e-6  # both sides store times rounded to the microsecond
STREAMS = 64
PROFILE = "moe-8gpu"


@pytest.fixture(scope="module")
def run64(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run64")
    work = tmp / "w.jsonl"
    for i in range(STREAMS):  # answers of different lengths: calls do not all end in the same engine step
        turns = simple_turns(4, output_tokens=10 + (i * 7) % 31, tool_time_s=0.03 + 0.007 * (i % 17))
        write_trajectory(work, f"w{i}", turns)
    truth_path = tmp / "truth.jsonl"
    with embedded_host(PROFILE, str(truth_path)) as sim:
        spec = RunSpec(
            trajectories=[str(work)],
            host=sim.base_url,
            model="m",
            load=LoadConfig(concurrency=STREAMS, tool_time=ToolTimePolicy.parse("recorded")),
            out=str(tmp / "run.jsonl"),
            progress=False,
        )
        result = execute(spec)
    return read_run(result.path), load_truth(truth_path)


def test_64_streams_really_ran_at_once(run64):
    run, truth = run64
    assert len(run.requests) == STREAMS * 4 and all(r.error is None for r in run.requests)
    edges = sorted(
        [(t["first_token"], 1) for t in truth.values()] + [(t["last_token"], -1) for t in truth.values()],
        key=lambda e: (e[0], e[1]),
    )
    assert max(itertools.accumulate(d for _, d in edges)) == STREAMS


def test_every_call_is_timed_from_when_its_bytes_left(run64):
    run, _ = run64
    # t_sent is stamped by aiohttp's chunk-sent trace, after the call began; never the fallback (== t_call)
    assert all(r.t_call is not None and r.t_call < r.t_sent < r.t_first_token for r in run.requests)


def test_client_ttft_tokens_and_itl_within_5ms_of_truth(run64):
    run, truth = run64
    cmp = compare(run.requests, truth)
    assert cmp["matched"] == cmp["aligned"] == cmp["ok_matched"] == STREAMS * 4
    assert cmp["output_tokens_equal"] == cmp["cached_tokens_equal"] == STREAMS * 4
    figures = {k: cmp[f"{k}_dev_s"] for k in ("ttft", "token", "itl")}
    shown = {k: tuple(round(f[q] * 1e3, 2) for q in ("p50", "p95", "p99", "max")) for k, f in figures.items()}
    print("\n64 streams, deviation from truth in ms (p50, p95, p99, max):", shown)
    # Every call counts, first turns included: the clock starts when the request's bytes leave (wire_stamps),
    # so neither the client's own queue nor opening a connection is in its TTFT. The tails (p95, p99, worst)
    # are timing claims and live in the benchmark (scripts/truth_agreement.py, docs/benchmarks.md): on this
    # shared two-core VM one stall of the whole machine touches all 64 streams at once, which is 1 % of the
    # samples of a 5-second run, and a machine busy for a second moves every token of the calls in flight. So the
    # test asserts medians over all calls and over each turn (what a real error in the client's clock base moves,
    # and a stall does not), and per call what no busy machine can break: order. The client receives each token
    # after the host wrote it, and sends each request before the host saw it (one monotonic clock for both).
    for name, f in figures.items():
        assert f["p50"] < TOLERANCE_S, (name, shown)
    by_turn: dict[int, list[float]] = {}
    for rec in run.requests:
        t = truth[rec.id]
        client, host = client_token_times(rec), host_token_times(t)
        assert len(client) == len(host) and bool(np.all(client >= host - ROUNDING_S)), (rec.id, rec.turn, client - host)
        assert rec.t_sent <= t["arrival"] + ROUNDING_S and rec.t_first_token >= t["first_token"] - ROUNDING_S, (
            rec.id,
            rec.turn,
        )
        by_turn.setdefault(rec.turn, []).append((rec.t_first_token - rec.t_sent) - (t["first_token"] - t["arrival"]))
    # an error in first calls only (a connection opened inside TTFT) moves a whole turn's TTFTs
    for turn, devs in sorted(by_turn.items()):
        assert abs(float(np.median(devs))) < TOLERANCE_S, (turn, shown)
