"""Metric definitions on hand-made records: exact values, no timing."""

from __future__ import annotations

import pytest

from replay.metrics.summary import summarize
from replay.records.run_file import RequestRecord, RunData, TaskRecord


def _req(**kw) -> RequestRecord:
    base = dict(id="r", session=0, task=0, trajectory="t", turn=0, status=200)
    base.update(kw)
    return RequestRecord(**base)


def _run(requests, tasks=(), phases=None) -> RunData:
    phases = phases or {"start": 0.0, "all_started": 0.0, "steady_start": 1.0, "stop": 11.0, "end": 12.0}
    return RunData(header={}, requests=list(requests), tasks=list(tasks), phases=phases, client=[], footer=None)


def test_latencies_itl_and_decode_speed() -> None:
    # sent at 2.0; reads at +0.1 (1 token), +0.2 (2 tokens), +0.5 (1 token); done at +0.6
    r = _req(t_sent=2.0, t_first_token=2.1, t_first_answer=2.2, t_last_token=2.5, t_done=2.6,
             output_tokens=4, output_events=4, chunks=[0.1, 1, 0.2, 2, 0.5, 1], prompt_tokens=100, cached_tokens=60,
             prompt_tokens_est=98, reusable_prefix_tokens=70)  # fmt: skip
    s = summarize(_run([r]))
    assert s["ttft_s"]["p50"] == pytest.approx(0.1, rel=1e-3)
    assert s["ttfat_s"]["p50"] == pytest.approx(0.2, rel=1e-3)
    assert s["e2e_s"]["p50"] == pytest.approx(0.6, rel=1e-3)
    # ITL: gap 0.1 over 2 tokens -> two samples of 0.05; gap 0.3 over 1 token -> one sample of 0.3
    assert s["itl_s"]["n"] == 3
    assert s["itl_s"]["p50"] == pytest.approx(0.05, rel=1e-3)
    assert s["itl_s"]["p99"] == pytest.approx(0.3, rel=1e-3)
    assert s["user_decode_tps"]["p50"] == pytest.approx(3 / 0.4, rel=1e-3)
    assert s["user_output_tps_incl_wait"]["p50"] == pytest.approx(4 / 0.6, rel=1e-3)
    assert s["cache"]["client_reuse_ratio"] == pytest.approx(70 / 98)
    assert s["cache"]["host_hit_ratio"] == pytest.approx(0.6)
    assert s["cache"]["efficiency"] == pytest.approx(0.6 / (70 / 98))


def test_throughput_counts_only_work_done_inside_the_window() -> None:
    win = {"start": 0.0, "all_started": 0.0, "steady_start": 10.0, "stop": 20.0, "end": 30.0}
    straddle_start = _req(id="a", t_sent=9.0, t_first_token=9.5, t_last_token=10.5, t_done=10.6, output_tokens=3,
                          output_events=3, chunks=[0.5, 1, 1.0, 1, 1.5, 1], prompt_tokens=1000,
                          cached_tokens=900)  # fmt: skip
    inside = _req(id="b", t_sent=12.0, t_first_token=12.5, t_last_token=13.0, t_done=13.0, output_tokens=4,
                  output_events=2, chunks=[0.5, 1, 1.0, 1], prompt_tokens=500, cached_tokens=100)  # fmt: skip
    straddle_end = _req(id="c", t_sent=19.0, t_first_token=19.5, t_last_token=20.5, t_done=20.5, output_tokens=2,
                        output_events=2, chunks=[0.5, 1, 1.5, 1], prompt_tokens=200, cached_tokens=None)  # fmt: skip
    s = summarize(_run([straddle_start, inside, straddle_end], phases=win))
    t = s["throughput"]["tokens"]
    # a: input before the window, 2 of its 3 tokens inside; b: all in (2 events of 2 tokens each);
    # c: input inside (cached unknown -> counted as new), 1 of 2 tokens inside
    assert t["output"] == pytest.approx(2 + 4 + 1)
    assert t["cached_input"] == pytest.approx(100)
    assert t["new_input"] == pytest.approx(400 + 200)
    assert s["window_s"] == 10.0
    assert s["throughput"]["total_tps"] == pytest.approx((7 + 100 + 600) / 10)
    assert s["throughput"]["total_tokens_per_min"] == pytest.approx((7 + 100 + 600) * 6)
    assert s["window"]["requests"] == 2  # a was sent before the window opened
    # host hit ratio only over calls that reported cached tokens
    assert s["cache"]["requests_with_cached_tokens"] == 1


def test_errors_totals_and_task_projection() -> None:
    ok = _req(id="a", t_sent=2.0, t_first_token=2.1, t_last_token=2.2, t_done=2.3, output_tokens=2, output_events=2,
              chunks=[0.1, 1, 0.2, 1], prompt_tokens=10, cached_tokens=0)  # fmt: skip
    bad = _req(id="b", t_sent=3.0, t_done=3.1, status=500, error="http_5xx")
    task = TaskRecord(task=0, session=0, trajectory="t", t_start=0.0, t_end=10.0, turns=2, turns_total=2,
                      model_time_s=4.0, tool_time_s=6.0, complete=True)  # fmt: skip
    cut = TaskRecord(task=1, session=1, trajectory="t", t_start=5.0, t_end=11.0, turns=1, turns_total=3,
                     model_time_s=1.0, tool_time_s=1.0, complete=False)  # fmt: skip
    s = summarize(_run([ok, bad], tasks=[task, cut]))
    assert (s["requests"], s["errors"], s["errors_by_class"]) == (2, 1, {"http_5xx": 1})
    assert s["totals"]["prompt_tokens"] == 10 and s["totals"]["ok"] == 1
    k = s["tasks"]
    assert (k["count"], k["incomplete"]) == (1, 1)
    assert k["model_share"] == pytest.approx(0.4)
    assert k["projected_wall_s"]["2x"] == pytest.approx(8.0)
    assert k["projected_wall_s"]["10x"] == pytest.approx(6.4)
    assert k["projected_saving"]["10x"] == pytest.approx(0.36)


def test_run_that_never_reached_steady_state_says_so() -> None:
    r = _req(t_sent=0.5, t_first_token=0.6, t_last_token=0.7, t_done=0.8, output_tokens=2, output_events=2,
             chunks=[0.1, 1, 0.2, 1])  # fmt: skip
    s = summarize(_run([r], phases={"start": 0.0, "all_started": 0.0, "stop": 1.0, "end": 1.2}))
    assert s["window"]["steady"] is False
    assert s["window_s"] == 1.0 and s["window"]["requests"] == 1
