"""The one grammar of ``FIGURE OP VALUE`` expressions: thresholds and SLOs on a summary's figures
(``replay.verdict.thresholds``) and the per-call SLO goodput counts against (``replay.metrics.goodput``).

FIGURE is a name or a dotted path (a part may hold ``-``, ``:`` and ``/`` too, as the names a host gives its models
and routes do: ``served.models.replay-sim``); OP is one of ``< <= > >= ==``; VALUE is a number with an optional
unit: ``ms``, ``s``, ``m`` (minutes), ``%`` (a ratio: 1% = 0.01), or a scale ``k``, ``M``, ``G``.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable

OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
}
UNITS = {"": 1.0, "ms": 1e-3, "s": 1.0, "m": 60.0, "%": 0.01, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}
_EXPR = re.compile(
    r"\s*([A-Za-z_][\w.:/-]*)\s*(<=|>=|==|<|>)\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(ms|s|m|%|k|K|M|G)?\s*"
)


def parse_expression(text: str) -> tuple[str, str, float] | None:
    """(figure as written, op, value in base units) of ``text``, or None when it is not an expression."""
    m = _EXPR.fullmatch(text)
    if not m:
        return None
    figure, op, number, unit = m.groups()
    return figure, op, float(number) * UNITS[unit or ""]


def split_terms(texts: list[str] | tuple[str, ...]) -> list[str]:
    """Expressions given as repeated options, each possibly a comma-separated list (``--slo 'a<1,b>2'``)."""
    return [part.strip() for text in texts for part in text.split(",") if part.strip()]
