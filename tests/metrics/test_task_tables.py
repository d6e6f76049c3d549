"""The run's per-task tables (complete tasks, each task's first call) behave as the dicts they replace, in a few
bytes a task: a soak's tally of tens of thousands of tasks stays small."""

from __future__ import annotations

import random
import tracemalloc
from typing import Any

import orjson

from replay.metrics.recipes.recipe_tally import RecipeTally
from replay.metrics.task_figures import TaskTally
from replay.metrics.task_tables import DENSE, TaskFirsts, TaskFlags

N = 20_000


def test_flags_behave_as_a_dict() -> None:
    rng = random.Random(1)
    table, plain = TaskFlags(), {}
    for _ in range(3000):
        task = rng.choice([rng.randrange(500), rng.randrange(DENSE, DENSE + 10), -rng.randrange(1, 5)])
        whole = rng.random() < 0.7
        table[task] = plain[task] = whole
    assert list(table.items()) == list(plain.items())  # the same order: a key set again keeps its place
    assert table == plain and len(table) == len(plain)
    assert 10_000 not in table and -99 not in table and "x" not in table
    other = TaskFlags()
    other.update({7: False, 100_000: True})
    table.update(other)
    plain.update({7: False, 100_000: True})
    assert list(table.items()) == list(plain.items())


def test_firsts_behave_as_a_dict() -> None:
    rng = random.Random(2)
    table, plain = TaskFirsts(), {}
    for _ in range(3000):
        task = rng.choice([rng.randrange(400), DENSE + rng.randrange(3), -1])
        pair = (rng.random() * 1e5, None if rng.random() < 0.2 else rng.random())
        if task not in plain or pair[0] < plain[task][0]:
            table[task] = plain[task] = pair
    assert list(table.items()) == list(plain.items())
    assert sorted(table.values()) == sorted(plain.values())


def _retained(build: Any) -> tuple[int, Any]:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        made = build()
        return tracemalloc.get_traced_memory()[0] - before, made
    finally:
        tracemalloc.stop()


def test_a_soak_of_tasks_takes_a_few_bytes_each() -> None:
    complete = orjson.dumps({"n": {}, "complete": [[i, i % 5 != 0] for i in range(N)]})
    firsts_data = [[i, 1000.0 + i / 3, None if i % 7 == 0 else 0.01 + i / 1e6] for i in range(N)]
    recipe = orjson.dumps({"origin": None, "counts": {}, "calls": {}, "span_end": None, "stats": {}, "slices": [],
                           "firsts": firsts_data})  # fmt: skip
    tasks_bytes, tasks = _retained(lambda: TaskTally.decode(orjson.loads(complete)).complete)
    recipe_bytes, firsts = _retained(lambda: RecipeTally.decode(orjson.loads(recipe)).firsts)
    assert len(tasks) == len(firsts) == N
    assert tasks_bytes / N < 16, f"{tasks_bytes / N:.0f} bytes a complete task"  # a dict: about 57
    assert recipe_bytes / N < 48, f"{recipe_bytes / N:.0f} bytes a task's first call"  # a dict: about 158
    assert firsts[7] == (1000.0 + 7 / 3, None) and firsts[8] == (1000.0 + 8 / 3, 0.01 + 8 / 1e6)
    assert tasks[5] is False and tasks[6] is True


def test_encoded_as_before() -> None:
    """A window record encodes the tables as it encoded the dicts: in the order the tasks came."""
    tally = TaskTally()
    for task, whole in ((5, True), (2, False), (9, True)):
        tally.complete[task] = whole
    assert tally.encode()["complete"] == [[5, True], [2, False], [9, True]]
    recipe = RecipeTally()
    recipe.firsts[3] = (10.5, None)
    recipe.firsts[1] = (9.25, 0.5)
    assert recipe.encode()["firsts"] == [[3, 10.5, None], [1, 9.25, 0.5]]
    again = RecipeTally.decode(orjson.loads(orjson.dumps(recipe.encode())))
    assert dict(again.firsts) == {3: (10.5, None), 1: (9.25, 0.5)}
