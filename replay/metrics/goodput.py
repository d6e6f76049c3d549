"""Goodput: the share of calls that met every per-call SLO, the share of complete tasks whose every call met it, and
the throughput of the calls that met it (docs/metrics.md, "Goodput").

A per-call SLO is a list of ``FIGURE OP VALUE`` terms (the grammar of thresholds: ``replay.expressions``) on one
call's own figures: ``ttft`` (first token), ``ttfat`` (first answer token), ``e2e`` (end to end), ``itl`` (the
call's inter-token latency, (e2e − TTFT) / (output tokens − 1)) and ``user_decode_tps`` (its speed after the first
token), e.g. ``ttft<=2s,user_decode_tps>=30``. A call without the figure (one output token has no speed) does not
meet a term on it: nothing unmeasured passes.

Like the ``Accumulator`` it rides in, a ``GoodputTally`` keeps counts only (and, per task, whether one of its calls
missed: one entry per such task, as the task tally keeps one per complete task), so windows, workers and a resumed
run's segments merge exactly. It judges each call as it comes, so it needs its SLO first (from the run header, or
``replay report --slo``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from replay.errors import ReplayError
from replay.expressions import OPS, parse_expression, split_terms
from replay.metrics.recipes.recipe_tally import decode_tps, request_itl
from replay.records.run_file import RequestRecord


def _since_sent(t: float | None, r: RequestRecord) -> float | None:
    return t - r.t_sent if t is not None else None


CALL_FIGURES: dict[str, Callable[[RequestRecord], float | None]] = {
    "ttft": lambda r: _since_sent(r.t_first_token, r),
    "ttfat": lambda r: _since_sent(r.t_first_answer, r),
    "e2e": lambda r: _since_sent(r.t_done, r),
    "itl": request_itl,
    "user_decode_tps": decode_tps,
}


class SloError(ReplayError, ValueError):
    """A per-call SLO term that cannot be read or names no per-call figure."""


@dataclass(frozen=True, slots=True)
class CallSlo:
    """A per-call SLO: every term must hold for a call to count as met."""

    terms: tuple[tuple[str, str, float], ...]  # (figure, op, value in seconds or tokens/s)
    exprs: tuple[str, ...]  # as written

    @property
    def expr(self) -> str:
        return ",".join(self.exprs)

    def met(self, r: RequestRecord) -> bool:
        for figure, op, value in self.terms:
            v = CALL_FIGURES[figure](r)
            if v is None or not OPS[op](v, value):
                return False
        return True


def is_call_term(text: str) -> bool:
    """Whether ``text`` is a per-call term (its figure a per-call name) rather than a summary figure's threshold."""
    parsed = parse_expression(text)
    return parsed is not None and parsed[0] in CALL_FIGURES


def parse_slo(texts: list[str] | tuple[str, ...]) -> CallSlo | None:
    """The per-call SLO of ``texts`` (repeated or comma-separated terms), None when there are none; SloError naming
    the term that is not one."""
    terms, exprs = [], []
    for part in split_terms(texts):
        parsed = parse_expression(part)
        if parsed is None or parsed[0] not in CALL_FIGURES:
            raise SloError(
                f"SLO term {part!r}: expected a per-call figure OP VALUE, the figure one of "
                f"{', '.join(CALL_FIGURES)} (e.g. 'ttft<=2s,user_decode_tps>=30')"
            )
        if parsed[1] == "==":
            raise SloError(f"SLO term {part!r}: a per-call SLO is a bound (<, <=, >, >=), not ==")
        terms.append(parsed)
        exprs.append(part)
    return CallSlo(tuple(terms), tuple(exprs)) if terms else None


_COUNTS = ("calls", "met", "met_input", "met_output")


class GoodputTally:
    """Per measured call: judged against the SLO (counts and the met calls' tokens); per task: whether a successful
    call of it (any phase: a task is judged whole) missed."""

    def __init__(self, slo: CallSlo | None = None) -> None:
        self.slo = slo
        self.n = dict.fromkeys(_COUNTS, 0)
        self.missed: set[int] = set()  # tasks with a successful call that missed the SLO

    def add(self, r: RequestRecord, measured: bool) -> None:
        slo = self.slo
        if slo is None:
            return
        if r.error is not None:  # a failed attempt is in the error counts; a complete task's turns all succeeded
            return
        met = slo.met(r)
        if not met:
            self.missed.add(r.task)
        if measured:
            n = self.n
            n["calls"] += 1
            if met:
                n["met"] += 1
                n["met_input"] += r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_est
                n["met_output"] += r.output_tokens if r.output_tokens is not None else r.output_events

    def _same_slo(self, other: GoodputTally) -> None:
        if self.slo is None and not any(self.n.values()) and not self.missed:
            self.slo = other.slo
        elif other.slo is not None and other.slo.exprs != (self.slo.exprs if self.slo else ()):
            raise ValueError(f"goodput judged at two SLOs cannot merge: {self.slo and self.slo.expr!r}, "
                             f"{other.slo.expr!r}")  # fmt: skip

    def merge(self, other: GoodputTally, counts: bool = True, calls: bool = True) -> None:
        """``other`` added in: its tasks' misses (``counts``) and its measured calls (``calls``)."""
        self._same_slo(other)
        if counts:
            self.missed |= other.missed
        if calls:
            for k in _COUNTS:
                self.n[k] += other.n[k]

    def encode(self) -> dict[str, Any] | None:
        if self.slo is None:
            return None
        return {"slo": list(self.slo.exprs), "n": self.n, "missed": sorted(self.missed)}

    @classmethod
    def decode(cls, data: dict[str, Any] | None) -> GoodputTally:
        if not data:  # no SLO, or a window record written before goodput existed
            return cls()
        t = cls(parse_slo(data["slo"]))
        t.n.update(data["n"])
        t.missed = {int(task) for task in data["missed"]}
        return t

    def figures(self, complete: Mapping[int, bool], seconds: float) -> dict[str, Any]:
        """``goodput``: the shares, the counts beside them and the good throughput over the window's ``seconds``;
        ``complete``: the complete tasks (True: replayed whole from turn 0, the ones judged)."""
        if self.slo is None:
            return {"slo": None, **dict.fromkeys(("calls", "calls_met", "calls_met_share", "tasks", "tasks_met",
                                                  "tasks_met_share", "output_tps", "total_tps"))}  # fmt: skip
        n = self.n
        whole = [task for task, w in complete.items() if w]
        tasks_met = sum(task not in self.missed for task in whole)

        def rate(tokens: int) -> float | None:
            return tokens / seconds if seconds > 0 else None

        return {
            "slo": self.slo.expr,
            "calls": n["calls"],
            "calls_met": n["met"],
            "calls_met_share": n["met"] / n["calls"] if n["calls"] else None,
            "tasks": len(whole),
            "tasks_met": tasks_met,
            "tasks_met_share": tasks_met / len(whole) if whole else None,
            "output_tps": rate(n["met_output"]),
            "total_tps": rate(n["met_input"] + n["met_output"]),
        }
