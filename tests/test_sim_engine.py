"""Engine timing model: output length, reasoning share, the serial prefill queue, coalesced batches."""

import dataclasses
import time

import numpy as np
import pytest

from replay.sim.engine import SimEngine
from replay.sim.profiles import PROFILES, get_profile

FAST = get_profile("fast")


def prompt(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 100_000, n).astype(np.int32)


def test_profiles_are_named_and_unknown_names_are_listed():
    assert {"default", "reasoning", "fast", "instant"} <= set(PROFILES)
    with pytest.raises(ValueError, match="known: default, reasoning, fast, instant"):
        get_profile("nope")


def test_token_interval_grows_with_active_streams():
    p = get_profile("default")
    assert p.token_interval(1) == 1 / p.decode_tps
    assert p.token_interval(11) == (1 + 10 * p.decode_slowdown) / p.decode_tps


def test_output_length_and_reasoning_share():
    engine = SimEngine(dataclasses.replace(FAST, reasoning_fraction=0.3, max_output_tokens=100))
    req = engine.submit(prompt(50), max_tokens=20)
    assert (req.output_tokens, req.reasoning_tokens, req.prompt_tokens) == (20, 6, 50)
    assert engine.submit(prompt(50, 1), max_tokens=1000).output_tokens == 100  # capped by the profile


def test_prefills_queue_on_one_compute_unit():
    engine = SimEngine(dataclasses.replace(FAST, prefill_tps=1000.0))
    first = engine.submit(prompt(500, 1), 10)
    second = engine.submit(prompt(300, 2), 10)
    assert second.prefill_start == first.prefill_end  # waits for the unit, no drift in the queue
    assert second.prefill_end - second.prefill_start == pytest.approx(300 / 1000.0)
    third = engine.submit(prompt(500, 1), 10)  # same prompt as the first: served from the prefix cache
    assert third.cached_tokens == 496
    assert third.prefill_end - third.prefill_start == pytest.approx(4 / 1000.0)


async def test_batches_sum_to_output_and_due_tokens_coalesce():
    engine = SimEngine(dataclasses.replace(FAST, decode_tps=100.0))  # 10 ms per token
    req = engine.submit(prompt(10), max_tokens=5)
    batches = []
    async for count in engine.token_batches(req):
        batches.append(count)
        if len(batches) == 1:
            assert engine.decoding == 1
            time.sleep(0.06)  # block the loop on purpose: tokens 2..5 (due at +10..+40 ms) all fall due
    assert batches == [1, 4]
    assert engine.decoding == 0


async def test_unpaced_profile_writes_fixed_batches():
    engine = SimEngine(get_profile("instant"))
    req = engine.submit(prompt(10), max_tokens=1000)
    assert [c async for c in engine.token_batches(req)] == [256, 256, 256, 232]


async def test_leaving_early_releases_the_decode_slot():
    engine = SimEngine(FAST)
    batches = engine.token_batches(engine.submit(prompt(10), max_tokens=50))
    assert await anext(batches) == 1
    assert engine.decoding == 1
    await batches.aclose()
    assert engine.decoding == 0
