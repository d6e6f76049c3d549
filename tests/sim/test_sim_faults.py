"""Faults on demand: the spec, seeded rates within binomial bounds, and the faults the client meets reaching
it as the error class they should, counted exactly against the sim's truth. (Each fault on each API, as
bytes: tests/sim/test_sim_fault_kinds.py.)"""

import math

import aiohttp
import orjson
import pytest

from replay.loops.closed_loop import LoadConfig
from replay.records.reader import read_run
from replay.runner.embedded_host import embedded_host
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from replay.sim.server.app import start_sim
from replay.sim.server.faults import FaultPlan, FaultSpec
from tests.support.trajectories import simple_turns, write_trajectory

MESSAGES = [{"role": "user", "content": "Fix the failing test"}]


def test_spec_parses_and_rejects_what_it_cannot_do():
    spec = FaultSpec.parse("429:0.05@2, 500:0.02,drop:0.01,stall:0.01@0.5", seed=3)
    assert spec.rates == (("429", 0.05), ("500", 0.02), ("drop", 0.01), ("stall", 0.01))
    assert spec.params["429"] == 2 and spec.params["stall"] == 0.5 and spec.seed == 3
    assert str(spec) == "429:0.05@2,500:0.02,drop:0.01,stall:0.01@0.5"
    assert not FaultSpec.parse("") and not FaultSpec.parse(None)
    for bad in ("teapot:0.1", "429", "429:x", "429:1.5", "429:0.6,500:0.6", "drop:0.1,drop:0.1", "stall:0.1@-1",
                "399:0.1", "600:0.1", "4290:0.1", "429:0.1:retry-after=x", "429:0.1:wait=1", "drop:0.1:retry-after=1",
                "500:0.1:should-retry=maybe", "429:0.1:retry-after-ms"):  # fmt: skip
        with pytest.raises(ValueError):
            FaultSpec.parse(bad)


def test_spec_named_options_and_the_retry_headers_they_send():
    spec = FaultSpec.parse(
        "429:0.1:retry-after-ms=250,503:0.1:retry-after=2,500:0.1:should-retry=false,529:0.1,408:0.1,409:0.1@3"
    )
    plan = FaultPlan(spec)
    assert plan.retry_headers("429") == ({"retry-after-ms": "250"}, 0.25)
    assert plan.retry_headers("503") == ({"Retry-After": "2"}, 2.0)
    assert plan.retry_headers("500") == ({"x-should-retry": "false"}, None)
    assert plan.retry_headers("529") == ({"Retry-After": "1"}, 1.0)  # by default on 429, 503 and 529
    assert plan.retry_headers("408") == ({}, None)
    assert plan.retry_headers("409") == ({"Retry-After": "3"}, 3.0)
    again = FaultPlan(FaultSpec.parse(str(spec)))  # the text form parses back to the same behaviour
    assert all(again.retry_headers(k) == plan.retry_headers(k) for k, _ in spec.rates)


def test_rates_hold_within_binomial_bounds_and_the_seed_repeats():
    spec = FaultSpec.parse(
        "429:0.05,500:0.02,503:0.03,drop:0.01,stall:0.01,malformed:0.02,no_usage:0.04,529:0.02,overflow:0.01,"
        "odd_chunk:0.02,usage_off:0.01,bad_usage:0.02,midstream:0.01,huge:0.01",
        seed=7,
    )
    plan = FaultPlan(spec)
    n = 40_000
    draws = [plan.draw() for _ in range(n)]
    for kind, rate in spec.rates:
        count = draws.count(kind)
        assert count == plan.counts[kind]
        assert abs(count - n * rate) < 4.5 * math.sqrt(n * rate * (1 - rate)), (kind, count)
    assert draws.count(None) == n - sum(plan.counts.values())
    again = FaultPlan(spec)
    assert [again.draw() for _ in range(n)] == draws  # same seed, same faults in the same order
    variants = [plan.bad_usage_variant() for _ in range(4000)]
    assert {v: variants.count(v) > 800 for v in set(variants)} == dict.fromkeys(
        ("string", "negative", "float", "huge"), True
    )
    assert [again.bad_usage_variant() for _ in range(4000)] == variants


async def test_http_faults_answer_at_once_with_retry_after():
    async with (
        await start_sim("fast", faults="429:0.5@3,503:0.5@7") as sim,
        aiohttp.ClientSession() as http,
    ):
        seen = []
        for i in range(20):
            body = {"messages": MESSAGES, "max_tokens": 5, "stream": True}
            async with http.post(f"{sim.base_url}/chat/completions", json=body, headers={"X-Request-Id": f"f{i}"}) as r:
                error = (await r.json())["error"]
                seen.append((r.status, r.headers["Retry-After"], error["type"]))
        truth = await sim.wait_truth(20)
    assert {s for s in seen} <= {(429, "3", "rate_limit_error"), (503, "7", "server_error")}
    assert [str(s) for s, _, _ in seen] == [t["fault"] for t in truth]
    assert all(t["status"] == "fault" and t["output_tokens"] == 0 for t in truth)
    assert [t["retry_after"] for t in truth] == [3.0 if t["fault"] == "429" else 7.0 for t in truth]
    assert sim.faults.counts["429"] + sim.faults.counts["503"] == 20


EXPECTED_CLASS = {
    "429": "http_429",
    "500": "http_5xx",
    "503": "http_5xx",
    "drop": "disconnect",
    "stall": "timeout",
    "malformed": "malformed_stream",
    "no_usage": None,
    "usage_off": None,
    "odd_chunk": "malformed_stream",
    "bad_usage": "bad_usage",
    "midstream": "stream_error",
    None: None,
}


def test_client_error_counts_equal_the_sims_fault_counts(tmp_path):
    """A replay against `replay sim --faults ...`: each request's client error class is the one its
    fault implies, so the run's error counts equal the truth's fault counts exactly."""
    work = tmp_path / "w.jsonl"
    for i in range(10):
        write_trajectory(work, f"w{i}", simple_turns(15, output_tokens=20))
    faults = (
        "429:0.05,500:0.04,503:0.04,drop:0.05,stall:0.05@1.0,malformed:0.05,no_usage:0.05,usage_off:0.05,"
        "odd_chunk:0.05,bad_usage:0.05,midstream:0.05"
    )
    truth_path = tmp_path / "truth.jsonl"
    with embedded_host("fast", str(truth_path), faults, fault_seed=5) as sim:
        spec = RunSpec(
            trajectories=[str(work)],
            host=sim.base_url,
            model="m",
            load=LoadConfig(concurrency=8, tool_time=ToolTimePolicy.parse("none")),
            retries=0,  # a real host (as far as the run knows) would get retries: each fault is to show once
            stall_timeout_s=0.4,
            out=str(tmp_path / "run.jsonl"),
            progress=False,
        )
        result = execute(spec)
    truth = {t["request_id"]: t for t in map(orjson.loads, truth_path.read_bytes().splitlines())}
    run = read_run(result.path)
    assert len(run.requests) == len(truth) == 150
    faults_seen = {}
    for rec in run.requests:
        t = truth[rec.id]
        fault = t["fault"]
        faults_seen[fault] = faults_seen.get(fault, 0) + 1
        assert rec.error == EXPECTED_CLASS[fault], (fault, rec.error, rec.error_detail)
        if fault == "no_usage":
            assert rec.prompt_tokens is None and rec.output_events == 20
        elif fault == "bad_usage":
            assert rec.prompt_tokens is None and rec.output_tokens is None and rec.usage_raw
        elif fault == "usage_off":
            assert (rec.prompt_tokens, rec.output_tokens) == (t["prompt_tokens"] + 1, t["output_tokens"] + 1)
        elif fault is None:
            assert (rec.prompt_tokens, rec.output_tokens) == (t["prompt_tokens"], t["output_tokens"])
    expected: dict[str, int] = {}
    for fault, n in faults_seen.items():
        if EXPECTED_CLASS[fault]:
            expected[EXPECTED_CLASS[fault]] = expected.get(EXPECTED_CLASS[fault], 0) + n
    assert result.summary["errors_by_class"] == expected
    assert result.summary["invalid_usage"] == faults_seen["bad_usage"]
    assert result.summary["totals"]["ok"] == sum(n for f, n in faults_seen.items() if not EXPECTED_CLASS[f])
    assert all(faults_seen.get(k, 0) > 0 for k in EXPECTED_CLASS if k)  # every kind happened at least once
