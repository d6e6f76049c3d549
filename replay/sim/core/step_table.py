"""Measured step times that drive the engine directly, instead of the physical roofline.

A table holds two grids of milliseconds, as one would measure them on a real host (or read them from a
kernel database such as aiconfigurator's):

- ``prefill``: a step that prefills ``tokens`` new prompt tokens on top of ``context`` tokens already in
  the cache (a cached prefix, or the earlier chunks of the same prompt);
- ``decode``: a step in which ``batch`` sequences each decode one token over ``context`` tokens each.

Between grid points the time is piecewise linear in each dimension (bilinear within a cell). Below an
axis's first point it is clamped to that point; past its last point it is extrapolated linearly along
the last segment (time keeps growing with tokens, batch and context as it did between the last two
measurements), never below the last point's figure. A step the engine builds is looked up as:

- its prefill part (all prefill chunks of the step together) at ``tokens`` = their sum and
  ``context`` = the token-weighted mean of the context before each chunk;
- its decode part at ``batch`` = the decoding sequences and ``context`` = their mean context;
- a step with both costs ``prefill + decode − shared``, where ``shared`` is the decode grid's first
  point (one sequence at the smallest context: the weight read and fixed per-step cost both grids
  include), and never less than either part alone.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from replay.errors import ReplayError


class StepShape(NamedTuple):
    """What one engine step computes, in the terms both step models need."""

    tokens: int  # new tokens computed (prefill chunks and decodes)
    kv_read: float  # KV tokens the step reads (each sequence's context, its new tokens included)
    attn_pairs: float  # (new token, context token) pairs attended
    decodes: int = 0  # sequences decoding one token
    decode_context: float = 0.0  # sum of the decoding sequences' contexts
    prefill_tokens: int = 0  # tokens of prefill chunks
    prefill_context: float = 0.0  # sum over prefill chunks of tokens × context before the chunk

    @classmethod
    def decode(cls, batch: int, context: float) -> StepShape:
        """``batch`` sequences decoding one token each over ``context`` tokens each."""
        return cls(batch, batch * context, batch * context, batch, batch * context)

    @classmethod
    def prefill(cls, tokens: int, context: float = 0.0) -> StepShape:
        """One chunk of ``tokens`` prompt tokens on top of ``context`` tokens already computed."""
        pairs = tokens * (context + (tokens + 1) / 2)
        return cls(tokens, context + tokens, pairs, 0, 0.0, tokens, tokens * context)


class TableError(ReplayError, ValueError):
    """A step table that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class Grid:
    """Milliseconds on a 2-D grid: ``ms[i][j]`` at ``rows[i]``, ``cols[j]``."""

    rows: tuple[float, ...]
    cols: tuple[float, ...]
    ms: tuple[tuple[float, ...], ...]

    def __call__(self, row: float, col: float) -> float:
        rows, ms = self.rows, self.ms
        if len(rows) == 1 or row <= rows[0]:
            return _interp(self.cols, ms[0], col)
        k = min(bisect.bisect_right(rows, row) - 1, len(rows) - 2)
        pair = (_interp(self.cols, ms[k], col), _interp(self.cols, ms[k + 1], col))
        return _interp(rows[k : k + 2], pair, row)


def _interp(axis: Sequence[float], values: Sequence[float], x: float) -> float:
    """Piecewise linear in ``x``: clamped below the first point, extrapolated along the last segment above
    the last one but never below the last value."""
    if len(axis) == 1 or x <= axis[0]:
        return values[0]
    k = min(bisect.bisect_right(axis, x) - 1, len(axis) - 2)
    v = values[k] + (x - axis[k]) / (axis[k + 1] - axis[k]) * (values[k + 1] - values[k])
    return max(v, values[-1]) if x > axis[-1] else v


@dataclass(frozen=True, slots=True)
class StepTable:
    """Prefill and decode step times; ``seconds(shape)`` is the step time the engine uses."""

    prefill: Grid  # rows: new tokens in the step; cols: context before the chunk
    decode: Grid  # rows: decoding sequences; cols: context per sequence

    @property
    def shared_ms(self) -> float:
        return self.decode.ms[0][0]

    def seconds(self, shape: StepShape) -> float:
        prefill = decode = 0.0
        if shape.prefill_tokens:
            prefill = self.prefill(shape.prefill_tokens, shape.prefill_context / shape.prefill_tokens)
        if shape.decodes:
            decode = self.decode(shape.decodes, shape.decode_context / shape.decodes)
        if prefill and decode:
            return max(prefill + decode - self.shared_ms, prefill, decode) / 1000.0
        return (prefill or decode) / 1000.0

    @classmethod
    def from_dict(cls, data: Any, where: str = "steps") -> StepTable:
        """A table from ``{"prefill": {"tokens", "context", "ms"}, "decode": {"batch", "context", "ms"}}``."""
        if not isinstance(data, dict):
            raise TableError(f"{where}: expected a table with 'prefill' and 'decode'; got {type(data).__name__}")
        unknown = sorted(set(data) - {"prefill", "decode"})
        if unknown:
            raise TableError(f"{where}.{unknown[0]}: unknown key; expected 'prefill' and 'decode'")
        prefill = _grid(data.get("prefill"), f"{where}.prefill", "tokens")
        decode = _grid(data.get("decode"), f"{where}.decode", "batch")
        return cls(prefill, decode)


def _grid(data: Any, where: str, row_name: str) -> Grid:
    if not isinstance(data, dict):
        raise TableError(f"{where}: expected a table with '{row_name}', 'context' and 'ms'")
    unknown = sorted(set(data) - {row_name, "context", "ms"})
    if unknown:
        raise TableError(f"{where}.{unknown[0]}: unknown key; expected '{row_name}', 'context' and 'ms'")
    rows = _axis(data.get(row_name), f"{where}.{row_name}", positive=True)
    cols = _axis(data.get("context"), f"{where}.context", positive=False)
    ms = data.get("ms")
    if not isinstance(ms, list) or len(ms) != len(rows):
        raise TableError(f"{where}.ms: expected {len(rows)} rows (one per {row_name}) of {len(cols)} numbers")
    out = []
    for i, line in enumerate(ms):
        if not isinstance(line, list) or len(line) != len(cols):
            raise TableError(f"{where}.ms[{i}]: expected {len(cols)} numbers (one per context)")
        for j, v in enumerate(line):
            if not _number(v) or v <= 0:
                raise TableError(f"{where}.ms[{i}][{j}]: expected a positive number of milliseconds; got {v!r}")
        out.append(tuple(float(v) for v in line))
    return Grid(rows, cols, tuple(out))


def _axis(values: Any, where: str, positive: bool) -> tuple[float, ...]:
    bound = "positive" if positive else "non-negative"
    if not isinstance(values, list) or not values:
        raise TableError(f"{where}: expected a non-empty list of increasing {bound} numbers")
    for v in values:
        if not _number(v) or v < 0 or (positive and v == 0):
            raise TableError(f"{where}: expected {bound} numbers; got {v!r}")
    if any(b <= a for a, b in itertools.pairwise(values)):
        raise TableError(f"{where}: expected strictly increasing numbers; got {values}")
    return tuple(float(v) for v in values)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
