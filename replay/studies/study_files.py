"""The index files of the studies (a sweep's, a capacity search's, a comparison's): JSON naming run files.

An index says how a study was made and names its run files relative to itself, so a directory moved whole still
reports; each figure is rebuilt from the run files (``summarize_file``), as ``replay report`` does for one run.
Virtual-clock levels have run files as real ones do; an index written before they had kept their summary instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from replay.studies.levels import Level

INDEX_FORMATS = ("replay.sweep/1", "replay.capacity/1", "replay.compare/1")


def write_json(path: Path, obj: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(obj, option=orjson.OPT_INDENT_2))


def relative(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` when it is inside it, else absolute."""
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path.resolve())


def level_entry(lv: Level, base: Path) -> dict[str, Any]:
    """How an index records one level: its run file (relative to the index), or its summary (a level without one)."""
    entry: dict[str, Any] = {"concurrency": lv.concurrency, "attempt": lv.attempt}
    if lv.run is None:
        entry["summary"] = lv.summary
    else:
        entry["run"] = relative(Path(lv.run), base)
    return entry


def index_format(path: str | Path) -> str | None:
    """The study format of a JSON index file, or None for anything else (a run file, say)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1)
            if head != b"{":
                return None
            obj = orjson.loads(head + f.read())
    except (OSError, orjson.JSONDecodeError):
        return None
    fmt = obj.get("format") if isinstance(obj, dict) else None
    return fmt if fmt in INDEX_FORMATS else None


def read_index(path: Path, fmt: str) -> dict[str, Any]:
    """The index at ``path``; ValueError naming the file when it is not JSON of format ``fmt``."""
    try:
        index = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(index, dict) or index.get("format") != fmt:
        raise ValueError(f"{path}: not a {fmt} index")
    return index


def run_path(entry: dict[str, Any], index_path: Path) -> str | None:
    """Where an entry's run file is, seen from here (None for a level without one)."""
    if "run" not in entry:
        return None
    run = Path(entry["run"])
    return str(run if run.is_absolute() else index_path.parent / run)


def level_summary(entry: dict[str, Any], index_path: Path) -> dict[str, Any]:
    """A level's summary: kept in the index (an older virtual-clock index) or rebuilt from its run file."""
    if "summary" in entry:
        return entry["summary"]
    run = run_path(entry, index_path)
    if run is None or not Path(run).exists():
        raise ValueError(f"{index_path}: level {entry.get('concurrency')}: run file {run} is missing")
    return summarize_file(Path(run))


def summarize_file(run: Path) -> dict[str, Any]:
    """A run file's summary as the live run gave it (the same JSON: ``replay.runner.rebuild.finish``)."""
    return rebuild(run).summary.to_dict()


def rebuild(run: Path, records: bool = False) -> Any:
    """``replay.runner.rebuild.rebuild_run`` (``records``: keep every record too)."""
    from replay.runner.rebuild import rebuild_run

    return rebuild_run(run, records=records)
