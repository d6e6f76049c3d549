"""The speculator profile's engine: each decode token counted as an accepted draft or the end of a verify step, at
the acceptance the profile states for the tokens generated so far; its counters the sum of its requests'."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from replay.sim.core.engine import EngineCore
from replay.sim.core.profiles import check_profile, get_profile
from replay.sim.core.step_table import StepShape

SPEC = get_profile("speculator")


def _drive(core: EngineCore, seqs: list, t: float = 0.0) -> None:
    for s in seqs:
        core.add(s, t)
    while not core.idle:
        step = core.schedule(t)
        assert step is not None
        t += step.duration
        core.complete(step, t)


def test_acceptance_rises_with_the_tokens_generated_and_decode_speeds_up_with_it() -> None:
    assert (SPEC.spec_draft_tokens, SPEC.spec_acceptance_start, SPEC.spec_acceptance_end) == (3, 1.5, 3.0)
    assert [SPEC.acceptance_length(g) for g in (0, 10_000, 20_000, 10**6)] == [1.5, 2.25, 3.0, 3.0]
    decode, prefill = StepShape.decode(4, 1000), StepShape.prefill(4000, 0)
    assert SPEC.step_seconds(decode, 0.0, 0) == pytest.approx(2 * SPEC.step_seconds(decode, 0.0, 20_000))
    assert SPEC.step_seconds(prefill, 0.0, 0) == SPEC.step_seconds(prefill, 0.0, 20_000)


def test_every_decode_token_is_counted_and_the_counters_are_the_requests_sum() -> None:
    core = EngineCore(dataclasses.replace(SPEC, spec_learn_tokens=2_000))
    seqs = [core.new_seq(f"r{i}", np.arange(200 + i, dtype=np.int32), 300) for i in range(6)]
    _drive(core, seqs)
    for s in seqs:
        accepted, drafted, drafts = s.spec
        assert accepted + drafts == s.num_output - 1 == 299  # the first token comes from the prefill
        assert drafted == 3 * drafts
    assert core.spec_totals == [sum(s.spec[i] for s in seqs) for i in range(3)]
    accepted, _, drafts = core.spec_totals
    # 1,794 decode tokens while g runs 6..1,800 of 2,000: L from 1.5 to 2.85, so the mean between them
    assert 1.9 < 1 + accepted / drafts < 2.4


def test_a_later_request_sees_a_higher_acceptance() -> None:
    core = EngineCore(dataclasses.replace(SPEC, spec_learn_tokens=500))  # learnt within the first request
    first, second = (core.new_seq(r, np.arange(100, dtype=np.int32), 500) for r in ("a", "b"))
    _drive(core, [first])
    _drive(core, [second])
    assert 1 + first.spec[0] / first.spec[2] < 1 + second.spec[0] / second.spec[2] == pytest.approx(3.0, abs=0.02)


def test_a_profile_cannot_accept_more_than_it_drafts() -> None:
    with pytest.raises(ValueError, match=r"spec_acceptance_end must be within 1\.\.4"):
        check_profile(dataclasses.replace(SPEC, spec_acceptance_end=4.5))
    assert get_profile("fast").spec_draft_tokens == 0 and EngineCore(get_profile("fast")).spec_totals == [0, 0, 0]
