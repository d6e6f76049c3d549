"""Counted nouns in messages: "1 trajectory", "26 turns", never "1 trajectories"."""

from __future__ import annotations

# Nouns whose plural is not noun + "s". Add here rather than spelling a plural at a call site.
_IRREGULAR = {
    "trajectory": "trajectories",
    "subagent trajectory": "subagent trajectories",
    "discarded reply": "discarded replies",
    "entry": "entries",
    "process": "processes",
    "match": "matches",
}


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1: ``plural(3, "trajectory")`` → "3 trajectories".

    ``many`` gives the plural when it is neither noun + "s" nor listed above. Numbers are printed with
    thousands separators, as the reports print them.
    """
    if n == 1:
        return f"1 {noun}"
    return f"{n:,} {many or _IRREGULAR.get(noun) or noun + 's'}"
