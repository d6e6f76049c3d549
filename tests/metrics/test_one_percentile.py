"""One percentile method (``replay.histogram``, HdrHistogram's): the same values give the same percentile whichever
path reads them: the live summary of a real-time run and of a virtual-clock run, the report rebuilt from either run
file, the one function over the raw records, the live view, the studies' bootstrap, and (independently) the
nearest rank over the values as the hdrh library holds them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from replay.histogram import TPS_SCALE, US, SignedHistogram, percentile, percentiles
from replay.loops.live import LiveState
from replay.loops.load import LoadConfig
from replay.metrics.bootstrap import _weighted_percentile
from replay.metrics.recipes.recipe_tally import decode_tps
from replay.metrics.summary import steady_window, summarize
from replay.records.reader import read_run
from replay.runner.single_run import RunSpec, execute
from replay.runner.virtual_run import execute_virtual
from replay.sessions.tool_time import ToolTimePolicy
from tests.support.trajectories import simple_turns, write_trajectory


def _hdr(values: list[float], p: float, scale: float) -> float:
    """The nearest-rank percentile of ``values`` as the hdrh library holds them at ``scale`` units (its highest
    equivalent value at 3 significant digits; the rank ⌈p n / 100⌉ counted here: shares no code with replay)."""
    h = HdrHistogram(1, 2**40, 3)
    held = sorted(h.get_highest_equivalent_value(max(round(v * scale), 1)) for v in values)
    k = max(math.ceil(round(p * len(held) / 100, 9)), 1)
    return held[k - 1] / scale


@pytest.fixture(scope="module", params=["real time", "virtual clock"])
def run(request, tmp_path_factory) -> tuple:
    tmp = tmp_path_factory.mktemp("pct")
    work = tmp / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(6, output_tokens=30 + 5 * i, tool_time_s=0.1, grow="ab "))
    spec = RunSpec(trajectories=[str(work)], load=LoadConfig(concurrency=2, tasks=4, tool_time=ToolTimePolicy.parse(
        "recorded")), out=str(tmp / "run.jsonl"), progress=False, sim_profile="fast")  # fmt: skip
    result = (execute if request.param == "real time" else execute_virtual)(spec)
    return result, read_run(Path(result.path))


def test_live_offline_and_the_raw_values_agree(run) -> None:
    result, data = run
    win = steady_window(data)
    calls = [r for r in data.requests if r.ok and r.t_sent in win and r.phase == "measured"]
    ttfts = [r.t_first_token - r.t_sent for r in calls if r.t_first_token is not None]
    speeds = [v for r in calls if (v := decode_tps(r)) is not None]
    offline = summarize(data)
    for p in (50, 95, 99):
        want = _hdr(ttfts, p, US)
        assert result.summary["ttft_s"][f"p{p}"] == offline["ttft_s"][f"p{p}"] == percentile(ttfts, p, US) == want
    for p in (25, 50):
        want = _hdr(speeds, p, TPS_SCALE)
        assert result.summary["user_decode_tps"][f"p{p}"] == percentile(speeds, p, TPS_SCALE) == want


def test_the_live_view_and_the_bootstrap_read_the_same_way(run) -> None:
    _, data = run
    live = LiveState()
    for r in data.requests:
        live.request(r)
    recent = [x for _, x, _ in live.recent if x is not None]
    assert live.recent_figures()[0] == percentile(recent, 50, US) == _hdr(recent, 50, US)
    values = np.array(recent)
    ones = np.ones((2, len(values)), dtype=np.int64)  # every value drawn once
    for q in (50, 95):
        assert np.all(_weighted_percentile(values, np.arange(len(values)), ones, q) == percentile(values, q, US))


def test_values_of_either_sign_and_zeros_rank_together() -> None:
    values = [-3, -1, 0, 0, 2, 4, 5]  # whole units: held exactly (below 2,048 units a histogram is exact)
    got = percentiles(values, (0, 10, 30, 50, 60, 70, 100), 1)
    assert got == {"p0": -3, "p10": -3, "p30": 0, "p50": 0, "p60": 2, "p70": 2, "p100": 5}  # ranks 1 1 3 4 5 5 7
    assert percentile([], 50, US) is None


def test_values_read_as_a_histogram_of_them_reads() -> None:
    """``percentiles`` ranks held values without building a histogram: the same numbers as a SignedHistogram."""
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(1, 400))
        values = rng.normal(0.0, 0.01, n) * rng.choice([1.0, 0.0], n)  # either sign, and zeros
        weights = rng.integers(1, 4, n)
        held = SignedHistogram()
        held.record_many(values, US, weights)
        ps = (0, 1, 10, 25, 50, 75, 90, 99, 100)
        assert percentiles(values, ps, US, weights) == {f"p{p:g}": held.percentile(p, US) for p in ps}


def test_the_bootstrap_ranks_as_the_summary_does() -> None:
    """p99 of 64 values: the rank ⌈0.99 × 64⌉ is the 64th value (rounding 63.36 reads the 63rd)."""
    values = np.arange(1, 65, dtype=np.float64) / 1000  # 1 .. 64 ms, distinct and held exactly
    ones = np.ones((3, len(values)), dtype=np.int64)
    for q in (99, 95, 50, 1):
        want = _hdr(list(values), q, US)
        assert np.all(_weighted_percentile(values, np.arange(len(values)), ones, q) == want)
        assert percentile(values, q, US) == want
    assert _hdr(list(values), 99, US) > values[-2] * 1.0005  # the 64th value, not the 63rd
