"""At 64 concurrent streams the client's TTFT, token times and ITL agree with the sim's truth within 5 ms.

The sim runs in its own process (as ``replay run`` starts it; profile ``moe-8gpu``, the many-agents host)
and the client replays 64 sessions at once. Answers have different lengths and sessions pause for
different tool times, so calls end and arrive spread out as an agent fleet's do (64 identical answers
would end in one engine step, and the client's per-call work for all of them would hold its event loop
for tens of milliseconds). A first call's TTFT also holds the client opening its connection, which the
host cannot see; the truth is compared with TTFT on kept-alive connections, token times on every call.
"""

from __future__ import annotations

import itertools

import numpy as np
import orjson
import pytest
from conftest import simple_turns, write_trajectory

from replay.embedded_host import embedded_host
from replay.records import read_run
from replay.run import RunSpec, execute
from replay.runner import LoadConfig
from replay.sessions import ToolTimePolicy

TOLERANCE_S = 0.005
STREAMS = 64
PROFILE = "moe-8gpu"


def _per_token(base: float, flat: list[float]) -> list[float]:
    times: list[float] = []
    for i in range(0, len(flat), 2):
        times += [base + flat[i]] * int(flat[i + 1])
    return times


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
    truth = {t["request_id"]: t for t in map(orjson.loads, truth_path.read_bytes().splitlines())}
    return read_run(result.path), truth


def test_64_streams_really_ran_at_once(run64):
    run, truth = run64
    assert len(run.requests) == STREAMS * 4 and all(r.error is None for r in run.requests)
    edges = sorted(
        [(t["first_token"], 1) for t in truth.values()] + [(t["last_token"], -1) for t in truth.values()],
        key=lambda e: (e[0], e[1]),
    )
    assert max(itertools.accumulate(d for _, d in edges)) == STREAMS


def test_client_ttft_tokens_and_itl_within_5ms_of_truth(run64):
    run, truth = run64
    ttft, token, itl = [], [], []
    for rec in run.requests:
        t = truth[rec.id]
        assert rec.output_tokens == t["output_tokens"] and rec.cached_tokens == t["cached_tokens"]
        if rec.turn > 0:  # kept-alive connection: the host sees the call as soon as it is sent
            ttft.append(abs((rec.t_first_token - rec.t_sent) - (t["first_token"] - t["arrival"])))
        client = _per_token(rec.t_sent, rec.chunks)
        host = _per_token(0.0, t["writes"])
        assert len(client) == len(host) == rec.max_tokens
        token += [abs(c - h) for c, h in zip(client, host, strict=True)]
        gaps = zip(itertools.pairwise(client), itertools.pairwise(host), strict=True)
        itl += [abs((c1 - c0) - (h1 - h0)) for (c0, c1), (h0, h1) in gaps]
    figures = {
        name: (*(float(np.percentile(values, q)) for q in (50, 95, 99)), max(values))
        for name, values in (("ttft", ttft), ("token", token), ("itl", itl))
    }
    print("\n64 streams, deviation from truth in ms (p50, p95, p99, max):",
          {k: tuple(round(v * 1e3, 2) for v in f) for k, f in figures.items()})  # fmt: skip
    # The client stamps bytes where they enter aiohttp (replay/read_stamps.py) and the sim stamps a request
    # where its first bytes enter the server, so a burst of 64 streams is stamped before any task runs on
    # either side. What remains is the two processes sharing two cores: 95 calls (and inter-token gaps: 99)
    # in 100 within 5 ms; a busy machine can still stall a whole burst, hence the bound on the worst case.
    assert figures["itl"][2] < TOLERANCE_S, figures
    for name, (p50, p95, _, worst) in figures.items():
        assert p50 < TOLERANCE_S and p95 < TOLERANCE_S and worst < 5 * TOLERANCE_S, (name, figures)
