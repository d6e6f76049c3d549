"""Reading a run file back, whatever state it is in: every line it can use, and a note for every line it cannot.

A run file may be torn (a crash mid-write), cut short (kill -9: no footer), written by a newer replay (unknown
fields: ignored), edited by hand, or damaged. Each line is checked against the record it claims to be: fields of
the right types, numbers finite and of a plausible size. A line that fails is skipped and named (file:line and
why), so ``replay report`` reports what the file still holds instead of failing on it. Only a file without a
readable header is refused, or one whose header holds a field of the wrong type (named: file, line and field):
nothing can be said without it.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from replay.records.run_file import RUN_FORMAT, RequestRecord, RunData, TaskRecord

PLAUSIBLE = 1e12  # far above any time, count or rate a run holds; beyond it a number is damage
MAX_NOTES = 20  # notes printed per file; the rest are counted


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and abs(v) <= PLAUSIBLE


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) <= PLAUSIBLE


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "float": _number,
    "int": _int,
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "list[float]": lambda v: isinstance(v, list) and len(v) % 2 == 0 and all(map(_number, v)),
    "dict[str, Any]": lambda v: isinstance(v, dict),
    "list[dict[str, Any]]": lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
    "dict[str, str]": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
    "list[str]": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
}


def _field_checks(cls: type) -> dict[str, tuple[Callable[[Any], bool], bool, bool]]:
    """Per field: (type check, None allowed, required) from the dataclass's own annotations."""
    out = {}
    for f in dataclasses.fields(cls):
        kinds = [k.strip() for k in str(f.type).split("|")]
        nullable = "None" in kinds
        kinds = [k for k in kinds if k != "None"]
        check = _CHECKS[kinds[0]]
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out[f.name] = (check, nullable, required)
    return out


_REQUEST, _TASK = _field_checks(RequestRecord), _field_checks(TaskRecord)


def _record(cls: type, checks: dict[str, tuple[Callable[[Any], bool], bool, bool]], obj: dict[str, Any]) -> Any:
    """An instance of ``cls`` from ``obj``, or the problem (a string) that stops it."""
    values = {}
    for name, (check, nullable, required) in checks.items():
        if name not in obj:
            if required:
                return f"field '{name}' missing"
            continue
        value = obj[name]
        if (value is None and not nullable) or (value is not None and not check(value)):
            return f"field '{name}' is {orjson.dumps(value)[:40].decode(errors='replace')}, not a valid value"
        values[name] = value
    return cls(**values)


def _phase(obj: dict[str, Any]) -> Any:
    if not isinstance(obj.get("name"), str) or not _number(obj.get("t")):
        return "a phase needs a string 'name' and a number 't'"
    return obj


def _client(obj: dict[str, Any]) -> Any:
    for key in ("t", "wall_s", "cpu_s", "lag_p99_ms"):
        if not _number(obj.get(key)):
            return f"a client sample needs a number '{key}'"
    return obj


class _Keep:
    """The default sink: every record kept in a RunData."""

    def __init__(self, data: RunData) -> None:
        self.data = data
        self.phases = data.phases  # the current segment's

    def phase(self, name: str, t: float) -> None:
        self.phases[name] = t

    def segment(self, mark: dict[str, Any]) -> None:
        self.phases = {}
        self.data.later_phases.append(self.phases)

    def request(self, r: RequestRecord) -> None:
        self.data.requests.append(r)

    def task(self, t: TaskRecord) -> None:
        self.data.tasks.append(t)

    def sample(self, s: dict[str, Any]) -> None:
        self.data.client.append(s)


def read_run(path: str | Path, notes: Callable[[str], None] | None = None, sink: Any = None) -> RunData:
    """Parse a run file; every line that cannot be used is skipped and named through ``notes`` (default: stderr).

    ``sink`` (an object with ``phase(name, t)``, ``request(r)``, ``task(t)``, ``sample(s)``, and if it wants them
    ``header(h)``, ``segment(s)`` and ``mark(record)`` for window and segment records) takes the records in file
    order instead of the returned RunData (whose lists then stay empty): a run of any length in flat memory.
    """
    say = notes or (lambda text: print(text, file=sys.stderr))
    header: dict[str, Any] | None = None
    data = RunData(header={}, requests=[], tasks=[], phases={}, client=[], footer=None)
    skipped = 0
    sink = sink if sink is not None else _Keep(data)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror}") from None
    with handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            problem = _line(data, sink, line)
            if isinstance(problem, dict):
                if header is None:
                    if fault := _header_problem(problem):  # nothing can be read without it: refused, named
                        raise ValueError(f"{path}:{lineno}: {fault}")
                    header = problem
                    if hasattr(sink, "header"):  # before any request: a summary prices them by its rate card
                        sink.header(header)
                else:
                    problem = "a second header (the first one is used)"
            if isinstance(problem, str):
                skipped += 1
                if skipped <= MAX_NOTES:
                    say(f"{path}:{lineno}: skipped: {problem}")
    if skipped > MAX_NOTES:
        say(f"{path}: skipped {skipped - MAX_NOTES} more lines")
    if header is None:
        raise ValueError(f"{path}: not a replay run file (no header line)")
    if header.get("format") != RUN_FORMAT:
        raise ValueError(f"{path}: run file format {header.get('format')!r}, expected {RUN_FORMAT!r}")
    data.header, data.skipped_lines = header, skipped
    return data


_OBJECT = (lambda v: isinstance(v, dict), "an object")
_DIVISORS = ("gpus", "power_kw", "price_per_hour")  # the host's and the recipe's: the figures divide by them
# The header's fields as every reader takes them (``header["host"].get(...)``): a field of another type is no run
# file replay wrote, and is named (file, line, field) rather than failed on somewhere in the figures.
_HEADER: dict[str, tuple[Callable[[Any], bool], str, bool]] = {  # field: (check, what it must be, None allowed)
    **{name: (*_OBJECT, False) for name in ("clock", "host", "request", "load", "workload", "versions")},
    **{name: (*_OBJECT, True) for name in ("simulated", "baseline", "recipe")},
    **{name: (_CHECKS["list[str]"], "a list of strings", True) for name in ("thresholds", "slo")},
    **{name: (_CHECKS["str"], "a string", True) for name in ("simulated_truth_log", "created", "scrape_metrics")},
    "window_s": (_number, "a number of seconds", True),
    "abort_on_fail": (_CHECKS["bool"], "true or false", True),
    **{f"{part}.{name}": (_number, "a number", True) for part in ("host", "recipe") for name in _DIVISORS},
    "workload.paths": (_CHECKS["list[str]"], "a list of strings", True),
    "workload.padding": (*_OBJECT, True),
}
# A window record's own fields (what each window's figures are read from); a record without them is skipped.
_WINDOW: dict[str, tuple[Callable[[Any], bool], str]] = {
    "index": (_int, "an integer"), "t_start": (_number, "a number"), "t_end": (_number, "a number"),
    "steady": _OBJECT, "other": _OBJECT,
}  # fmt: skip


def _header_problem(header: dict[str, Any]) -> str | None:
    """The first header field of the wrong type, named with what it must be; None when each is usable."""
    for name, (check, what, nullable) in _HEADER.items():  # (a part is checked before its fields)
        part, _, field = name.rpartition(".")
        within = header.get(part) if part else header
        if not isinstance(within, dict) or field not in within:
            continue
        if not check(within[field]) and not (nullable and within[field] is None):
            return f"header field {name!r}: expected {what}, got {_describe(within[field])}"
    return None


def _window_problem(obj: dict[str, Any]) -> str | None:
    for name, (check, what) in _WINDOW.items():
        if name not in obj:
            return f"a window record: {name!r} missing"
        if not check(obj[name]):
            return f"a window record: {name!r}: expected {what}, got {_describe(obj[name])}"
    return None


def _describe(value: Any) -> str:
    kind = {dict: "an object", list: "a list", str: "a string", bool: "true or false"}.get(type(value))
    return "null" if value is None else kind or f"the number {orjson.dumps(value)[:40].decode(errors='replace')}"


def _line(data: RunData, sink: Any, line: bytes) -> str | dict[str, Any] | None:
    """File one line: None when used, the header (a dict) when it is one, else the problem."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return "not JSON (a torn write?)"
    if not isinstance(obj, dict):
        return "not a JSON object"
    kind = obj.pop("type", None)
    if kind == "header":
        return obj
    if kind == "request":
        rec = _record(RequestRecord, _REQUEST, obj)
        take = sink.request
    elif kind == "task":
        rec = _record(TaskRecord, _TASK, obj)
        take = sink.task
    elif kind == "phase":
        rec = _phase(obj)
        if not isinstance(rec, str):
            sink.phase(rec["name"], rec["t"])
            return None
    elif kind == "client":
        rec = _client(obj)
        take = sink.sample
    elif kind == "footer":
        data.footer = obj
        return None
    elif kind in ("window", "segment"):
        if kind == "window" and (fault := _window_problem(obj)):
            return fault
        record = {"type": kind, **obj}
        data.marks.append(record)  # windows and resumed segments: few, read by the reports
        if kind == "segment" and hasattr(sink, "segment"):
            sink.segment(obj)
        if hasattr(sink, "mark"):
            sink.mark(record)
        return None
    else:
        return f"unknown record type {orjson.dumps(kind)[:40].decode(errors='replace')}"
    if isinstance(rec, str):
        return f"a {kind} record: {rec}"
    take(rec)
    return None
