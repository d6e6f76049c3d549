"""One histogram type for every latency and speed figure, and the one percentile method of replay: HdrHistogram's.

A percentile is read as HdrHistogram defines it: the values are held at 3 significant digits, and the value at
percentile p is the highest value equivalent to the one of nearest rank ⌈p × n / 100⌉ (at least 1): the smallest
value with at least p % of the values at or below it (docs/metrics.md). (The Python port, hdrh, rounds the rank
instead, which for few values reads one lower: p99 of 64 calls was the 63rd, not the slowest.) Figures made from
histograms (the summary, windows, the host's figures) read them with ``read_percentiles``; values not held in one
yet (the live view, the truth check, the studies, the probe) go through ``percentiles``/``percentile``, which put
them in one first, and the bootstrap ranks its resamples by the same ``rank`` and ``equivalent`` values; so a figure
is the same number whichever path made it (live, offline, virtual clock). Values of either sign are held as two
histograms of magnitudes (``SignedHistogram``), ranked together.

Every histogram is an HdrHistogram made only when its first value comes.

Every figure shares one range (1 .. 2^40: µs for 12 days, or milli-tokens/s) and 3 significant digits, so any two
histograms merge exactly, across windows, segments and workers. An HdrHistogram of that range holds about 130 KB
of counts whatever it holds; an accumulator carries dozens of them (per breakdown bucket, per host timing) and most
stay empty, so allocating them lazily keeps a window's accumulators, and the summary made at the end, small. The
methods are HdrHistogram's names, so readers use either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
import numpy.ctypeslib  # imported at start-up, not lazily by the first call's end (0.7 ms on the loop)
from hdrh.histogram import HdrHistogram
from numpy.typing import ArrayLike

HIGHEST = 1 << 40
DIGITS = 3
US = 1_000_000  # seconds → microseconds: the histograms' unit for times
TPS_SCALE = 1000  # tokens/s → milli-tokens/s: the histograms' unit for speeds
RATIO = 1000  # ratios to a thousandth (exact below 2.048, then 3 significant digits)


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

    __slots__ = ("h", "sparse")

    def __init__(self) -> None:
        self.h: HdrHistogram | None = None
        self.sparse: tuple[Any, ...] = ()  # counts not yet in ``h`` (as unpickled: see __getstate__)

    def _fold(self) -> None:
        """The sparse counts into ``h`` (made if need be)."""
        index, counts, low, high = self.sparse
        self.sparse = ()
        if self.h is None:
            self.h = _new()
        h = self.h
        _counts(h)[index] += counts.astype(np.uint64)
        h.total_count += int(counts.sum())
        h.min_value, h.max_value = min(h.min_value, low), max(h.max_value, high)

    def __del__(self) -> None:
        _release(self.h)

    def record_value(self, value: int, count: int = 1) -> None:
        """hdrh's ``record_value`` with its index worked out inline (a third of its cost, per call on every request's
        end); values it cannot hold are ignored, as hdrh ignores them."""
        if self.sparse:
            self._fold()
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

    def record_clipped(self, value: float) -> int:
        """``record_value`` of ``value`` rounded and clipped to 1 .. HIGHEST, as every per-call figure is recorded;
        the value recorded. The same steps inline, not a call to ``record_value`` (seven per call's end, nine more
        for the recipe figures)."""
        if self.sparse:
            self._fold()
        if self.h is None:
            self.h = _new()
        h = self.h
        v = min(max(round(value), 1), HIGHEST)
        half = h.sub_bucket_half_count_magnitude
        bucket = (v | h.sub_bucket_mask).bit_length() - h.unit_magnitude - (half + 1)
        h.counts[((bucket + 1) << half) + (v >> (bucket + h.unit_magnitude)) - h.sub_bucket_half_count] += 1
        h.total_count += 1
        if v < h.min_value:
            h.min_value = v
        if v > h.max_value:
            h.max_value = v
        return v

    def record_many(self, values: np.ndarray, counts: np.ndarray) -> None:
        """``record_value(v, c)`` for every pair with a count (pairs with none are skipped, min and max too), in one
        numpy pass: the same counts, total, min and max as that loop (checked against hdrh in
        tests/metrics/test_histogram.py), without a Python call per value. A 500-token answer's
        inter-token gaps were half a millisecond of the event loop's time one by one, at every stream's end.
        Values must lie in 1 .. HIGHEST (callers clip), counts be non-negative integers."""
        if self.sparse:
            self._fold()
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
        if other.sparse:  # another process's counts, as they came: added where they go, no HdrHistogram made for them
            if self.sparse:
                self._fold()
            self.sparse = other.sparse
            self._fold()
        if other.h is None or not other.h.get_total_count():
            return
        if self.sparse:
            self._fold()
        if self.h is None:
            self.h = _new()
        self.h.add(other.h)

    def get_total_count(self) -> int:
        if self.sparse:
            self._fold()
        return self.h.get_total_count() if self.h is not None else 0

    def get_value_at_percentile(self, p: float) -> int:
        """The value at percentile ``p``: the highest value equivalent to the first index whose running count
        reaches ``rank(p, total)`` (the nearest rank); the lowest one for p = 0."""
        total = self.get_total_count()
        if not total:
            return 0
        assert self.h is not None
        i = int(np.searchsorted(np.cumsum(_counts(self.h)), rank(p, total)))
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

    def __getstate__(self) -> tuple[Any, ...]:
        """For pickle (a sharded run's workers send their accumulators to the parent): the counts it holds, as
        (indices, counts, min, max): a few kilobytes, read back without making an HdrHistogram (1.5 ms each) until
        the counts are read or added to one (``add``)."""
        if self.sparse:
            return self.sparse
        if self.h is None or not self.h.get_total_count():
            return ()
        counts = _counts(self.h)
        nz = np.flatnonzero(counts)
        return nz.astype(np.int32), counts[nz].copy(), int(self.h.min_value), int(self.h.max_value)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.h, self.sparse = None, state

    def encode(self) -> str | None:
        """The HdrHistogram encoding (base64 text), None when empty."""
        if self.sparse:
            self._fold()
        return self.h.encode().decode() if self.h is not None and self.h.get_total_count() else None

    @classmethod
    def decode(cls, data: str | None) -> Histogram:
        out = cls()
        if data:
            out.h = _new()
            decoded = HdrHistogram.decode(data.encode())
            out.h.add(decoded)
            _release(decoded)
        return out


def _release(h: HdrHistogram | None) -> None:
    """Let a histogram go now: hdrh's histogram and its encoder (which holds the counts) point at each other, so a
    dropped one waited for a full collection of the cyclic garbage collector, and those are rare in a long run: a
    soak's windows and rebuilds left 0.5 MB of counts each behind, 127 MB at minute 1 and 156 MB at minute 5 at 16
    sessions (docs/benchmarks.md). Without the encoder's reference back, reference counting frees it at once."""
    if h is not None:
        h.encoder = None


def rank(p: float, total: int) -> int:
    """The nearest rank of percentile ``p`` among ``total`` values: ⌈p × total / 100⌉, at least 1 (the product
    rounded to 9 decimals first, so p95 of 20 values is the 19th, not the 20th by a float's last bit)."""
    return max(math.ceil(round(min(p, 100.0) * total / 100, 9)), 1)


def units(values: ArrayLike, scale: float) -> np.ndarray:
    """Magnitudes as a histogram holds them: ``scale`` units per figure unit, rounded, within 1 .. HIGHEST."""
    return np.clip(np.rint(np.abs(np.asarray(values, dtype=np.float64)) * scale), 1, HIGHEST).astype(np.int64)


@cache
def _shape() -> tuple[int, int, int, int]:
    """The counts layout every histogram here shares: half-count magnitude, sub-bucket mask, unit magnitude, half
    count (read once from a histogram, so a percentile of values never builds one)."""
    h = _new()
    return h.sub_bucket_half_count_magnitude, h.sub_bucket_mask, h.unit_magnitude, h.sub_bucket_half_count


def equivalent(held: np.ndarray) -> np.ndarray:
    """Each held value's highest equivalent value: what a percentile that lands on it reads."""
    half, mask, unit, half_count = _shape()
    held = np.asarray(held, dtype=np.int64)
    bucket = np.frexp((held | mask).astype(np.float64))[1] - unit - (half + 1)
    index = ((bucket + 1) << half) + (held >> (bucket + unit)) - half_count
    return np.asarray(_values()[1][index])


class SignedHistogram:
    """Values of either sign at one scale: the magnitudes of the negative and of the positive ones in two histograms,
    the values that round to 0 counted apart, all ranked together."""

    __slots__ = ("neg", "pos", "zero")

    def __init__(self) -> None:
        self.pos, self.neg, self.zero = Histogram(), Histogram(), 0

    def record(self, v: float, scale: float) -> None:
        held = round(abs(v) * scale)
        if not held:
            self.zero += 1
        else:
            (self.pos if v > 0 else self.neg).record_value(min(held, HIGHEST))

    def record_many(self, values: ArrayLike, scale: float, weights: ArrayLike | None = None) -> None:
        v = np.asarray(values, dtype=np.float64)
        w = np.ones(v.shape, dtype=np.int64) if weights is None else np.asarray(weights, dtype=np.int64)
        held = np.rint(np.abs(v) * scale)
        zero = held == 0
        self.zero += int(w[zero].sum())
        for half, side in ((self.neg, (v < 0) & ~zero), (self.pos, (v > 0) & ~zero)):
            if side.any():
                half.record_many(units(v[side], scale), w[side])

    def count(self) -> int:
        return self.pos.get_total_count() + self.neg.get_total_count() + self.zero

    def percentile(self, p: float, scale: float) -> float | None:
        """The value at percentile ``p`` of all of them (None when there are none)."""
        nn, n = self.neg.get_total_count(), self.count()
        if not n:
            return None
        r = rank(p, n)  # the r-th smallest of all values
        if r <= nn:  # a negative one: the (nn - r + 1)-th smallest magnitude among the negatives
            return -self.neg.get_value_at_percentile(100 * (nn - r + 1) / nn) / scale
        if r <= nn + self.zero:
            return 0.0
        return self.pos.get_value_at_percentile(100 * (r - nn - self.zero) / (n - nn - self.zero)) / scale

    def merge(self, other: SignedHistogram) -> None:
        self.pos.add(other.pos)
        self.neg.add(other.neg)
        self.zero += other.zero

    def encode(self) -> list[str | int | None]:
        """Its two histograms' encodings, and the count of zeros when there are any."""
        out: list[str | int | None] = [self.pos.encode(), self.neg.encode()]
        return [*out, self.zero] if self.zero else out

    @classmethod
    def decode(cls, data: list[Any]) -> SignedHistogram:
        s = cls()
        s.pos, s.neg = Histogram.decode(data[0]), Histogram.decode(data[1])
        s.zero = int(data[2]) if len(data) > 2 else 0
        return s


def percentiles(values: ArrayLike, ps: Sequence[float], scale: float,
                weights: ArrayLike | None = None) -> dict[str, float | None]:  # fmt: skip
    """The percentiles ``ps`` of ``values`` (figure units; ``scale`` histogram units per figure unit: US for
    seconds, TPS_SCALE for tokens/s, 1 for whole tokens), each weighted by ``weights``, by the one method (the
    module's docstring), keyed ``p50``, ``p2.5`` ...; None for each when there are none."""
    v = np.asarray(values, dtype=np.float64).ravel()
    w = np.ones(v.shape, dtype=np.int64) if weights is None else np.asarray(weights, dtype=np.int64).ravel()
    keep = w > 0
    v, w = v[keep], w[keep]
    if not v.size:
        return {f"p{p:g}": None for p in ps}
    # What a SignedHistogram of these values would read, without building one: each value held and read as its
    # highest equivalent (its sign kept, 0 for a value held as 0), then ranked (the same rank as its histograms).
    held = np.rint(np.abs(v) * scale)
    read = np.where(held > 0, equivalent(np.clip(held, 1, HIGHEST).astype(np.int64)), 0) * np.sign(v) / scale
    order = np.argsort(read, kind="stable")
    read, cum = read[order], np.cumsum(w[order])
    return {f"p{p:g}": float(read[int(np.searchsorted(cum, rank(p, int(cum[-1]))))]) for p in ps}


def percentile(values: ArrayLike, p: float, scale: float, weights: ArrayLike | None = None) -> float | None:
    """One percentile of ``values`` by the one method (``percentiles``)."""
    return percentiles(values, (p,), scale, weights)[f"p{p:g}"]


def read_percentiles(hist: Histogram, ps: Sequence[float], scale: float, mean: bool = False,
                     ) -> dict[str, float | int | None]:  # fmt: skip
    """A histogram's percentiles in figure units (``scale`` units each), its mean when asked, and its count ``n``;
    None for each figure of an empty one."""
    n = hist.get_total_count()
    out: dict[str, float | int | None] = {f"p{p:g}": hist.get_value_at_percentile(p) / scale if n else None for p in ps}
    if mean:
        out["mean"] = hist.get_mean_value() / scale if n else None
    out["n"] = n
    return out
