"""Whether two hosts that serve "the same model" answer the same: the calls both answered, matched one to one.

Hosts that serve one model differ in what they answer (quantisation, speculation, tool-call parsers, sampling
defaults). With identical prompts (the same workload, task order and per-run tag, which ``replay run --host A
--host B`` gives both hosts) and greedy sampling (temperature 0, sent with ``--extra-body``), two faithful hosts
answer alike, up to the order of floating-point sums. Each call of A is matched to B's call of the same task,
trajectory, turn and subagent; only first attempts that both hosts answered, with their text kept
(``answer_text``), count.

``exact_share``: the pairs whose answers are identical. ``first_divergence_mean``: over the pairs that differ, the
mean position (0-based) of the first differing token, both answers tokenized by replay's tokenizer (the same for
both hosts, whatever theirs). None when every pair agrees.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from replay.workload.tokens import Tokenizer, get_tokenizer


class Answered(Protocol):
    task: int
    trajectory: str
    turn: int
    parent: str | None
    attempt: int
    error: str | None
    phase: str
    answer_text: str | None


def _answers(records: Iterable[Answered]) -> dict[tuple[Any, ...], str]:
    return {
        (r.task, r.trajectory, r.turn, r.parent): r.answer_text
        for r in records
        if r.error is None and r.attempt == 1 and r.phase == "measured" and r.answer_text is not None
    }


def first_difference(a: str, b: str) -> int:
    """Index of the first character where ``a`` and ``b`` differ (the shorter one's length if one starts the
    other)."""
    n = min(len(a), len(b))
    lo, hi = 0, n  # a[:lo] == b[:lo]; bisect on slices (C comparisons) rather than a loop per character
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


KEPT_BY = "only hosts run side by side in one `replay run --host A --host B` keep each answer's text (answer_text)"


def _why_none(counts: dict[str, int], kept: tuple[bool, bool] | None) -> str:
    """Why no pair was compared: which run kept no answer text (and what keeps it; ``kept``: whether each run was
    asked to, when known), which one had no answered call to compare, or that no call matched."""
    if kept is not None and not all(kept):
        if not any(kept):
            return f"neither run kept its answers' text: {KEPT_BY}; runs recorded apart cannot be compared"
        return f"run {'AB'[kept.index(False)]} kept no answer text: {KEPT_BY}"
    none = [side for side in ("a", "b") if not counts[f"answered_{side}"]]
    if none:
        return f"run {' and '.join(n.upper() for n in none)}: no answer to compare (no measured call answered)"
    return "no call answered by both: the runs replayed other tasks, turns or subagents"


def agreement(a: Iterable[Answered], b: Iterable[Answered], tokenizer: Tokenizer | None = None,
              kept: tuple[bool, bool] | None = None) -> dict[str, Any]:  # fmt: skip
    """The ``agreement`` of two runs' answers (see the module's doc); ``pairs`` says how many calls it covers, and
    ``why`` why there are none (``kept``: whether each run kept its answers' text, as its header says)."""
    answers_a, answers_b = _answers(a), _answers(b)
    keys = sorted(answers_a.keys() & answers_b.keys(), key=repr)
    out: dict[str, Any] = {"pairs": len(keys), "answered_a": len(answers_a), "answered_b": len(answers_b)}
    if not keys:
        return out | {"exact_share": None, "first_divergence_mean": None, "why": _why_none(out, kept)}
    tok = tokenizer or get_tokenizer()
    positions = []
    for k in keys:
        ta, tb = answers_a[k], answers_b[k]
        if ta != tb:
            cut = first_difference(ta, tb)  # the tokens before the one holding the first differing character agree
            ka, kb = tok.encode(ta[: cut + 64]), tok.encode(tb[: cut + 64])
            same = (i for i, (x, y) in enumerate(zip(ka, kb, strict=False)) if x != y)
            positions.append(next(same, min(len(ka), len(kb))))
    return out | {
        "exact_share": (len(keys) - len(positions)) / len(keys),
        "first_divergence_mean": sum(positions) / len(positions) if positions else None,
        "differing": len(positions),
    }
