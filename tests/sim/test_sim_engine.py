"""Engine: the physical step model, continuous batching with chunked prefill, admission, preemption, pacing."""

import asyncio
import dataclasses
import itertools

import numpy as np
import pytest

from replay.sim.core.engine import ABORTED, FINISHED, RUNNING, WAITING, EngineCore, SimEngine, step_shape
from replay.sim.core.profiles import GB, PROFILES, SimProfile, get_profile
from replay.sim.core.step_table import StepShape

FAST = get_profile("fast")


def prompt(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 100_000, n).astype(np.int32)


def run_until_idle(core: EngineCore, t: float = 0.0, max_steps: int = 100_000) -> tuple[float, list]:
    """Step the core on a virtual clock until nothing is left; the end time and the steps."""
    steps = []
    for _ in range(max_steps):
        step = core.schedule(t)
        if step is None:
            return t, steps
        t += step.duration
        core.complete(step, t)
        steps.append(step)
    raise AssertionError("the engine never went idle")


def submit(core: EngineCore, n_prompt: int, n_out: int, seed: int = 0, t: float = 0.0):
    seq = core.new_seq(f"r{seed}", prompt(n_prompt, seed), n_out)
    core.add(seq, t)
    return seq


def test_profiles_are_named_and_unknown_names_are_listed():
    assert {"default", "reasoning", "fast", "instant", "moe-8gpu", "overloaded"} <= set(PROFILES)
    with pytest.raises(ValueError, match="known: default, reasoning, fast, instant"):
        get_profile("nope")
    for p in PROFILES.values():
        assert p.description
        assert p.instant or p.kv_budget_tokens >= p.model_len_limit >= 32_768


def test_default_profile_keeps_its_published_figures():
    one = get_profile("h100-8b")
    assert one.decode_tps(1) == pytest.approx(150, rel=0.03)
    assert one.prefill_tps(0) == pytest.approx(41_000, rel=0.1)  # an 8k-token prompt (aiconfigurator's figure)
    p = get_profile("default")  # the same model on two GPUs (TP2)
    assert p.decode_tps(1) == pytest.approx(220, rel=0.03)
    assert p.prefill_tps(0) == pytest.approx(1.7 * one.prefill_tps(0), rel=0.05)  # TP2's all-reduces cost
    assert p.kv_budget_tokens > 2 * one.kv_budget_tokens
    speeds = [p.decode_tps(n, 4000) for n in (1, 4, 16, 64)]
    assert speeds == sorted(speeds, reverse=True) and speeds[-1] < speeds[0] / 2  # decode slows with concurrency
    assert p.decode_tps(8, 32_000) < p.decode_tps(8, 2_000)  # ... and with the context it reads
    assert get_profile("reasoning").reasoning_fraction == 0.3
    assert get_profile("fast").decode_tps(1) == pytest.approx(1000, rel=0.01)
    assert get_profile("fast").prefill_tps() == pytest.approx(1e6, rel=0.01)


def test_step_time_is_the_roofline_of_the_physical_inputs():
    p = SimProfile(name="t", description="t", gpus=2, hbm_bytes_per_s=1e12, flops=1e14, gpu_memory_bytes=0,
                   mem_efficiency=0.5, mfu=0.5, step_overhead_s=0.001, weight_bytes=10 * GB,
                   dense_weight_bytes=10 * GB, active_params=5e9, attn_flops_per_ctx_token=1e6,
                   kv_bytes_per_token=1e5, kv_budget_override=10_000)  # fmt: skip
    memory = (10e9 + 3000 * 1e5) / (1e12 * 2 * 0.5)
    compute = (2 * 5e9 * 100 + 1e6 * 5000) / (1e14 * 2 * 0.5)
    assert p.step_time(100, 3000, 5000) == pytest.approx(max(memory, compute) + 0.001)
    assert p.step_time(5000, 3000, 1e7) > p.step_time(1, 3000, 1e7)  # compute bound when prefilling
    assert p.kv_budget_tokens == 10_000
    # attention at its own efficiency when the profile gives one (0: the GEMMs' mfu)
    split = dataclasses.replace(p, attn_mfu=0.25)
    compute = 2 * 5e9 * 100 / (1e14 * 2 * 0.5) + 1e6 * 5000 / (1e14 * 2 * 0.25)
    assert split.step_time(100, 3000, 5000) == pytest.approx(max(memory, compute) + 0.001)


def test_step_shape_tells_decodes_from_prefill_chunks():
    """The engine hands the profile the step's shape: the roofline needs its totals, a step table and
    the decode speed-up need to know which tokens are decodes and which prefill chunks."""
    core = EngineCore(dataclasses.replace(FAST, max_num_batched_tokens=1000))
    a = submit(core, 100, 50, seed=1)
    core.complete(step := core.schedule(0.0), t := step.duration)  # a prefilled in one step
    b = submit(core, 2500, 5, seed=2, t=t)
    shape = step_shape(core.schedule(t).items)  # a decodes its 2nd token; b's first chunk of 999
    assert (shape.decodes, shape.decode_context, shape.prefill_tokens, shape.prefill_context) == (1, 101, 999, 0)
    assert (shape.tokens, shape.kv_read) == (1000, 101 + 999)
    assert shape.attn_pairs == pytest.approx(101 + 999 * 1000 / 2)
    assert a.num_computed == 100 and b.num_computed == 0
    alone = StepShape.decode(1, 101)
    assert FAST.step_seconds(shape) > FAST.step_seconds(alone) == FAST.step_time(1, 101, 101)


def test_moe_reads_more_experts_as_the_batch_grows():
    p = get_profile("moe-8gpu")
    one, eight, many = (p.weight_bytes_read(n) for n in (1, 8, 512))
    expert = p.weight_bytes - p.dense_weight_bytes
    assert one == pytest.approx(p.dense_weight_bytes + expert * 8 / 256)
    assert one < eight < many <= p.weight_bytes and many > 0.99 * p.weight_bytes
    assert 50 < p.decode_tps(1) < 100  # a large MoE node's lone stream


def test_answer_length_reasoning_ignore_eos_and_min_tokens():
    core = EngineCore(dataclasses.replace(FAST, reasoning_fraction=0.3, max_output_tokens=100))
    assert core.plan_output(20) == (20, "length")
    assert core.plan_output(1000) == (100, "length")  # capped by the profile
    seq = core.new_seq("r", prompt(50), 20)
    assert (seq.target, seq.reasoning, seq.prompt_len) == (20, 6, 50)
    natural = EngineCore(dataclasses.replace(FAST, natural_output_tokens=50), seed=3)
    plans = [natural.plan_output(400) for _ in range(500)]
    stopped = [n for n, why in plans if why == "stop"]
    assert len(stopped) > 400 and np.mean(stopped) == pytest.approx(50, rel=0.2)
    assert all(n == 400 for n, why in plans if why == "length")
    assert {natural.plan_output(400, ignore_eos=True) for _ in range(50)} == {(400, "length")}
    assert min(natural.plan_output(400, min_tokens=120)[0] for _ in range(200)) >= 120


def test_chunked_prefill_shares_steps_with_decodes():
    core = EngineCore(dataclasses.replace(FAST, max_num_batched_tokens=1000))
    a = submit(core, 100, 50, seed=1)
    t = 0.0
    step = core.schedule(t)
    t += step.duration
    core.complete(step, t)  # a: prefilled, first token
    assert a.num_output == 1 and a.t_first_token == t
    b = submit(core, 2500, 5, seed=2, t=t)
    steps = []
    while b.num_output == 0:
        step = core.schedule(t)
        t += step.duration
        core.complete(step, t)
        steps.append({s.rid: n for s, n in step.items})
    # b's 2500-token prompt goes in chunks of what the budget leaves after a's decode token
    assert steps == [{"r1": 1, "r2": 999}, {"r1": 1, "r2": 999}, {"r1": 1, "r2": 502}]
    assert a.num_output == 4 and b.num_output == 1
    run_until_idle(core, t)
    assert (a.state, b.state, a.num_output, b.num_output) == (FINISHED, FINISHED, 50, 5)
    assert core.pool.used_blocks == 0


def test_running_cap_queues_the_rest_first_come_first_served():
    core = EngineCore(dataclasses.replace(FAST, max_num_seqs=2))
    seqs = [submit(core, 40, 10, seed=i) for i in range(4)]
    core.complete(step := core.schedule(0.0), step.duration)
    assert [s.state for s in seqs] == [RUNNING, RUNNING, WAITING, WAITING]
    run_until_idle(core, step.duration)
    assert all(s.state == FINISHED and s.num_output == 10 for s in seqs)
    assert seqs[2].t_scheduled >= seqs[0].t_last_token  # waited for a slot
    assert seqs[2].t_scheduled > seqs[2].t_queued


def test_out_of_kv_preempts_the_most_recent_and_recomputes():
    # 64 blocks of 16 tokens; three sequences that each grow to 30 blocks cannot all stay
    core = EngineCore(dataclasses.replace(FAST, kv_budget_override=64 * 16, max_num_batched_tokens=4096))
    seqs = [submit(core, 300, 180, seed=i) for i in range(3)]
    _, steps = run_until_idle(core)
    assert all(s.state == FINISHED and s.num_output == 180 for s in seqs)
    assert core.preemptions > 0 and sum(len(s.preempted_at) for s in seqs) == core.preemptions
    first = next(st for st in steps if st.preempted)
    assert first.preempted[0] is seqs[2]  # the most recently admitted goes first
    assert seqs[2].recomputed_tokens > 0 and not seqs[0].preempted_at
    assert core.pool.used_blocks == 0
    assert core.generation_tokens_total == 3 * 180


def test_cached_tokens_are_what_the_cache_served_at_admission():
    core = EngineCore(FAST)
    ids = prompt(1000, 5)
    a = core.new_seq("a", ids, 3)
    core.add(a, 0.0)
    t, _ = run_until_idle(core)
    b = core.new_seq("b", np.concatenate([ids, prompt(200, 6)]), 3)
    c = core.new_seq("c", ids, 3)
    core.add(b, t)
    core.add(c, t)
    run_until_idle(core, t)
    assert (a.cached_tokens, b.cached_tokens, c.cached_tokens) == (0, 992, 992)
    assert core.pool.hit_tokens == 992 * 2
    assert core.pool.query_tokens == 1000 + 1200 + 1000


def test_abort_gives_back_blocks_and_slot():
    core = EngineCore(FAST)
    a = submit(core, 500, 1000, seed=1)
    b = submit(core, 500, 1000, seed=2)
    step = core.schedule(0.0)
    core.complete(step, step.duration)
    assert core.pool.used_blocks > 0
    core.abort(a)
    core.abort(b)
    assert (a.state, b.state, core.pool.used_blocks, core.running) == (ABORTED, ABORTED, 0, [])
    assert core.schedule(1.0) is None


async def test_real_time_steps_are_anchored_and_due_tokens_coalesce():
    """The wall-clock driver on a clock the test moves (the engine's clock, handed to it), so a busy machine changes
    nothing: a token falls due at its step's end; the tokens that fell due while the loop ran late come in one
    wake-up; and token times stay on the steps' schedule, however late the loop woke."""
    profile = dataclasses.replace(FAST, step_overhead_s=0.009)  # ~10 ms steps
    twin = EngineCore(profile)  # the same steps on a virtual clock: when each token falls due
    submit(twin, 10, 6)
    _, steps = run_until_idle(twin)
    ends = list(itertools.accumulate(s.duration for s in steps))
    assert len(ends) == 6  # the prefill's step gives the first token, then one step per token
    t0 = 100.0
    clock = [t0]
    engine = SimEngine(profile, clock=lambda: clock[0])
    seq = engine.core.new_seq("r", prompt(10), 6)
    engine.submit(seq)
    while seq.t_scheduled is None:  # the driver's first turn: the first step starts at t0
        await asyncio.sleep(0)
    batches, sent = [], 0
    # the loop wakes in the middle of step 2, then in the middle of step 5 (three steps late), then after the last
    for i in (0, 3, 5):
        clock[0] = t0 + (ends[i] + ends[i + 1]) / 2 if i < 5 else t0 + ends[5] + 1e-3
        n = await asyncio.wait_for(engine.tokens(seq, sent), timeout=30)
        batches.append(n - sent)
        sent = n
    await engine.stop()
    assert batches == [1, 3, 2] and engine.lag_resets == 0
    assert seq.t_first_token == pytest.approx(t0 + ends[0], abs=1e-9)
    # the steps, not the wakes
    assert seq.t_last_token - seq.t_first_token == pytest.approx(ends[5] - ends[0], abs=1e-9)


async def test_leaving_early_releases_the_running_slot():
    engine = SimEngine(FAST)
    seq = engine.core.new_seq("r", prompt(10), 50_000)
    engine.submit(seq)
    assert await engine.tokens(seq, 0) >= 1
    assert engine.decoding == 1
    engine.abort(seq)
    assert engine.decoding == 0 and engine.core.pool.used_blocks == 0
    await asyncio.sleep(0.01)
    await engine.stop()


async def test_instant_profile_writes_fixed_batches():
    engine = SimEngine(get_profile("instant"))
    seq = engine.core.new_seq("r", prompt(10), 1000)
    engine.submit(seq)
    assert [c async for c in engine.instant_batches(seq)] == [256, 256, 256, 232]
    assert seq.state == FINISHED


def test_a_step_admits_only_what_arrived_before_it_started():
    core = EngineCore(FAST)
    seq = submit(core, 40, 3, t=1.0)
    assert core.schedule(0.5) is None  # the loop woke late: a step that started at 0.5 cannot hold it
    step = core.schedule(1.0)
    assert step is not None and step.items[0][0] is seq and seq.t_scheduled == 1.0
