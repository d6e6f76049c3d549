"""E2E-normalised interactivity (InferenceX AgentX's x axis) on hand-made records: the slow tail inverted after the
percentile, the calls it admits, and the same figures from a windowed run's records and from its window records."""

from __future__ import annotations

import pytest

from replay.metrics.summary import summarize
from replay.metrics.windows import WindowRecorder, rebuild
from replay.records.run_file import RequestRecord, RunData


def _req(i: int, e2e: float, out: int, prompt: int | None = 100, est: int = 90, ttft: float = 0.03) -> RequestRecord:
    t = 2.0 + i
    chunks = [ttft, 1, e2e, out - 1] if out > 1 else [ttft, 1]
    return RequestRecord(id=f"r{i}", session=0, task=i, trajectory="t", turn=0, status=200, t_sent=t,
                         t_first_token=t + ttft, t_last_token=t + e2e, t_done=t + e2e, output_tokens=out,
                         output_events=out, chunks=chunks, prompt_tokens=prompt,
                         prompt_tokens_est=est)  # fmt: skip


PHASES = {"start": 0.0, "all_started": 0.0, "steady_start": 1.0, "stop": 40.0, "end": 41.0}


def _run(requests) -> RunData:
    return RunData(header={}, requests=list(requests), tasks=[], phases=PHASES, client=[], footer=None)


def test_the_percentile_is_taken_of_seconds_per_token_and_then_inverted() -> None:
    # 0.02 and 0.04 s per output token (InferenceX's own example): p50 is the fast call, p75..p95 the slow one
    s = summarize(_run([_req(0, 1.0, 50), _req(1, 2.0, 50)]))["interactivity_e2e"]
    assert s["n"] == 2
    assert s["p50"] == pytest.approx(1 / 0.02, rel=1e-3)
    for p in ("p75", "p90", "p95"):
        assert s[p] == pytest.approx(1 / 0.04, rel=1e-3)
    assert s["mean"] == pytest.approx(1 / 0.03, rel=1e-3)  # 1 / the mean ratio, not the mean speed
    assert s["std"] == pytest.approx(12.5, rel=1e-3)  # population spread of the speeds 50 and 25


def test_only_calls_with_latency_output_ttft_and_input_above_zero_count() -> None:
    kept = _req(0, 1.0, 50)
    no_input = _req(1, 9.0, 50, prompt=0, est=0)
    estimate_only = _req(2, 3.0, 50, prompt=None, est=80)  # no host count: the client's estimate stands in
    no_ttft = _req(3, 9.0, 50, ttft=0.0)
    one_token = _req(4, 0.5, 1)  # one output token still counts: 0.5 s for it
    failed = _req(5, 9.0, 50)
    failed.error = "http_5xx"
    s = summarize(_run([kept, no_input, estimate_only, no_ttft, one_token, failed]))["interactivity_e2e"]
    assert s["n"] == 3  # 0.02, 0.06 and 0.5 s per token
    assert s["p95"] == pytest.approx(1 / 0.5, rel=1e-3)  # the slowest admitted call
    assert s["p50"] == pytest.approx(1 / 0.06, rel=1e-3)  # rank round(1.5) = 2 of 3


def test_an_empty_run_has_no_value_and_says_it_counted_none() -> None:
    s = summarize(_run([]))["interactivity_e2e"]
    assert s == {"p50": None, "p75": None, "p90": None, "p95": None, "mean": None, "std": None, "n": 0}


def test_window_records_rebuild_the_same_interactivity() -> None:
    reqs = [_req(i, 0.5 + 0.1 * i, 20 + i) for i in range(30)]
    run = _run(reqs)
    rec = WindowRecorder(5.0)
    for name, t in PHASES.items():
        if name != "end":
            rec.phase(name, t)
    records = []
    for r in reqs:
        while r.t_done >= rec.due():
            records.append({"type": "window", **rec.close(rec.due())})
        rec.request(r)
    records.append({"type": "window", **rec.close(PHASES["stop"])})
    run.marks = records
    from replay.metrics.summary import steady_window

    assert rebuild(run, steady_window(run))["interactivity_e2e"] == summarize(run)["interactivity_e2e"]
