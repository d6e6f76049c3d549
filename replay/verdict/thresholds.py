"""Thresholds (k6 style) and SLOs: expressions over any figure of a summary, judged after (or during) a run.

An expression is ``FIGURE OP VALUE``: ``ttft_p95<2s``, ``error_rate<1%``, ``user_decode_tps_p25>40``,
``throughput.total_tokens_per_min>=20.23M``. FIGURE is a JSON path into the summary (``ttft_s.p95``) or a short
name for one: ``NAME_pNN`` is ``NAME_s.pNN`` (latencies, in seconds) or ``NAME.pNN`` (speeds); a bare name is looked
up at the top of the summary, then under ``throughput``, ``cache``, ``tasks`` and ``client``; ``concurrency_NAME`` is
``concurrency.NAME`` and ``client_paused_share`` is ``client.paused_calls.share``. OP is one of ``< <= > >= ==``.
VALUE is a number with an optional unit: ``ms``, ``s``, ``m`` (minutes), ``%`` (a ratio: 1% = 0.01), or a scale
``k``, ``M``, ``G``. Every figure a summary can have is a name (``summary_template``: the sections a run may leave
null, ``answers``, ``speculation``, ``truth``, in their whole shape), checked before a run; a figure the run does not
have (``null``, or a section it left null) fails its threshold: nothing unmeasured passes.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from replay.errors import ReplayError
from replay.expressions import OPS, parse_expression, split_terms

_SECTIONS = ("throughput", "cache", "tasks", "client")
_PREFIXED = ("concurrency",)  # ``concurrency_active_share`` is ``concurrency.active_share``
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

    def path(self, summary: dict[str, Any], open_maps: bool = False) -> tuple[str, ...]:
        """Where the figure is in ``summary``; ThresholdError (naming what exists) when it is nowhere. ``open_maps``:
        a name under one of the summary's maps of names a host or a run chooses (``errors_by_class.http_429``,
        ``routes.NAME``: empty in ``summary_template``) is a figure too."""
        for candidate in _candidates(self.figure):
            if _lookup(summary, candidate, open_maps) is not _MISSING:
                return candidate
        raise ThresholdError(f"threshold {self.expr!r}: the summary has no figure {self.figure!r}")

    def judge(self, summary: dict[str, Any]) -> dict[str, Any]:
        """``{expr, ok, value}`` against ``summary``; a figure without a value (null, or in a section this run left
        null: ``answers`` with --no-check-answers) fails."""
        try:
            path = self.path(summary)
        except ThresholdError:
            path = self.path(summary_template(), open_maps=True)  # (raises for a name no summary has)
        value = _lookup(summary, path)
        if value is _MISSING and path[:-1] in COUNT_MAPS:
            value = 0  # no call of that class
        number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        ok = number is not None and OPS[self.op](float(number), self.value)
        return {"expr": self.expr, "ok": bool(ok), "value": number, "figure": ".".join(path)}


_MISSING = object()


# Maps of counts by a name (an error class, a tool-call fault): a name absent from them counted none
COUNT_MAPS = {("errors_by_class",), ("answers", "tool_call_faults")}


def _lookup(summary: dict[str, Any], path: tuple[str, ...], open_maps: bool = False) -> Any:
    node: Any = summary
    for i, key in enumerate(path):
        if open_maps and node == {} and i == len(path) - 1:
            return None  # a name of an open map (empty in the template)
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
        out += [(section, parts[0][len(section) + 1 :]) for section in _PREFIXED if parts[0].startswith(f"{section}_")]
    return out


def parse_all(texts: list[str] | tuple[str, ...], check_figures: bool = False) -> list[Threshold]:
    """Expressions given as repeated options, each possibly a comma-separated list (``--slo 'a<1,b>2'``).

    ``check_figures`` also checks that each names a figure a summary has (before a run, not after it)."""
    parsed = [Threshold.parse(part) for part in split_terms(texts)]
    if check_figures and parsed:
        template = summary_template()
        for threshold in parsed:
            threshold.path(template, open_maps=True)
    return parsed


@functools.cache
def summary_template() -> dict[str, Any]:
    """Every key a summary can have, with no values: an empty run's summary (under a recipe, so the recipe blocks'
    figures are there too) with the sections an empty run leaves null in their whole shape."""
    from replay.metrics.answer_tally import AnswerTally
    from replay.metrics.host import speculation
    from replay.metrics.host.host_tally import HostTally
    from replay.metrics.host.server_figures import server_figures
    from replay.metrics.recorded_timeline import timeline_template
    from replay.metrics.summary import summarize
    from replay.metrics.truth_compare import compare
    from replay.records.run_file import RunData

    recipes = {"recipe": {"name": "any", "figures": ["agentx", "aa"]}}
    template = summarize(RunData(recipes, [], [], {}, [], None))
    template.recorded_timeline = timeline_template()
    template.answers = AnswerTally().figures(forced_asked=True, always=True)
    template.truth = compare([], {}) | {"every": 1, "of_requests": 0}  # (as truth_compare.compare_file adds them)
    out = template.to_dict()
    out["speculation"] = speculation.from_host_metrics({"spec_drafts": 0})  # its keys, as a scrape fills them
    out["server"] = server_figures(HostTally(), always=True)
    return out


def judge_all(thresholds: list[Threshold], summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [t.judge(summary) for t in thresholds]
