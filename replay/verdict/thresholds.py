"""Thresholds (k6 style) and SLOs: expressions over any figure of a summary, judged after (or during) a run.

An expression is ``FIGURE OP VALUE``: ``ttft_p95<2s``, ``error_rate<1%``, ``user_decode_tps_p25>40``,
``throughput.total_tokens_per_min>=20.23M``. FIGURE is a JSON path into the summary (``ttft_s.p95``) or a short
name for one: ``NAME_pNN`` is ``NAME_s.pNN`` (latencies, in seconds) or ``NAME.pNN`` (speeds); a bare name is looked
up at the top of the summary, then under ``throughput``, ``cache``, ``tasks`` and ``client``; ``client_paused_share`` is
``client.paused_calls.share``. OP is one of ``< <= > >= ==``.
VALUE is a number with an optional unit: ``ms``, ``s``, ``m`` (minutes), ``%`` (a ratio: 1% = 0.01), or a scale
``k``, ``M``, ``G``. A figure the run does not have (``null``) fails its threshold: nothing unmeasured passes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from replay.errors import ReplayError
from replay.expressions import OPS, parse_expression, split_terms

_SECTIONS = ("throughput", "cache", "tasks", "client")
_NAMED = {"client_paused_share": ("client", "paused_calls", "share")}  # short names of figures deeper down


class ThresholdError(ReplayError, ValueError):
    """An expression that cannot be read, or that names no figure of the summary."""


@dataclass(frozen=True, slots=True)
class Threshold:
    """One parsed expression."""

    expr: str
    figure: str  # as written
    op: str
    value: float

    @classmethod
    def parse(cls, text: str) -> Threshold:
        parsed = parse_expression(text)
        if parsed is None:
            raise ThresholdError(
                f"threshold {text!r}: expected FIGURE OP VALUE, e.g. 'ttft_p95<2s', 'error_rate<1%', "
                "'user_decode_tps_p25>40'"
            )
        figure, op, value = parsed
        return cls(text.strip(), figure, op, value)

    def path(self, summary: dict[str, Any]) -> tuple[str, ...]:
        """Where the figure is in ``summary``; ThresholdError (naming what exists) when it is nowhere."""
        for candidate in _candidates(self.figure):
            if _lookup(summary, candidate) is not _MISSING:
                return candidate
        raise ThresholdError(f"threshold {self.expr!r}: the summary has no figure {self.figure!r}")

    def judge(self, summary: dict[str, Any]) -> dict[str, Any]:
        """``{expr, ok, value}`` against ``summary``; a figure without a value (null) fails."""
        value = _lookup(summary, self.path(summary))
        number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        ok = number is not None and OPS[self.op](float(number), self.value)
        return {"expr": self.expr, "ok": bool(ok), "value": number, "figure": ".".join(self.path(summary))}


_MISSING = object()


def _lookup(summary: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = summary
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _candidates(figure: str) -> list[tuple[str, ...]]:
    parts = tuple(figure.split("."))
    out = [parts, *([_NAMED[figure]] if figure in _NAMED else [])]
    m = re.fullmatch(r"(.+)_(p\d+|mean|n)", parts[-1])
    if m and len(parts) == 1:
        name, stat = m.groups()
        out += [(f"{name}_s", stat), (name, stat)]
    if len(parts) == 1:
        out += [(section, parts[0]) for section in _SECTIONS]
    return out


def parse_all(texts: list[str] | tuple[str, ...], check_figures: bool = False) -> list[Threshold]:
    """Expressions given as repeated options, each possibly a comma-separated list (``--slo 'a<1,b>2'``).

    ``check_figures`` also checks that each names a figure a summary has (before a run, not after it)."""
    parsed = [Threshold.parse(part) for part in split_terms(texts)]
    if check_figures and parsed:
        from replay.metrics.recorded_timeline import timeline_template
        from replay.metrics.summary import summarize
        from replay.records.run_file import RunData

        recipes = {"recipe": {"name": "any", "figures": ["agentx", "aa"]}}  # recipe blocks' figures may be named too
        template = summarize(RunData(recipes, [], [], {}, [], None))  # every key a summary has, with no values
        template.recorded_timeline = timeline_template()
        for threshold in parsed:
            threshold.path(template.to_dict())
    return parsed


def judge_all(thresholds: list[Threshold], summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [t.judge(summary) for t in thresholds]
