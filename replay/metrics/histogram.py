"""One histogram type for every latency and speed figure: an HdrHistogram made only when its first value comes.

Every figure shares one range (1 .. 2^40: µs for 12 days, or milli-tokens/s) and 3 significant digits, so any two
histograms merge exactly, across windows, segments and workers. An HdrHistogram of that range holds about 130 KB
of counts whatever it holds; an accumulator carries dozens of them (per breakdown bucket, per host timing) and most
stay empty, so allocating them lazily keeps a window's accumulators, and the summary made at the end, small. The
methods are HdrHistogram's names, so readers use either.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.ctypeslib  # imported at start-up, not lazily by the first call's end (0.7 ms on the loop)
from hdrh.histogram import HdrHistogram

HIGHEST = 1 << 40
DIGITS = 3


def _new() -> HdrHistogram:
    return HdrHistogram(1, HIGHEST, DIGITS)


@cache
def _values() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per counts index: the lowest, highest and median equivalent value (the same for every histogram here).

    hdrh reads percentiles and the mean by walking all 32,768 counts in Python (0.2 s a mean); these arrays let
    numpy do it in microseconds, with hdrh's own definitions (checked against it in tests/metrics/test_histogram.py)."""
    h = _new()
    index = np.arange(h.counts_len, dtype=np.int64)
    bucket = (index >> h.sub_bucket_half_count_magnitude) - 1
    sub = (index & (h.sub_bucket_half_count - 1)) + h.sub_bucket_half_count
    first = bucket < 0
    sub[first] -= h.sub_bucket_half_count
    bucket[first] = 0
    lowest = sub << (bucket + h.unit_magnitude)
    size = np.left_shift(np.int64(1), bucket + h.unit_magnitude)
    return lowest, lowest + size - 1, lowest + (size >> 1)


def _counts(h: HdrHistogram) -> np.ndarray:
    return np.ctypeslib.as_array(h.counts)


class Histogram:
    """An HdrHistogram allocated on first use (see the module's docstring)."""

    __slots__ = ("h",)

    def __init__(self) -> None:
        self.h: HdrHistogram | None = None

    def record_value(self, value: int, count: int = 1) -> None:
        """hdrh's ``record_value`` with its index worked out inline (a third of its cost, per call on every request's
        end); values it cannot hold are ignored, as hdrh ignores them."""
        if self.h is None:
            self.h = _new()
        h = self.h
        value = int(value)
        if value < 0:
            return
        half = h.sub_bucket_half_count_magnitude
        bucket = (value | h.sub_bucket_mask).bit_length() - h.unit_magnitude - (half + 1)
        index = ((bucket + 1) << half) + (value >> (bucket + h.unit_magnitude)) - h.sub_bucket_half_count
        if index >= h.counts_len:
            return
        h.counts[index] += count
        h.total_count += count
        if value < h.min_value:
            h.min_value = value
        if value > h.max_value:
            h.max_value = value

    def record_many(self, values: np.ndarray, counts: np.ndarray) -> None:
        """``record_value(v, c)`` for every pair with a count (pairs with none are skipped, min and max too), in one
        numpy pass: the same counts, total, min and max as that loop (checked against hdrh in
        tests/metrics/test_histogram.py), without a Python call per value. A 500-token answer's
        inter-token gaps were half a millisecond of the event loop's time one by one, at every stream's end.
        Values must lie in 1 .. HIGHEST (callers clip), counts be non-negative integers."""
        values = np.asarray(values, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        keep = counts > 0
        if not keep.all():
            values, counts = values[keep], counts[keep]
        if not len(values):
            return
        if self.h is None:
            self.h = _new()
        h = self.h
        half = h.sub_bucket_half_count_magnitude
        # hdrh's bucket: the bit length of (value | sub_bucket_mask) beyond the sub-bucket's; frexp's exponent is
        # the bit length of an integer below 2^53 exactly.
        bucket = np.frexp((values | h.sub_bucket_mask).astype(np.float64))[1] - h.unit_magnitude - (half + 1)
        sub = values >> (bucket + h.unit_magnitude)
        index = ((bucket + 1) << half) + sub - h.sub_bucket_half_count
        low = int(index.min())
        added = np.bincount(index - low, weights=counts)  # exact: float64 holds integers below 2^53
        view = _counts(h)[low : low + len(added)]
        view += added.astype(view.dtype)
        h.total_count += int(counts.sum())
        h.min_value = min(h.min_value, int(values.min()))
        h.max_value = max(h.max_value, int(values.max()))

    def add(self, other: Histogram) -> None:
        if other.h is None or not other.h.get_total_count():
            return
        if self.h is None:
            self.h = _new()
        self.h.add(other.h)

    def get_total_count(self) -> int:
        return self.h.get_total_count() if self.h is not None else 0

    def get_value_at_percentile(self, p: float) -> int:
        """hdrh's value at percentile ``p``: the highest value equivalent to the first index whose running count
        reaches round(p × total / 100) (at least 1); the lowest one for p = 0."""
        total = self.get_total_count()
        if not total:
            return 0
        assert self.h is not None
        target = max(int(min(p, 100.0) * total / 100 + 0.5), 1)
        i = int(np.searchsorted(np.cumsum(_counts(self.h)), target))
        lowest, highest, _ = _values()
        return int(highest[i] if p else lowest[i])

    def get_mean_value(self) -> float:
        """hdrh's mean: every count at the median value equivalent to its index."""
        total = self.get_total_count()
        if not total:
            return 0.0
        assert self.h is not None
        counts = _counts(self.h)
        nz = np.flatnonzero(counts)
        return float(sum((counts[nz].astype(object) * _values()[2][nz].astype(object)).tolist())) / total

    def encode(self) -> str | None:
        """The HdrHistogram encoding (base64 text), None when empty."""
        return self.h.encode().decode() if self.h is not None and self.h.get_total_count() else None

    @classmethod
    def decode(cls, data: str | None) -> Histogram:
        out = cls()
        if data:
            out.h = _new()
            out.h.add(HdrHistogram.decode(data.encode()))
        return out
