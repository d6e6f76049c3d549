"""Breakdowns by context length and turn depth, on hand-made records: bucket edges, figures, and the summary's key."""

from __future__ import annotations

import pytest

from replay.metrics.breakdowns import CONTEXT_LABELS, TURN_LABELS, breakdown
from replay.metrics.summary import summarize
from replay.records.run_file import RequestRecord, RunData

PHASES = {"start": 0.0, "all_started": 0.0, "steady_start": 1.0, "stop": 100.0, "end": 101.0}


def _req(
    i: int, prompt: int | None, turn: int = 0, *, ttft: float = 0.1, cached: int | None = 0, **kw
) -> RequestRecord:
    """A successful call sent at 2 + i: 11 output tokens, the last one second after the first."""
    base = dict(
        id=f"r{i}", session=0, task=0, trajectory="t", turn=turn, status=200, t_sent=2.0 + i,
        t_first_token=2.0 + i + ttft, t_first_answer=2.0 + i + ttft, t_last_token=3.0 + i + ttft,
        t_done=3.0 + i + ttft, output_tokens=11, output_events=11, prompt_tokens=prompt, cached_tokens=cached,
        prompt_tokens_est=prompt or 100, reusable_prefix_tokens=0,
    )  # fmt: skip
    base.update(kw)
    return RequestRecord(**base)


def _rows(rows: list[dict]) -> dict[str, dict]:
    return {r["bucket"]: r for r in rows}


def test_context_buckets_split_at_powers_of_1024_and_keep_every_bucket() -> None:
    calls = [_req(0, 8191), _req(1, 8192), _req(2, 32 * 1024 - 1), _req(3, 64 * 1024), _req(4, 200_000)]
    b = breakdown(calls)
    assert [r["bucket"] for r in b["by_context"]] == list(CONTEXT_LABELS)
    counts = {r["bucket"]: r["requests"] for r in b["by_context"]}
    assert counts == {"<8k": 1, "8-32k": 2, "32-64k": 0, "64-128k": 1, ">=128k": 1}
    empty = _rows(b["by_context"])["32-64k"]
    assert empty["host_hit_ratio"] is None and empty["ttft_s"] == {"p50": None, "p95": None, "n": 0}
    assert _rows(b["by_context"])[">=128k"]["high"] is None and b["prompt_tokens_from"] == "host"


def test_bucket_figures_are_the_summary_definitions() -> None:
    # turn 3: host hit 50 %, client reuse 80 % of its estimate; TTFTs 0.1 .. 0.4 s; decode 10 tok/s after the first
    calls = [
        _req(i, 1000, turn=3, ttft=0.1 * (i + 1), cached=500, prompt_tokens_est=1000, reusable_prefix_tokens=800)
        for i in range(4)
    ]
    calls.append(_req(9, 1000, turn=0, cached=None))  # the host reported no cached count: not in the hit ratio
    b = _rows(breakdown(calls)["by_turn"])
    assert list(b) == list(TURN_LABELS)
    row = b["2-3"]
    assert row["requests"] == 4
    assert row["host_hit_ratio"] == pytest.approx(0.5)
    assert row["client_reuse_ratio"] == pytest.approx(0.8)
    assert row["cache_efficiency"] == pytest.approx(0.5 / 0.8)
    # HdrHistogram percentiles: 3 significant digits
    assert row["ttft_s"]["p50"] == pytest.approx(0.2, rel=1e-3) and row["ttft_s"]["p95"] == pytest.approx(0.4, rel=1e-3)
    assert row["decode_tps"]["p25"] == pytest.approx(10.0, rel=1e-3) and row["decode_tps"]["n"] == 4
    assert b["0"]["requests"] == 1 and b["0"]["host_hit_ratio"] is None and b["1"]["requests"] == 0


def test_prompt_length_falls_back_to_the_client_estimate() -> None:
    calls = [_req(0, None, prompt_tokens_est=40_000), _req(1, 1000)]
    b = breakdown(calls)
    assert _rows(b["by_context"])["32-64k"]["requests"] == 1
    assert b["prompt_tokens_from"] == "host, client estimate where the host reported none"
    assert breakdown([_req(0, None)])["prompt_tokens_from"] == "client estimate"


def test_summary_carries_the_breakdown_of_its_window_calls() -> None:
    inside = [_req(i, 1000 * (i + 1), ttft=0.01 * (i + 1)) for i in range(20)]
    warmup = _req(-2, 100_000)  # sent at 0.0, before the window opens at 1.0
    failed = _req(30, 100_000, error="http_5xx")
    s = summarize(RunData({}, [*inside, warmup, failed], [], PHASES, [], None))
    rows = _rows(s["breakdown"]["by_context"])
    assert sum(r["requests"] for r in rows.values()) == s["window"]["requests"] == 20
    assert rows["64-128k"]["requests"] == 0
    # every window call is in one bucket here: its figures are the summary's (HdrHistogram: 3 significant digits)
    assert rows["<8k"]["requests"] == 8 and _rows(s["breakdown"]["by_turn"])["0"]["requests"] == 20
    turn0 = _rows(s["breakdown"]["by_turn"])["0"]
    assert turn0["ttft_s"]["p50"] == pytest.approx(s["ttft_s"]["p50"], rel=1e-3)
    assert turn0["ttft_s"]["p95"] == pytest.approx(s["ttft_s"]["p95"], rel=1e-3)
    assert turn0["decode_tps"]["p25"] == pytest.approx(s["user_decode_tps"]["p25"], rel=1e-3)
    assert turn0["host_hit_ratio"] == s["cache"]["host_hit_ratio"]
