"""Change points of a figure's nightly series: the nights where it changed regime, the step and its confidence.

Candidates come from binary segmentation of the series (``ruptures``, least-squares cost, regimes of two nights
or more); each is then tested, weakest first, on the nights between its neighbouring candidates: a permutation
test (how often a shuffle of those nights splits as well: the test E-divisive means uses, MongoDB's and Apache
Otava's scheme) and the step's size. One that is not significant (p ≥ ``ALPHA``) or not beyond the noise (a
relative step under ``MIN_STEP`` or under twice the nights' noise: how far one night wanders from the next
within the regimes, or their windows' noise where they do not vary; for the error rate, under half a point) is
dropped and the rest tested again, until every candidate left stands. Why ruptures and not those libraries:
docs/architecture.md. A Welch t-test of the split found was tried first and found steps of 4 % in
steady modelled nights with p ≈ 2e-5: it takes the best of thirty splits as if it were the only one.

A regime of the last one to three nights is too short for the permutation test to confirm (a shuffle of thirty
nights puts the two lowest last one time in 250), so the series' end is tested apart: the last one, two and three
nights against the regime before them (a t-test of their mean on that regime's spread), the most significant
length kept when its p, times the three lengths tried, is under ``ALPHA``. So tonight's step is found the night it
comes (``nights: 1``), and the next night the two together are the new regime, its change point the first of them.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

import numpy

from replay.errors import ReplayError
from replay.verdict.baseline import ERROR_RATE_FLOOR

ALPHA = 0.001  # a step that noise would give this often or more is no change
PERMUTATIONS = 4999  # shuffles of the nights for a step's p (its resolution: 1 / 5000)
MIN_STEP = 0.03  # of the regime before: a smaller step is no change, however steady the nights
MIN_REGIME = 2  # nights: the shortest regime the segmentation proposes (the last TAIL nights are tested apart)
MIN_BEFORE = 3  # nights of the regime before a recent change (the last TAIL nights), for its spread to mean anything
TAIL = 3  # the last nights tested apart as a new regime: shuffles of a few dozen nights cannot confirm so few
EXTRA_HINT = "pip install 'agentic-replay[history]'"


class ChangesUnavailable(ReplayError, RuntimeError):
    """The change-point libraries (ruptures, scipy) are not installed; the message names the extra."""


def require() -> tuple[Any, Any]:
    """``ruptures`` and ``scipy.stats``, or ChangesUnavailable naming the extra to install."""
    try:
        import ruptures
        from scipy import stats
    except ImportError:
        raise ChangesUnavailable(f"change points need ruptures and scipy: {EXTRA_HINT}") from None
    return ruptures, stats


@dataclass(frozen=True, slots=True)
class Change:
    """A change of regime starting at the night ``index`` (of the series given): ``step`` is the regime's mean
    after against before (relative; absolute for the error rate), ``direction`` whether that is better or worse
    for the figure, ``confidence`` 1 − p (the permutation test's; the
    tail test's for a change in the last nights), ``nights`` how many nights the new regime has so far."""

    index: int
    before: float
    after: float
    step: float
    direction: str
    confidence: float
    nights: int


def _step(a: list[float], b: list[float], absolute: bool) -> float | None:
    before, after = statistics.fmean(a), statistics.fmean(b)
    if absolute:
        return after - before
    return (after - before) / abs(before) if before else None


def _beyond(step: float | None, noise: float, absolute: bool) -> bool:
    if step is None:
        return False
    return abs(step) > ERROR_RATE_FLOOR if absolute else abs(step) > max(MIN_STEP, 2 * noise)


def _gains(rows: Any, lo_k: int) -> Any:
    """For each row of ``rows`` (nights, one ordering a row), the largest least-squares gain of one split into two
    regimes of ``lo_k`` nights or more: k(m − k)/m · (mean before − mean after)²."""
    m = rows.shape[1]
    k = numpy.arange(lo_k, m - lo_k + 1)
    cs = numpy.cumsum(rows, axis=1)
    before = cs[:, k - 1] / k
    after = (cs[:, -1:] - cs[:, k - 1]) / (m - k)
    return (k * (m - k) / m * (before - after) ** 2).max(axis=1)


def _permutation_p(x: list[float]) -> float:
    """p of the nights ``x`` holding a change of regime: the share of their shuffles (``PERMUTATIONS`` of them,
    seeded: the same history gives the same answer) whose best split gains as much as theirs does. A shuffle has
    no order, so this is the chance that the best split of nights without a change looks as good: the search for
    the best split is in the test, where a t-test of the split found would take it as given and flatter it."""
    seg = numpy.asarray(x, dtype=float)
    if len(seg) < 2 * MIN_REGIME or numpy.ptp(seg) == 0:
        return 1.0
    seen = _gains(seg[None, :], MIN_REGIME)[0]
    shuffled = numpy.random.default_rng(0).permuted(numpy.tile(seg, (PERMUTATIONS, 1)), axis=1)
    as_good = int((_gains(shuffled, MIN_REGIME) >= seen * (1 - 1e-12)).sum())
    return (1 + as_good) / (1 + PERMUTATIONS)


def _noise(noises: list[float]) -> float:
    return statistics.fmean(noises) if noises else 0.0


def _spread(a: list[float], b: list[float]) -> float:
    """The nights' relative spread within their regimes (pooled standard deviation over the regime before's mean):
    a step no larger than twice what one night wanders from the next is within the noise, however many nights.
    It is the noise wherever the nights have any spread: their windows' noise overstates it where windows are
    short and their figures bursty (1 s windows of total tokens: ±15 % a night from the windows, 4.6 % measured
    night to night on the simulated host), and is used only where the nights do not vary at all."""
    ss = sum((v - statistics.fmean(r)) ** 2 for r in (a, b) for v in r)
    dof, before = len(a) + len(b) - 2, statistics.fmean(a)
    return math.sqrt(ss / dof) / abs(before) if dof > 0 and before else 0.0


def _test(x: list[float], nz: list[float], lo: int, at: int, hi: int, absolute: bool) -> float:
    """p of a change of regime in the nights [lo, hi) (split at ``at``); 1 when the step at ``at`` is not beyond
    the noise."""
    a, b = x[lo:at], x[at:hi]
    if not _beyond(_step(a, b, absolute), _spread(a, b) or _noise(nz[lo:hi]), absolute):
        return 1.0
    return _permutation_p(x[lo:hi])


def _segmented(x: list[float], nz: list[float], absolute: bool) -> list[tuple[int, float]]:
    """The change points that stand, as (index, p), from binary segmentation pruned by the permutation test."""
    ruptures, _ = require()
    n = len(x)
    if n < 2 * MIN_REGIME:
        return []
    algo = ruptures.Binseg(model="l2", min_size=MIN_REGIME, jump=1).fit(numpy.asarray(x))
    cands = sorted(set(algo.predict(n_bkps=max(1, min(n // MIN_REGIME - 1, 12)))) - {n})
    while cands:
        edges = [0, *cands, n]
        ps = [_test(x, nz, edges[i], edges[i + 1], edges[i + 2], absolute) for i in range(len(cands))]
        worst = max(range(len(cands)), key=ps.__getitem__)
        if ps[worst] < ALPHA:
            return list(zip(cands, ps, strict=True))
        del cands[worst]
    return []


def _tail_p(x: list[float], nz: list[float], start: int, t: int, absolute: bool) -> float:
    """p that the last ``t`` nights belong to the regime of the nights [start, n − t): a t-test of their mean
    against that regime's (its spread; the nights' own window noise where the regime does not vary at all);
    1 when the step is not beyond the noise or the regime has fewer than ``MIN_BEFORE`` nights."""
    _, stats = require()
    a, tail = x[start:-t], x[-t:]
    if len(a) < MIN_BEFORE or not _beyond(_step(a, tail, absolute), _spread(a, tail) or _noise(nz[-t:]), absolute):
        return 1.0
    mean, after = statistics.fmean(a), statistics.fmean(tail)
    var = statistics.variance(a) or (after * _noise(nz[-t:])) ** 2  # steady nights: their windows' noise
    spread = math.sqrt(var * (1 / t + 1 / len(a)))
    if spread == 0:
        return 0.0 if after != mean else 1.0
    return float(2 * stats.t.sf(abs(after - mean) / spread, len(a) - 1))


def _tail(x: list[float], nz: list[float], start: int, absolute: bool) -> tuple[int, float] | None:
    """The change at the series' end too recent for the segmentation (a regime of one to ``TAIL`` nights, which
    no shuffle test of a few dozen nights can confirm): the tail length whose step is the most significant, its
    p multiplied by the lengths tried (Bonferroni); (index, p) when that is under ``ALPHA``."""
    tried = [(t, _tail_p(x, nz, start, t, absolute)) for t in range(1, TAIL + 1) if len(x) - t > start]
    if not tried:
        return None
    t, p = min(tried, key=lambda r: r[1])
    p = min(1.0, p * len(tried))
    return (len(x) - t, p) if p < ALPHA else None


def changes(values: list[float], noises: list[float], higher: bool, absolute: bool = False) -> list[Change]:
    """The change points of one series (the nights of one identity, in order): ``noises`` are each night's
    relative window noise, ``higher`` whether a higher value is better, ``absolute`` steps measured in the
    figure's own unit (the error rate) rather than relative to the regime before."""
    x, nz = [float(v) for v in values], [float(v) for v in noises]
    found = _segmented(x, nz, absolute)
    edges = [0, *(i for i, _ in found), len(x)]
    out = [_change(x, edges[k], i, edges[k + 2], p, higher, absolute) for k, (i, p) in enumerate(found)]
    if tail := _tail(x, nz, edges[-2], absolute):
        out.append(_change(x, edges[-2], tail[0], len(x), tail[1], higher, absolute))
    return out


def _change(x: list[float], lo: int, at: int, hi: int, p: float, higher: bool, absolute: bool) -> Change:
    before, after = statistics.fmean(x[lo:at]), statistics.fmean(x[at:hi])
    step = after - before if absolute else (after - before) / abs(before)
    better = (after > before) == higher
    return Change(at, before, after, step, "better" if better else "worse", 1 - p, hi - at)
