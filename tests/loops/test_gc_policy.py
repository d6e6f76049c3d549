"""The collector's policy for a run (``replay.loops.gc_watch.CollectorPolicy``): its thresholds for the run's length
and the caller's back after it, the heap frozen once every session has started, and a full collection run by the
probe when one is due and the loop kept up (or anyway when long overdue), never when it lags; ``REPLAY_GC=default``
leaves Python's own collector alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from replay.loops.gc_watch import FULL_DUE, FULL_OVERDUE, RUN_THRESHOLDS, CollectorPolicy


@pytest.fixture
def collector() -> Iterator[None]:
    before = gc.get_threshold()
    gc.collect()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def _young_to_old(n: int) -> None:
    """``n`` collections of the middle generation: each one counts towards the next full collection."""
    gc.collect()
    for _ in range(n):
        gc.collect(1)


def test_the_run_thresholds_hold_for_the_run_and_the_callers_come_back(collector: None) -> None:
    gc.set_threshold(123, 4, 5)
    with CollectorPolicy():
        assert gc.get_threshold() == RUN_THRESHOLDS
    assert gc.get_threshold() == (123, 4, 5)
    first, second = CollectorPolicy(), CollectorPolicy()  # two runs at once, ending in the other order
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold() == RUN_THRESHOLDS  # the second run still goes on
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (123, 4, 5)


def test_the_heap_is_frozen_once_every_session_has_started(collector: None) -> None:
    gc.unfreeze()
    kept = [[] for _ in range(1000)]
    CollectorPolicy().sessions_started()
    assert gc.get_freeze_count() >= len(kept)
    in_generations = {id(o) for g in range(3) for o in gc.get_objects(g)}
    assert not any(id(x) in in_generations for x in kept)  # frozen: no collection walks them


def test_a_due_full_collection_runs_when_the_loop_kept_up_not_when_it_lags(collector: None) -> None:
    policy = CollectorPolicy()
    _young_to_old(FULL_DUE)
    due = gc.get_count()[2]
    assert FULL_DUE <= due < FULL_OVERDUE
    policy.idle(0.030)  # the probe woke 30 ms late: a burst of reads is going on
    assert gc.get_count()[2] >= due
    policy.idle(0.0)
    assert gc.get_count()[2] == 0  # the full collection ran (it resets the count)
    _young_to_old(FULL_OVERDUE)
    policy.idle(0.030)
    assert gc.get_count()[2] == 0  # long overdue: run whatever the lag


def test_replay_gc_default_leaves_pythons_collector_alone(collector: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAY_GC", "default")
    gc.set_threshold(700, 10, 10)
    gc.unfreeze()
    policy = CollectorPolicy()
    with policy:
        assert gc.get_threshold() == (700, 10, 10)
        policy.sessions_started()
        assert gc.get_freeze_count() == 0
        _young_to_old(FULL_OVERDUE)
        policy.idle(0.0)
        assert gc.get_count()[2] >= FULL_OVERDUE
