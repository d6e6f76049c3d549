"""The summary's ``answers``: what the hosts answered, judged call by call (``answer_check`` on each record).

Counts over the calls that succeeded (a failed call has no answer to judge), each share over the calls its check
covered: ``short_share`` over the calls whose served length is known, ``tool_call_invalid_share`` over the calls
that made tool calls, ``degenerate_share`` and ``empty_share`` over the calls whose text was read (``degenerate``:
with ``--check-answers``; ``empty``: always, from the events). A share is None when its check covered no call.
``forced`` says whether ``--force-output-length`` held: None when it was not asked; true when every answer whose
length is known (one at least) was as long as asked; false otherwise (``length_short`` says how many were not):
a run whose host ignored it is never called forced.
"""

from __future__ import annotations

from typing import Any

from replay.records.run_file import RequestRecord

LENGTH_REASONS = ("stop", "lowered", "short", "over")
_COUNTS = ("length_checked", *LENGTH_REASONS, "tool_calls_made", "tool_calls_invalid", "text_checked", "degenerate",
           "empty_checked", "empty", "checked")  # fmt: skip


class AnswerTally:
    """Counts of the answer checks of successful calls; merges exactly, travels as JSON."""

    def __init__(self) -> None:
        self.n = dict.fromkeys(_COUNTS, 0)
        self.invalid_kinds: dict[str, int] = {}

    def add(self, r: RequestRecord) -> None:
        check = r.answer_check
        if r.error is not None or not check:
            return
        n = self.n
        n["checked"] += 1
        length = check.get("length")
        if length is not None:
            n["length_checked"] += 1
            if length in LENGTH_REASONS:
                n[length] += 1
        tools = check.get("tool_calls")
        if tools is not None:
            n["tool_calls_made"] += 1
            if tools != "ok":
                n["tool_calls_invalid"] += 1
                self.invalid_kinds[tools] = self.invalid_kinds.get(tools, 0) + 1
        if check.get("degenerate") is not None:
            n["text_checked"] += 1
            n["degenerate"] += bool(check["degenerate"])
        if check.get("empty") is not None:
            n["empty_checked"] += 1
            n["empty"] += bool(check["empty"])

    def merge(self, other: AnswerTally) -> None:
        for k, v in other.n.items():
            self.n[k] += v
        for k, v in other.invalid_kinds.items():
            self.invalid_kinds[k] = self.invalid_kinds.get(k, 0) + v

    def encode(self) -> dict[str, Any]:
        return {"n": self.n, "invalid_kinds": self.invalid_kinds}

    @classmethod
    def decode(cls, data: dict[str, Any] | None) -> AnswerTally:
        tally = cls()
        if data:
            tally.n.update(data.get("n") or {})
            tally.invalid_kinds = dict(data.get("invalid_kinds") or {})
        return tally

    def figures(self, forced_asked: bool, always: bool = False) -> dict[str, Any] | None:
        """The summary's ``answers`` (None when no call was checked: ``--no-check-answers``, or none succeeded);
        ``always``: its keys even then (every figure a summary can have, as thresholds are checked against)."""
        n = self.n
        if not n["checked"] and not always:
            return None
        short = n["stop"] + n["lowered"] + n["short"]

        def share(part: int, whole: int) -> float | None:
            return part / whole if whole else None

        return {
            "checked": n["checked"],
            "short_share": share(short, n["length_checked"]),
            "tool_call_invalid_share": share(n["tool_calls_invalid"], n["tool_calls_made"]),
            "degenerate_share": share(n["degenerate"], n["text_checked"]),
            "empty_share": share(n["empty"], n["empty_checked"]),
            "length_short": short,
            "length_checked": n["length_checked"],
            "short_by_reason": {k: n[k] for k in LENGTH_REASONS},
            "tool_calls_made": n["tool_calls_made"],
            "tool_calls_invalid": n["tool_calls_invalid"],
            "tool_call_faults": dict(sorted(self.invalid_kinds.items())),
            "text_checked": n["text_checked"],
            "degenerate": n["degenerate"],
            "empty": n["empty"],
            "forced": (short == 0 and n["over"] == 0 and n["length_checked"] > 0) if forced_asked else None,
        }
