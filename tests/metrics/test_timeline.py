"""A run over time (token rates, calls in flight) and each session's intervals, on hand-made records."""

from __future__ import annotations

import numpy as np
import pytest

from replay.metrics.timeline import INTERVAL_SOURCES, Interval, bin_width, series, session_intervals
from replay.records.run_file import RequestRecord, RunData


def _req(rid: str, turn: int, t_call: float, t_sent: float, t_done: float, **kw) -> RequestRecord:
    base = dict(id=rid, session=0, task=0, trajectory="t", turn=turn, status=200, t_call=t_call, t_sent=t_sent,
                t_first_token=t_sent + 0.5, t_last_token=t_done, t_done=t_done, output_tokens=4, output_events=2,
                chunks=[0.5, 1, t_done - t_sent, 1], prompt_tokens=1000, cached_tokens=600)  # fmt: skip
    base.update(kw)
    return RequestRecord(**base)


def _run(requests: list[RequestRecord]) -> RunData:
    return RunData({}, requests, [], {"start": 100.0, "end": 110.0}, [], None)


def test_bin_widths_are_round_and_bounded() -> None:
    assert bin_width(10.0) == 0.1
    assert bin_width(600.0) == 5.0
    assert bin_width(0.5) == 0.05  # never finer than 50 ms
    for seconds in (3.3, 47.0, 1234.0, 86_400.0):
        assert seconds / bin_width(seconds) <= 120


def test_series_places_every_token_and_call_second() -> None:
    a = _req("a", 0, 100.9, 101.0, 103.0)
    b = _req("b", 1, 104.0, 104.2, 105.0, prompt_tokens=None, cached_tokens=None, prompt_tokens_est=700)
    c = _req("c", 0, 101.5, 101.5, 102.0, session=1, task=1)
    s = series(_run([a, b, c]))
    assert s.bin_s == 0.1 and s.t.size == 100
    # every token of the run once: 2 events of 2 tokens each per call; input at the first token
    assert float(np.sum(s.output_tps) * s.bin_s) == pytest.approx(12)
    assert float(np.sum(s.cached_input_tps) * s.bin_s) == pytest.approx(1200)
    assert float(np.sum(s.new_input_tps) * s.bin_s) == pytest.approx(400 + 400 + 700)  # b: the client estimate
    assert s.cached_input_tps[15] == pytest.approx(600 / 0.1)  # a's first token at 1.5 s
    # calls in flight: the area is the calls' summed duration; two at once while a and c overlap
    assert float(np.sum(s.in_flight) * s.bin_s) == pytest.approx(2.0 + 0.8 + 0.5)
    assert s.in_flight[17] == pytest.approx(2.0) and s.in_flight[35] == pytest.approx(0.0)


def test_session_intervals_calls_waits_and_pauses_of_each_agent() -> None:
    a = _req("a", 0, 100.9, 101.0, 103.0)
    sub = _req("s", 0, 103.1, 103.1, 103.6, parent="t", trajectory="helper")
    failed = _req("b", 1, 104.0, 104.2, 105.0, error="http_5xx")
    other = _req("c", 0, 101.5, 101.5, 102.0, session=1, task=1)
    ivs = session_intervals(_run([failed, other, sub, a]))
    by = {(iv.session, iv.kind): iv for iv in ivs}
    assert by[(0, "model call")] == Interval(0, "model call", 1.0, 3.0)
    waits = [(iv.start, iv.end) for iv in ivs if iv.kind == "send wait"]
    assert waits == [(pytest.approx(0.9), pytest.approx(1.0)), (pytest.approx(4.0), pytest.approx(4.2))]
    assert by[(0, "failed call")].start == pytest.approx(4.2)
    assert by[(0, "subagent call")].end == pytest.approx(3.6)
    # the parent's pause runs from its call's end to its next call's beginning (subagents inside it)
    pauses = [iv for iv in ivs if iv.kind == "tool pause"]
    assert pauses == [Interval(0, "tool pause", pytest.approx(3.0), pytest.approx(4.0))]
    assert [iv.kind for iv in ivs if iv.session == 1] == ["model call"]
    assert [iv.start for iv in ivs if iv.session == 0] == sorted(iv.start for iv in ivs if iv.session == 0)


def test_a_new_interval_source_adds_its_kind() -> None:
    def throttled(run: RunData):
        for r in run.requests:
            yield Interval(r.session, "throttled", r.t_call - 100.0 - 0.2, r.t_call - 100.0)

    ivs = session_intervals(_run([_req("a", 0, 100.9, 101.0, 103.0)]), [*INTERVAL_SOURCES, throttled])
    assert {iv.kind for iv in ivs} == {"model call", "send wait", "throttled"}
