"""The generator's text and tables, read from ``scripts/default_workload/`` (see its README.md).

Everything a reader may want to edit lives there as text: the system prompt and task template (Markdown),
one TOML file per made-up project (issue, buggy function, fix, failing tests, session shape), the
vocabularies of the source generator, the planning tables, and the agent's sentences and tool outputs
(``templates.toml``). This module only loads them, once, into frozen records.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "default_workload"


@dataclass(frozen=True)
class Failure:
    """One failing test as pytest reports it before the fix."""

    test_id: str
    locals: str  # "raw = '-0.004'" lines pytest prints for parametrized arguments, or ""
    marker: str  # substring of the source line pytest marks with ">"
    lines: tuple[str, ...]  # the "E" lines


@dataclass(frozen=True)
class Shape:
    """How long a session is and how large its context grows: spread like real agent runs."""

    turns: int
    peak_tokens: int  # context size the session (or its first segment) grows to
    compaction_at: float | None = None  # fraction of the turns after which history is compacted


@dataclass(frozen=True)
class Project:
    """A made-up Python library with one reported bug, plus the text an agent session about it needs."""

    name: str
    org: str
    version: str
    layout: str  # "src" or "flat"
    nouns: tuple[str, ...]
    module: str
    others: tuple[str, ...]
    errors: tuple[str, ...]
    deps: tuple[str, ...]
    slug: str
    title: str
    issue: str
    imports: tuple[str, ...]
    support: str
    func: str
    buggy: str
    fixes: tuple[tuple[str, str], ...]
    caller: str
    repro: str
    repro_bad: str
    repro_good: str
    test_imports: tuple[str, ...]
    test_src: str
    new_ids: tuple[str, ...]
    failures: tuple[Failure, ...]
    cause: str
    fix_note: str
    hunch: str
    shape: Shape


def toml(name: str) -> dict[str, Any]:
    """A TOML file of the data directory, parsed (a missing or malformed file names itself)."""
    path = DATA / name
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SystemExit(f"{path}: {exc}") from None


def text(name: str) -> str:
    """A text file of the data directory, exactly as it is."""
    return (DATA / name).read_text(encoding="utf-8")


def fill(template: str, values: dict[str, Any], where: str) -> str:
    """``template`` with its {names} filled in; a name the generator does not provide is a one-line error."""
    try:
        return template.format_map(values)
    except (KeyError, IndexError, ValueError) as exc:
        raise SystemExit(f"{DATA}/{where}: cannot fill in {template[:60]!r}: {exc!r}") from None


def _project(path: Path) -> Project:
    raw = toml(f"projects/{path.name}")
    lists = {k: tuple(v) for k, v in raw.items() if isinstance(v, list) and k not in ("fixes", "failures")}
    try:
        return Project(
            **{k: v for k, v in raw.items() if k not in ("fixes", "failures", "shape")} | lists,
            fixes=tuple((f["old"], f["new"]) for f in raw["fixes"]),
            failures=tuple(Failure(f["test_id"], f["locals"], f["marker"], tuple(f["lines"])) for f in raw["failures"]),
            shape=Shape(**raw["shape"]),
        )
    except (KeyError, TypeError) as exc:
        raise SystemExit(f"{path}: {exc}") from None


@cache
def projects() -> tuple[Project, ...]:
    """The projects in file-name order (``01-…``, ``02-…``): one session each."""
    return tuple(_project(p) for p in sorted((DATA / "projects").glob("*.toml")))


VOCAB = toml("vocabulary.toml")
PLAN = toml("plan.toml")
