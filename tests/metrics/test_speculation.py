"""Speculative decoding's figures from what a host sends: per-call fields read through the bounded parser, the
counters and gauges of its Prometheus text, and the windows' sums."""

from __future__ import annotations

from replay.clients import provider_fields
from replay.clients.stream import StreamState
from replay.metrics.host import speculation
from replay.runner.host_metrics import HostMetrics, parse

VLLM = """# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{model_name="m"} 100
vllm:spec_decode_num_draft_tokens_total{model_name="m"} 300
vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 180
vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="0"} 90
"""
SGLANG = """# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{dp_rank="0"} 2.5
sglang:spec_accept_length{dp_rank="1"} 3.5
"""


def test_vllm_counters_per_window_and_sglangs_gauge_averaged_over_ranks() -> None:
    m = HostMetrics("http://127.0.0.1:1/metrics")
    m.update(VLLM)
    window = m.update(VLLM.replace(" 100", " 150").replace(" 300", " 450").replace(" 180", " 280"))
    assert (window["spec_drafts"], window["spec_draft_tokens"], window["spec_accepted_tokens"]) == (50, 150, 100)
    sp = speculation.from_host_metrics(window)
    assert sp is not None and sp["acceptance_length_mean"] == 1 + 100 / 50 and sp["source"] == "host metrics"
    assert parse(SGLANG)["spec_acceptance_length"] == 3.0
    sg = speculation.from_host_metrics(parse(SGLANG))
    assert sg is not None and sg["acceptance_length_mean"] == 3.0 and sg["accepted_tokens"] is None
    run = speculation.over_windows([{"host_metrics": window}, {"host_metrics": window}, {"host_metrics": {}}])
    assert run is not None and (run["accepted_tokens"], run["drafts"], run["windows"]) == (200, 100, 2)
    assert speculation.over_windows([{"host_metrics": {"kv_cache_usage": 0.5}}]) is None


def test_a_hosts_odd_counts_are_left_out_with_a_note() -> None:
    st = StreamState()
    chunk = {"choices": [{"index": 0, "delta": {}, "meta_info": {"spec_accept_token_num": 2**64,
             "spec_draft_token_num": 30, "spec_verify_ct": True}}]}  # fmt: skip
    provider_fields.note_chunk(st, chunk)
    assert provider_fields.speculation(st) == {"drafted": 30}
    assert any("spec_accept_token_num" in n for n in st.notes) and any("spec_verify_ct" in n for n in st.notes)
    st = StreamState(timings={"draft_n": 12, "draft_n_accepted": 7, "predicted_n": 20})
    assert provider_fields.speculation(st) == {"accepted": 7, "drafted": 12}
    assert provider_fields.speculation(StreamState(timings={"predicted_n": 20})) is None


def test_counts_read_back_from_a_file_go_through_the_bounds() -> None:
    tally = list(speculation.EMPTY)
    for value in ({"accepted": "7", "drafts": -1}, {"accepted": 1.5}, "x", None):
        speculation.add(tally, value)
    assert speculation.figures(tally) is None
    speculation.add(tally, {"accepted": 6, "drafted": 9, "drafts": 3})
    speculation.add(tally, {"accepted": 4, "drafted": 6})  # no drafts: not in the mean acceptance length
    assert speculation.figures(tally) == {"acceptance_length_mean": 3.0, "accepted_tokens": 10, "drafted_tokens": 15,
                                          "drafts": 3, "calls": 2, "source": "calls"}  # fmt: skip
