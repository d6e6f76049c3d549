"""A source file read, for the importers: its errors, its JSON, its values and times.

``ImportFailure`` (and ``Refused``: understood, deliberately not imported) names the file, the line (JSON Lines) or
JSON path and what was expected; ``Src`` binds that context to one file and line, so every check says where it is.
``read_json`` and ``iter_jsonl`` read a whole document or its lines; ``member`` and ``number`` read loosely typed
fields; ``parse_time``, ``seconds_between`` and ``unix_seconds`` read the sources' timestamps.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from replay.errors import ReplayError

# --------------------------------------------------------------------------------------------- errors


class ImportFailure(ReplayError, ValueError):
    """A source file that cannot be imported: names the file, the line (JSONL) or JSON path, and what was expected."""

    def __init__(self, path: str | Path, where: str, problem: str) -> None:
        self.path, self.where, self.problem = str(path), where, problem
        if not where:
            text = f"{path}: {problem}"
        elif where[0].isdigit():  # a line number (JSON Lines), optionally followed by a JSON path
            text = f"{path}:{where}: {problem}"
        else:  # a JSON path in a whole-file JSON document
            text = f"{path}: {where}: {problem}"
        super().__init__(text)


class Refused(ImportFailure):
    """A file that is understood but deliberately not imported (not a trajectory, nothing to replay...)."""


def describe(value: Any) -> str:
    """Short JSON rendering of a value for error messages."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Src:
    """Error context bound to one file (and optionally one JSONL line), so every error says where it is."""

    def __init__(self, path: str | Path, line: int = 0) -> None:
        self.path, self.line = str(path), line

    def at(self, line: int) -> Src:
        return Src(self.path, line)

    def fail(self, jpath: str, problem: str) -> ImportFailure:
        where = f"{self.line}: {jpath}" if self.line else jpath
        return ImportFailure(self.path, where, problem)

    def expect(self, value: Any, kinds: type | tuple[type, ...], jpath: str, what: str) -> Any:
        kinds_t = kinds if isinstance(kinds, tuple) else (kinds,)
        if not isinstance(value, kinds_t) or (isinstance(value, bool) and bool not in kinds_t):
            raise self.fail(jpath, f"expected {what}; got {describe(value)}")
        return value

    def get(self, obj: dict[str, Any], key: str, kinds: type | tuple[type, ...], jpath: str, what: str) -> Any:
        if key not in obj:
            raise self.fail(f"{jpath}.{key}", f"missing; expected {what}")
        return self.expect(obj[key], kinds, f"{jpath}.{key}", what)


# --------------------------------------------------------------------------------------------- reading


def read_json(path: Path, what: str = "") -> Any:
    """The whole file as one JSON document (``what``: the document expected, for the error)."""
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        expected = f"; expected {what}" if what else ""
        raise ImportFailure(path, "", f"not valid JSON ({exc}){expected}") from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, object) for every non-blank line; a bad line is an error naming it."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                yield lineno, orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise ImportFailure(path, str(lineno), f"not valid JSON ({exc})") from None


# --------------------------------------------------------------------------------------------- values


def member(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` when it is an object, else an empty one (absent, null or of another type)."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def number(value: Any) -> float | None:
    """A float from a number or a numeric string (SWE-agent writes some as strings), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        v = float(value)
    elif isinstance(value, str):
        try:
            v = float(value)
        except ValueError:
            return None
    else:
        return None
    return v if math.isfinite(v) else None


# --------------------------------------------------------------------------------------------- time


def parse_time(value: Any) -> datetime | float | None:
    """ISO-8601 string → datetime (aware if it carries a zone); number → unix seconds (ms if huge)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        v = float(value)
        return v / 1000.0 if v > 1e11 else v
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            return float(text)
        except ValueError:
            pass
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def seconds_between(a: datetime | float | None, b: datetime | float | None) -> float | None:
    """b − a in seconds, or None when either is missing or they are of different kinds."""
    if a is None or b is None:
        return None
    if isinstance(a, datetime) and isinstance(b, datetime):
        if (a.tzinfo is None) != (b.tzinfo is None):
            return None
        return (b - a).total_seconds()
    if isinstance(a, float) and isinstance(b, float):
        return b - a
    return None


def unix_seconds(t: datetime | float | None) -> float | None:
    """Unix seconds for a zone-aware datetime or a number; None for naive local times."""
    if isinstance(t, float):
        return t
    if isinstance(t, datetime) and t.tzinfo is not None:
        return t.timestamp()
    return None
