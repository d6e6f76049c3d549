"""A session's plan: which steps it takes, in a plausible order, sized so its context reaches the target."""

from __future__ import annotations

import random

from workload_gen.data import PLAN, Shape

FLEX: dict[str, tuple[float, int, int]] = {k: tuple(v) for k, v in PLAN["flex"].items()}  # type: ignore[misc]
FIXED_EST: dict[str, int] = PLAN["fixed_estimate"]
CAPACITY: dict[str, int] = PLAN["capacity"]
EXPLORE_EXTRAS = tuple(tuple(x) for x in PLAN["extras"]["explore"])
VERIFY_EXTRAS = tuple(tuple(x) for x in PLAN["extras"]["verify"])
QUICK, EDITS, PY_RUNS, TEST_RUNS, CHEAP = (
    frozenset(PLAN["kinds"][k]) for k in ("quick", "edits", "py_runs", "test_runs", "cheap")
)


def pick_weighted(rng: random.Random, pool: dict[str, list[float]]) -> str | None:
    """Draw a kind by weight from ``pool`` ({kind: [weight, remaining]}), decrementing its count."""
    kinds = [k for k, (w, left) in pool.items() if left > 0 and w > 0]
    if not kinds:
        return None
    kind = rng.choices(kinds, weights=[pool[k][0] for k in kinds])[0]
    pool[kind][1] -= 1
    return kind


def make_plan(rng: random.Random, shape: Shape) -> list[str]:
    """Step kinds in a plausible order: explore, reproduce, test-first fix, verify, submit."""
    n = shape.turns - (1 if shape.compaction_at else 0)  # the compaction turn adds a "reorient" step
    explore = ["ls_root", "grep_def", "dump_target"]
    reproduce = ["repro"]
    fix = ["add_test", "pytest_fail", "patch"]
    verify = ["pytest_pass", "git_diff"]
    extra = n - 10
    if extra >= 2 and rng.random() < 0.6:
        reproduce = ["repro_import_error", "pip_install", *reproduce]
        extra -= 2
    if extra >= 5:
        fix = [*fix[:2], "patch_miss", "dump_func", *fix[2:]]
        extra -= 2
    unrelated = extra >= 7
    if unrelated:
        extra -= 2
    explore_pool = {k: [w, m] for k, w, m in EXPLORE_EXTRAS}
    verify_pool = {k: [w, m] for k, w, m in VERIFY_EXTRAS}
    if unrelated:  # that session's full-suite run is the one with the unrelated failure
        verify_pool["pytest_full"][1] = 0
    chosen_explore: list[str] = []
    chosen_verify: list[str] = []
    for _ in range(extra):
        first, second = (explore_pool, verify_pool) if rng.random() < 0.6 else (verify_pool, explore_pool)
        kind = pick_weighted(rng, first)
        pool = first
        if kind is None:
            kind, pool = pick_weighted(rng, second), second
        if kind is None:
            kind, pool = rng.choice(("dump_other", "grep_misc")), explore_pool
        (chosen_explore if pool is explore_pool else chosen_verify).append(kind)
    # exploration: the project file first, definition search before the first dump, continuation after it
    for early in ("cat_pyproject", "ls_pkg"):
        if early in chosen_explore:
            chosen_explore.remove(early)
            explore.insert(1, early)
    if "dump_target_more" in chosen_explore:
        chosen_explore.remove("dump_target_more")
        explore.append("dump_target_more")
    rng.shuffle(chosen_explore)
    explore += chosen_explore
    rng.shuffle(chosen_verify)
    tail = [k for k in chosen_verify if k != "pytest_full"]
    if "dump_target_after" in tail:  # look at the patched code before the other checks
        tail.remove("dump_target_after")
        tail.insert(0, "dump_target_after")
    verify = [verify[0], *tail, verify[1]]
    if unrelated:
        verify += ["pytest_full_unrelated", "stash_check"]
    elif "pytest_full" in chosen_verify:
        verify.append("pytest_full")
    plan = explore + reproduce + fix + verify + ["submit"]
    at = max(4, min(len(plan) - 3, round(shape.turns * shape.compaction_at))) if shape.compaction_at else len(plan)
    # Swap cheap steps for file reads until the steps before the peak can plausibly reach it.
    need = 1.1 * (shape.peak_tokens - 2200 - 135 * at)
    cheap = [j for j in range(at - 1) if plan[j] in CHEAP]
    first_read = plan.index("dump_target")
    for j in [j for j in cheap if j > first_read] + [j for j in reversed(cheap) if j < first_read]:
        if sum(CAPACITY.get(k, FIXED_EST.get(k, 300)) for k in plan[: at - 1]) >= need:
            break
        if j > first_read:
            plan[j] = "dump_other"
        else:  # an orientation step before the first read: drop it and read one more file after that read
            del plan[j]
            plan.insert(plan.index("dump_target") + 1, "dump_other")
    if shape.compaction_at:
        plan.insert(at, "reorient")
    assert len(plan) == shape.turns, (len(plan), shape.turns)
    return plan
