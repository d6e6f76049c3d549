"""The lazy histogram reads percentiles and means as hdrh defines them, from numpy over its counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from replay.histogram import HIGHEST, Histogram


@pytest.mark.parametrize("seed", range(4))
def test_percentiles_and_mean_equal_hdrh_own(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = np.clip(rng.lognormal(8 + seed * 3, 2.5, 3000).astype(np.int64), 1, HIGHEST)
    mine, theirs = Histogram(), HdrHistogram(1, HIGHEST, 3)
    for v in values.tolist():
        mine.record_value(v)
        theirs.record_value(v)
    for p in (0, 1, 25, 50, 75, 90, 95, 99, 99.9, 100):
        rank = max(math.ceil(round(p * values.size / 100, 9)), 1)  # the nearest rank; hdrh rounds p × n / 100
        asked = 100 * rank / values.size if p else 0  # the percentile at which hdrh's rounding gives that rank
        assert mine.get_value_at_percentile(p) == theirs.get_value_at_percentile(asked), p
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


def _edges() -> list[int]:
    """Every power of two's neighbours up to past the range, where hdrh's bucket arithmetic turns."""
    return [0, 1, 2, 3, HIGHEST - 1, HIGHEST, HIGHEST + 1, 1 << 44] + [
        v for k in range(1, 45) for v in ((1 << k) - 1, 1 << k, (1 << k) + 1)
    ]


def _same(mine: Histogram, theirs: HdrHistogram) -> None:
    assert mine.h is not None
    assert np.array_equal(np.ctypeslib.as_array(mine.h.counts), np.ctypeslib.as_array(theirs.counts))
    assert mine.h.total_count == theirs.total_count
    assert (mine.h.min_value, mine.h.max_value) == (theirs.min_value, theirs.max_value)
    assert mine.encode() == theirs.encode().decode()


@pytest.mark.parametrize("seed", range(3))
def test_recording_one_by_one_and_in_bulk_fill_the_counts_hdrh_itself_fills(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = [*_edges(), *rng.lognormal(6 + seed * 4, 3.0, 4000).astype(np.int64).tolist()]
    counts = rng.integers(0, 5, len(values)).tolist()
    theirs, one = HdrHistogram(1, HIGHEST, 3), Histogram()
    for v, c in zip(values, counts, strict=True):  # out of range too: both ignore what they cannot hold
        theirs.record_value(v, c)
        one.record_value(v, c)
    _same(one, theirs)
    # In bulk: values in 1 .. HIGHEST, as its callers clip them.
    inside = [(v, c) for v, c in zip(values, counts, strict=True) if 1 <= v <= HIGHEST and c]
    theirs, bulk = HdrHistogram(1, HIGHEST, 3), Histogram()
    for v, c in inside:
        theirs.record_value(v, c)
    bulk.record_many(np.array([v for v, _ in inside]), np.array([c for _, c in inside]))
    _same(bulk, theirs)


def test_bulk_recording_sums_repeated_values_and_skips_zero_counts() -> None:
    bulk, loop = Histogram(), Histogram()
    values, counts = np.array([5, 5, 9000, 5, 1 << 30]), np.array([1, 2, 0, 4, 3])
    bulk.record_many(values, counts)
    for v, c in zip(values.tolist(), counts.tolist(), strict=True):
        if c:
            loop.record_value(v, c)
    assert bulk.encode() == loop.encode() and bulk.get_total_count() == 10
    assert bulk.h is not None and bulk.h.max_value == 1 << 30
    empty = Histogram()
    empty.record_many(np.array([7]), np.array([0]))
    assert empty.h is None


def test_percentiles_are_nearest_rank_as_the_docs_define_them() -> None:
    """Issue 24: p99 of 64 values is the largest (the smallest value with 99 % of the values at or below it); hdrh's
    rounding of the rank read the 63rd."""
    h = Histogram()
    for v in range(1, 65):
        h.record_value(v * 1000)
    assert h.get_value_at_percentile(99) == h.get_value_at_percentile(100) >= 64_000
    assert 63_000 <= h.get_value_at_percentile(98) < 63_100  # ⌈0.98 × 64⌉ = 63
    assert 32_000 <= h.get_value_at_percentile(50) < 32_100  # ⌈0.5 × 64⌉ = 32


def test_a_dropped_histogram_is_freed_at_once_not_at_a_full_collection() -> None:
    """Issue 24: hdrh's histogram and its encoder point at each other, so every dropped histogram (a soak's window
    accumulators, each one decoded) kept its 0.5 MB of counts until a rare full collection: the client grew from
    127 MB to 156 MB in four minutes. Reference counting alone must free them."""
    import gc

    def alive() -> int:
        return sum(isinstance(o, HdrHistogram) for o in gc.get_objects())

    gc.collect()
    gc.disable()
    try:
        before = alive()
        for _ in range(20):
            h = Histogram()
            h.record_value(1234)
            back = Histogram.decode(h.encode())
            assert back.get_total_count() == 1
            del h, back
        after = alive()
    finally:
        gc.enable()
    assert after == before


@pytest.mark.parametrize("seed", range(3))
def test_recording_clipped_fills_what_hdrh_fills_with_the_value_rounded_and_clipped(seed: int) -> None:
    """``record_clipped`` (every per-call figure's path) holds what hdrh holds of ``min(max(round(x), 1), HIGHEST)``,
    for values below 1, fractions, huge values, and after a decoded histogram's counts (kept sparse) are folded."""
    rng = np.random.default_rng(seed)
    values = [*rng.lognormal(6 + seed * 4, 3.0, 2000).tolist(), -5.0, 0.0, 0.49, 0.5, 1.5, 2.5, 2.0**41, 1e15]
    start = Histogram()
    start.record_value(777, 4)
    mine, theirs = Histogram.decode(start.encode()), HdrHistogram(1, HIGHEST, 3)
    theirs.record_value(777, 4)
    for x in values:
        v = min(max(round(x), 1), HIGHEST)
        assert mine.record_clipped(x) == v
        theirs.record_value(v)
    assert mine.get_total_count() == len(values) + 4
    _same(mine, theirs)
