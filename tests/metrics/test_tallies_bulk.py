"""The per-request tallies done in numpy give what one Python step per read gave: the inter-token histogram and the
AgentX coverage slices (both were half a millisecond of the event loop at every 500-token stream's end)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from replay.histogram import HIGHEST, Histogram
from replay.metrics.accumulator import US, Accumulator
from replay.metrics.recipes.recipe_tally import SLICE_S, RecipeTally
from replay.records.run_file import RequestRecord


def _record(rng: np.random.Generator, reads: int) -> RequestRecord:
    """A call whose reads carry 1-3 events each, with gaps from sub-microsecond to seconds."""
    gaps = rng.choice([rng.exponential(0.01), rng.exponential(2e-7), rng.exponential(1.5)], size=reads)
    times = 0.2 + np.cumsum(gaps)
    chunks: list[float] = []
    for t, n in zip(times.tolist(), rng.integers(1, 4, reads).tolist(), strict=True):
        chunks += [t, n]
    t_sent = float(rng.uniform(0, 5000))
    return RequestRecord(
        id="r", session=0, task=0, trajectory="t", turn=0, t_sent=t_sent, t_first_token=t_sent + chunks[0],
        t_last_token=t_sent + chunks[-2], t_done=t_sent + chunks[-2] + 0.001, status=200,
        output_tokens=int(sum(chunks[1::2])), output_events=int(sum(chunks[1::2])), chunks=chunks,
    )  # fmt: skip


@pytest.mark.parametrize("reads", [1, 2, 3, 16, 17, 500])
def test_the_itl_histogram_holds_one_gap_per_event_as_recording_them_one_by_one(reads: int) -> None:
    rng = np.random.default_rng(reads)
    for _ in range(20):
        r = _record(rng, reads)
        acc = Accumulator()
        acc._itl(r)
        expected = Histogram()
        ch = r.chunks
        for i in range(2, len(ch), 2):  # a read of k events after a gap g: k gaps of g/k
            gap = round((ch[i] - ch[i - 2]) * US / ch[i + 1])
            expected.record_value(min(max(gap, 1), HIGHEST), int(ch[i + 1]))
        assert acc.hist["itl"].encode() == expected.encode()


@pytest.mark.parametrize("reads", [1, 5, 16, 17, 40, 500])
def test_coverage_slices_are_those_of_one_floor_per_read(reads: int) -> None:
    rng = np.random.default_rng(100 + reads)
    for _ in range(20):
        r = _record(rng, reads)
        tally = RecipeTally()
        tally.origin = r.t_sent - float(rng.choice([0.0, 0.2, rng.uniform(0, 30)]))
        tally._slices(r)
        expected = {math.floor((r.t_first_token - tally.origin) / SLICE_S)}
        expected |= {math.floor((r.t_sent + r.chunks[i] - tally.origin) / SLICE_S) for i in range(0, len(r.chunks), 2)}
        assert tally.slices == expected
