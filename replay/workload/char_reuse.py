"""Prefix reuse as the development set's README defines it (trajectories/real/README.md of the shared material), so
``replay inspect`` can be set beside the figures published with a corpus.

Replay's own prefix reuse counts whole messages in tokens: a request's reusable prefix is the messages it shares,
as an exact prefix, with the previous request and its answer, and a trajectory's first call counts with none
(token-weighted, ``stats.py``). The README's counts characters: for each call after the first, the longest common
prefix of its input and the previous call's input plus output, in a role-tagged serialisation, over the length of
its input; then the mean over a trajectory's calls, and the mean over trajectories. A message that differs only at
its end still shares its start, and the first calls count in no mean, so it reads higher (SWE-agent files pooled:
83.0 % replay's, 90.0 % this one; the README says 89.5 % from the original files).
"""

from __future__ import annotations

import statistics
from typing import Any

from replay.workload.trajectory import Trajectory


def _tagged(message: dict[str, Any]) -> str:
    """``role: text`` of one message: its text content (parts joined) and its tool calls' names and arguments."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    text = content if isinstance(content, str) else ""
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {} if isinstance(call, dict) else {}
        text += f"{fn.get('name', '')}({fn.get('arguments', '')})"
    return f"{message.get('role', '')}: {text}\n"


def _prefix(x: str, y: str) -> int:
    """Length of the longest common prefix of two strings (a bisection of slice comparisons, in C)."""
    lo, hi = 0, min(len(x), len(y))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if x[:mid] == y[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common(a: list[str], b: list[str]) -> int:
    """Characters of the longest common prefix of the concatenations of ``a`` and ``b`` (whole equal messages
    skipped, the first differing pair compared character by character)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            return n + _prefix(x, y)
        n += len(x)
    return n


def char_prefix_reuse(traj: Trajectory) -> float | None:
    """The mean over calls after the first of (common prefix with the previous input + output) / input, in
    characters; None for a trajectory of one call."""
    context: list[str] = []
    previous: list[str] | None = None
    ratios = []
    for turn in traj.turns:
        if turn.truncate_to is not None:
            del context[turn.truncate_to :]
        context.extend(_tagged(m.raw) for m in turn.append)
        if previous is not None:
            size = sum(map(len, context))
            ratios.append(_common(context, previous) / size if size else 0.0)
        answer = _tagged(turn.output_message.raw)
        previous = [*context, answer]
        context.append(answer)
    return statistics.fmean(ratios) if ratios else None
