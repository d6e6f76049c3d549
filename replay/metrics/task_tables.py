"""Per-task tables the run's figures need, in a few bytes a task instead of a dict entry's few hundred.

The run's accumulator keeps, per task, whether it ended complete (and whole: replayed from turn 0) for goodput and
the cost per task (``TaskTally.complete``), and its first call's intended start and TTFT from there for the
quarters of the intended-start figures (``RecipeTally.firsts``). As dicts of Python ints, tuples and floats these
took about 215 bytes a task (57 and 158): a soak of 26,000 tasks an hour grew about 5.6 MB an hour
(docs/benchmarks.md, "Accelerated soak memory"). These tables hold the same mappings in arrays indexed by task
number (tasks are numbered from 0 in the run's order), in the order tasks were first added (a window record encodes
them in that order), and behave as the dicts did (a key set again keeps its place). A task number outside the
arrays' range goes to a plain dict.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, MutableMapping

DENSE = 1 << 24  # task numbers below this are held in the arrays; others (none in practice) in a dict
_ABSENT, _PART, _WHOLE = 0, 1, 2


class _Ordered:
    """The task numbers in the order they were first added."""

    def __init__(self) -> None:
        self._order = array("q")

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[int]:
        return iter(self._order.tolist())

    def __delitem__(self, task: int) -> None:
        raise TypeError("a task table only grows")


class TaskFlags(_Ordered, MutableMapping[int, bool]):
    """task -> whether it was replayed whole (True) or began mid-trajectory (False): one byte a task."""

    def __init__(self) -> None:
        super().__init__()
        self._flags = bytearray()
        self._other: dict[int, bool] = {}

    def __getitem__(self, task: int) -> bool:
        if 0 <= task < len(self._flags) and self._flags[task] != _ABSENT:
            return self._flags[task] == _WHOLE
        return self._other[task]  # (KeyError when absent)

    def __contains__(self, task: object) -> bool:
        if isinstance(task, int) and 0 <= task < len(self._flags):
            return self._flags[task] != _ABSENT
        return task in self._other

    def __setitem__(self, task: int, whole: bool) -> None:
        if task not in self:
            self._order.append(task)
        if 0 <= task < DENSE:
            if task >= len(self._flags):
                self._flags.extend(bytes(max(task + 1 - len(self._flags), len(self._flags) // 2)))
            self._flags[task] = _WHOLE if whole else _PART
        else:
            self._other[task] = bool(whole)


class TaskFirsts(_Ordered, MutableMapping[int, tuple[float, float | None]]):
    """task -> (its first call's intended start, TTFT from it or None): 32 bytes a task."""

    def __init__(self) -> None:
        super().__init__()
        self._at = array("q")  # task -> its place in the value arrays + 1 (0: absent)
        self._t = array("d")
        self._ttft = array("d")  # NaN: None
        self._other: dict[int, int] = {}  # a task number outside the dense range -> its place

    def _place(self, task: object) -> int | None:
        if isinstance(task, int) and 0 <= task < len(self._at):
            return self._at[task] - 1 if self._at[task] else None
        return self._other.get(task) if isinstance(task, int) else None

    def __getitem__(self, task: int) -> tuple[float, float | None]:
        i = self._place(task)
        if i is None:
            raise KeyError(task)
        ttft = self._ttft[i]
        return self._t[i], None if math.isnan(ttft) else ttft

    def __contains__(self, task: object) -> bool:
        return self._place(task) is not None

    def __setitem__(self, task: int, pair: tuple[float, float | None]) -> None:
        t, ttft = pair
        value = math.nan if ttft is None else ttft
        i = self._place(task)
        if i is not None:
            self._t[i], self._ttft[i] = t, value
            return
        i = len(self._t)
        self._t.append(t)
        self._ttft.append(value)
        self._order.append(task)
        if 0 <= task < DENSE:
            if task >= len(self._at):
                self._at.extend(array("q", bytes(8 * max(task + 1 - len(self._at), len(self._at) // 2))))
            self._at[task] = i + 1
        else:
            self._other[task] = i
