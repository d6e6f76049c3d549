"""The probe's readings of its records: TTFT and decode-step points for the fit, how many streams a host
decodes at once, and whether a prompt was still cached.

All sizes are the host's tokens (its ``usage``), the client's estimate standing in where a host reports
none. A decode step at concurrency is read off a window in which the same streams were all decoding and
nothing else started: from the last of their first tokens to the first of their last ones. Steps are
medians over stretches of a few tokens, so that a stall of a shared machine moves them less than a mean.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from replay.histogram import US, percentile
from replay.records.run_file import RequestRecord
from replay.twin.fit import DecodePoint, PrefillPoint

MIN_DECODE_TOKENS = 8  # a call's single-stream decode speed needs this many answer tokens
MIN_WINDOW_STEPS = 4  # a concurrency window needs this many steps in it
SEGMENT_TOKENS = 8  # decode steps are medians over stretches of this many tokens
MIN_SEGMENTS = 3
BURST = 0.1  # reads closer than this share of the mean step are one burst ...
BURST_S = 1e-4  # ... or than this: no engine's decode step is this short


def ok(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.ok and r.t_first_token is not None and r.t_last_token is not None]


def span(r: RequestRecord) -> tuple[float, float]:
    """When a call's first and last tokens came; only for the calls ``ok`` keeps, which have both."""
    if r.t_first_token is None or r.t_last_token is None:
        raise ValueError(f"call {r.id} has no first or last token (not one of ok())")
    return r.t_first_token, r.t_last_token


def host_ratio(records: Iterable[RequestRecord]) -> float:
    """Host tokens per client token over the prompts both counted (1 when the host reports none)."""
    host = est = 0
    for r in records:
        if r.ok and r.prompt_tokens and r.prompt_tokens_est:
            host += r.prompt_tokens
            est += r.prompt_tokens_est
    return host / est if est else 1.0


def prompt(r: RequestRecord, ratio: float) -> int:
    return r.prompt_tokens if r.prompt_tokens is not None else round(r.prompt_tokens_est * ratio)


def cached(r: RequestRecord, ratio: float) -> int:
    """What the host served from cache; without a report, the client's reusable prefix (an upper bound)."""
    return r.cached_tokens if r.cached_tokens is not None else round(r.reusable_prefix_tokens * ratio)


def prefill_point(r: RequestRecord, ratio: float) -> PrefillPoint:
    assert r.t_first_token is not None
    c = min(cached(r, ratio), prompt(r, ratio) - 1)
    return PrefillPoint(new=prompt(r, ratio) - c, cached=c, ttft_s=r.t_first_token - r.t_sent)


def single_decode_point(r: RequestRecord, ratio: float) -> DecodePoint | None:
    """A lone stream's step over its answer (the median over stretches: a stall of the machine moves a mean,
    not a median), at its mean context. None when its answer reached the client at once (no step to time)."""
    n = r.output_tokens or 0
    if n < MIN_DECODE_TOKENS or r.t_last_token is None or r.t_first_token is None:
        return None
    mean = (r.t_last_token - r.t_first_token) / (n - 1)
    if mean < BURST_S:  # the answer came in one burst
        return None
    step = median_gap(r, r.t_first_token, r.t_last_token) or mean  # too few stretches: the mean over the answer
    return DecodePoint(1, prompt(r, ratio) + n / 2, step)


def median_gap(r: RequestRecord, start: float, end: float) -> float | None:
    """The time per token of ``r`` between ``start`` and ``end``: the median over stretches that run from one
    burst of reads to a later one and hold at least ``SEGMENT_TOKENS`` tokens, each stretch's time over the
    tokens that arrived in it. Reads within a tenth of the mean step (or 0.1 ms) of each other are one burst (an
    engine that coalesces its output under load, vLLM's among them, hands over several tokens at once, each its
    own read microseconds apart): a burst is timed by its last read, so bursts are never read as steps of zero;
    a stall of the machine spoils only the stretch it falls in. None: too few stretches."""
    times, counts = token_times(r)
    inside = (times >= start) & (times <= end)
    times, counts = times[inside], counts[inside]
    if len(times) < 2 or counts[1:].sum() < 1:
        return None
    tiny = max(BURST * float(times[-1] - times[0]) / float(counts[1:].sum()), BURST_S)
    bursts: list[list[float]] = [[float(times[0]), float(counts[0])]]
    for t, n in zip(times[1:], counts[1:], strict=True):
        if t - bursts[-1][0] <= tiny:
            bursts[-1] = [float(t), bursts[-1][1] + float(n)]
        else:
            bursts.append([float(t), float(n)])
    rates: list[float] = []
    i, got = 0, 0.0
    for j in range(1, len(bursts)):
        got += bursts[j][1]
        if got >= SEGMENT_TOKENS:
            rates.append((bursts[j][0] - bursts[i][0]) / got)
            i, got = j, 0.0
    if len(rates) < MIN_SEGMENTS:
        return None
    per_stretch = percentile([SEGMENT_TOKENS * x for x in rates], 50, US)  # µs per 8 tokens: the old precision
    return None if per_stretch is None else per_stretch / SEGMENT_TOKENS


def token_times(r: RequestRecord) -> tuple[np.ndarray, np.ndarray]:
    """When each token-bearing read arrived (absolute), and how many events it carried."""
    flat = np.asarray(r.chunks, dtype=float).reshape(-1, 2)
    return r.t_sent + flat[:, 0], flat[:, 1]


def peak_decoding(records: Sequence[RequestRecord]) -> tuple[int, list[RequestRecord]]:
    """The most streams decoding at one time, and those streams (at the first time the peak is reached)."""
    calls = ok(records)
    spans = [span(r) for r in calls]
    edges = sorted([(first, 1, i) for i, (first, _) in enumerate(spans)] +
                   [(last, -1, i) for i, (_, last) in enumerate(spans)])  # fmt: skip
    now: set[int] = set()
    best: set[int] = set()
    for _, kind, i in edges:
        if kind == 1:
            now.add(i)
            if len(now) > len(best):
                best = set(now)
        else:
            now.discard(i)
    return len(best), [calls[i] for i in sorted(best)]


@dataclass(frozen=True, slots=True)
class Window:
    """A stretch in which ``streams`` calls were all decoding."""

    streams: int
    start: float
    end: float
    steps: float  # mean tokens each stream received inside it
    point: DecodePoint


def decode_window(streams: Sequence[RequestRecord], ratio: float) -> Window | None:
    """The decode step of ``streams`` decoding together (None if their common stretch is too short)."""
    if not streams:
        return None
    spans = [span(r) for r in streams]
    w0 = max(first for first, _ in spans)
    w1 = min(last for _, last in spans)
    if w1 <= w0:
        return None
    steps, kv = [], 0.0
    mid = (w0 + w1) / 2
    for r in streams:
        times, counts = token_times(r)
        steps.append(float(counts[(times > w0) & (times <= w1)].sum()))
        kv += prompt(r, ratio) + float(counts[times <= mid].sum())
    mean = float(np.mean(steps))
    if mean < MIN_WINDOW_STEPS:
        return None
    gaps = [g for r in streams if (g := median_gap(r, w0, w1)) is not None]
    median = percentile(gaps, 50, US)
    step = median if median is not None else (w1 - w0) / mean
    return Window(len(streams), w0, w1, mean, DecodePoint(len(streams), kv, step))


def still_cached(probe: RequestRecord, first: RequestRecord, ratio: float) -> bool | None:
    """Was ``probe`` (a prompt sent again) served from cache? By the host's cached tokens when it reports them
    (half the prompt or more), else by its TTFT (under half the first sending's). None: cannot tell."""
    if not (probe.ok and first.ok) or probe.t_first_token is None or first.t_first_token is None:
        return None
    if probe.cached_tokens is not None:
        return probe.cached_tokens >= 0.5 * prompt(probe, ratio)
    return probe.t_first_token - probe.t_sent < 0.5 * (first.t_first_token - first.t_sent)


def seconds_percentile(values: Sequence[float], q: float) -> float | None:
    """A percentile of times in seconds, by the one method (``replay.histogram``)."""
    return percentile(values, q, US)
