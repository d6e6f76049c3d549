"""The lazy histogram reads percentiles and means as hdrh defines them, from numpy over its counts."""

from __future__ import annotations

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from replay.results.histogram import HIGHEST, Histogram


@pytest.mark.parametrize("seed", range(4))
def test_percentiles_and_mean_equal_hdrh_own(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = np.clip(rng.lognormal(8 + seed * 3, 2.5, 3000).astype(np.int64), 1, HIGHEST)
    mine, theirs = Histogram(), HdrHistogram(1, HIGHEST, 3)
    for v in values.tolist():
        mine.record_value(v)
        theirs.record_value(v)
    for p in (0, 1, 25, 50, 75, 90, 95, 99, 99.9, 100):
        assert mine.get_value_at_percentile(p) == theirs.get_value_at_percentile(p), p
    assert mine.get_mean_value() == pytest.approx(theirs.get_mean_value(), rel=1e-12)
    assert mine.get_total_count() == theirs.get_total_count() == values.size


def test_an_empty_histogram_allocates_nothing_and_merges_and_travels() -> None:
    empty, full = Histogram(), Histogram()
    assert empty.h is None and empty.get_total_count() == 0 and empty.encode() is None
    full.record_value(1234, 3)
    empty.add(Histogram())
    assert empty.h is None  # adding nothing allocates nothing
    empty.add(full)
    back = Histogram.decode(empty.encode())
    assert back.get_total_count() == 3 and back.get_value_at_percentile(50) == full.get_value_at_percentile(50)
    assert Histogram.decode(None).h is None
