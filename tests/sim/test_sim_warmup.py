"""A host whose decode gets faster as it runs (speculator-warmup), on the engine's own uptime."""

import dataclasses

import numpy as np
import pytest

from replay.sim.core.engine import EngineCore
from replay.sim.core.profiles import get_profile
from replay.sim.core.step_table import StepShape
from replay.workload.trajectory import default_workload_path, load_workload
from tests.support.virtual import virtual_run

WARM = get_profile("speculator-warmup")


def test_the_factor_ramps_from_one_to_the_final_speedup():
    assert (WARM.decode_speedup, WARM.speedup_after_s, WARM.speedup_ramp_s) == (2.0, 20.0, 20.0)
    assert [WARM.decode_factor(t) for t in (0, 10, 20, 30, 40, 60, 1e6)] == pytest.approx([1, 1, 1, 1.5, 2, 2, 2])
    step = dataclasses.replace(WARM, speedup_ramp_s=0.0)  # no ramp: a step at speedup_after_s
    assert [step.decode_factor(t) for t in (19.9, 20.1)] == [1.0, 2.0]
    assert get_profile("fast").decode_factor(1e6) == 1.0


def test_only_decode_steps_speed_up():
    decode, prefill = StepShape.decode(8, 1000), StepShape.prefill(4000, 0)
    mixed = StepShape(4001, 5001, 4000 * 2000.5 + 1000, 1, 1000, 4000, 0)
    for shape, factor in ((decode, 2.0), (prefill, 1.0), (mixed, 1.0)):
        assert WARM.step_seconds(shape, 0.0) == pytest.approx(factor * WARM.step_seconds(shape, 50.0))
    assert WARM.step_seconds(decode, 0.0) == get_profile("fast").step_seconds(decode)
    summary = WARM.summary()
    assert summary["decode_tps_1_stream_warm"] == pytest.approx(2 * summary["decode_tps_1_stream"], rel=0.01)


def test_uptime_counts_from_the_first_request():
    core = EngineCore(dataclasses.replace(WARM, kv_bytes_per_token=1))  # steps that do not slow with context
    seq = core.new_seq("r", np.arange(100, dtype=np.int32), 10**6)
    t = 1000.0  # an engine that sat idle for a long time before its first request
    core.add(seq, t)
    speeds = {}
    while t < 1060.0:
        step = core.schedule(t)
        t += step.duration
        before = seq.num_output
        core.complete(step, t)
        second = int(t - 1000.0)
        speeds[second] = speeds.get(second, 0) + seq.num_output - before
    assert speeds[5] == pytest.approx(1000, rel=0.01)  # fast's 1 ms steps
    assert speeds[30] == pytest.approx(1000 * WARM.decode_factor(30.5), rel=0.01)  # half way up the ramp
    assert speeds[50] == pytest.approx(2000, rel=0.01)


def test_a_one_minute_run_shows_the_change():
    """Four agents replaying the shipped workload: calls sent in the last 20 s decode about twice as fast
    as those of the first 20 s (virtual clock, the engine the server runs)."""
    workload = load_workload([default_workload_path()])
    early = virtual_run(WARM, workload, 4, 20, 0)
    late = virtual_run(WARM, workload, 4, 60, 40)
    baseline = virtual_run(get_profile("fast"), workload, 4, 60, 40)
    e, w, b = (r.summary["user_decode_tps"]["p50"] for r in (early, late, baseline))
    assert w == pytest.approx(2 * e, rel=0.15) and w > 1.7 * b
