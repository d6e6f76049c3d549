"""A history of runs in one local SQLite file: each run's headline figures, its steady windows' figures (the
noise), and its identity (what was measured, how, with which replay, on which machine).

A run is keyed by the digest of its header: the same run added twice (or a copy of its file) is one row, its
figures replaced by the later add (a resumed run finished since). Only finished runs are added (a footer): a run
killed part-way is not a night. SQLite commits each add as one transaction, so a history survives a kill of the
process writing it: the night is in it whole or not at all.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from replay.errors import ReplayError
from replay.verdict.baseline import FIGURES, _client_limited, _get, _noise, steady_windows

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,      -- digest of the run file's header
    path TEXT NOT NULL,           -- the run file, as given to add (absolute)
    started REAL,                 -- wall clock of the run's start (unix seconds): the nights' order
    created TEXT,
    added TEXT NOT NULL,
    series TEXT NOT NULL,         -- digest of the identity's parts that change figures
    identity TEXT NOT NULL,       -- JSON: model, api, workload fingerprint, options (they split a series)
    about TEXT NOT NULL,          -- JSON: host, simulated profile, replay version, machine (recorded, no split)
    unjudged TEXT                 -- why the run's figures are its client's, not its host's (NULL: they are)
);
CREATE TABLE IF NOT EXISTS figures (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    figure TEXT NOT NULL,         -- a FIGURES name, e.g. throughput.total_tps
    value REAL,
    noise REAL,                   -- relative standard error from the steady windows' spread (0: too few windows)
    noise_windows INTEGER,
    windows TEXT,                 -- JSON: the steady windows' values of the figure
    PRIMARY KEY (run_id, figure)
);
"""
LOAD_KEYS = ("concurrency", "tasks", "duration_s", "tool_time", "salt_tasks", "rate_limit", "on_error", "retry",
             "lanes")  # fmt: skip
FIGURE_NAMES = tuple(".".join(path) for path, _, _ in FIGURES)


class HistoryError(ReplayError, ValueError):
    """A history or a run that cannot be read or added; the message names the file."""


@dataclass(frozen=True, slots=True)
class Night:
    """One run of a history with its figures: ``figures[name] = (value, relative noise, noise windows)``."""

    run_id: str
    path: str
    started: float | None
    created: str | None
    series: str
    identity: dict[str, Any]
    about: dict[str, Any]
    unjudged: str | None
    figures: dict[str, tuple[float | None, float, int]]


def identity(header: dict[str, Any]) -> dict[str, Any]:
    """What a night measured and how: another model, workload or option is another series. The seed is not in it
    (each night may draw its own), nor the host's address (an embedded host's port changes every run)."""
    host, load = header.get("host") or {}, header.get("load") or {}
    return {
        "model": host.get("model"),
        "api": host.get("api"),
        "workload": (header.get("workload") or {}).get("fingerprint"),
        "load": {k: load.get(k) for k in LOAD_KEYS},
        "request": header.get("request"),
        "recipe": header.get("recipe"),
        "open_loop": header.get("open_loop"),
    }


def about(header: dict[str, Any]) -> dict[str, Any]:
    """What the night ran against and with, recorded beside its figures: none of it splits a series."""
    versions = header.get("versions") or {}
    return {
        "host": (header.get("host") or {}).get("name") or (header.get("host") or {}).get("base_url"),
        "simulated_host": header.get("simulated_host"),
        "replay_version": header.get("replay_version"),
        "machine": {k: versions.get(k) for k in ("platform", "python", "event_loop")},
    }


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def connect(path: str | Path, create: bool = False) -> sqlite3.Connection:
    """The history at ``path`` (made when ``create``); HistoryError naming it when it is missing or not one."""
    p = Path(path)
    if not create and not p.is_file():
        raise HistoryError(f"{path}: no such history file (replay history add RUN --file {path} makes one)")
    try:
        db = sqlite3.connect(p)
        db.execute("PRAGMA foreign_keys = ON")
        db.executescript(SCHEMA)
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"{path}: not a history file: {exc}") from None
    return db


def night_rows(run_file: str | Path) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    """The ``runs`` row and ``figures`` rows of a finished run file (HistoryError naming it otherwise)."""
    from replay.runner.rebuild import rebuild_run

    try:
        rebuilt = rebuild_run(run_file)
    except (OSError, ValueError) as exc:
        raise HistoryError(f"{run_file}: {exc}") from None
    header, footer = rebuilt.data.header, rebuilt.data.footer
    if footer is None:
        raise HistoryError(f"{run_file}: the run did not finish (no footer): a killed run is not a night")
    return night_from(header, rebuilt.summary.to_dict(), str(Path(run_file).resolve()))


def night_from(header: dict[str, Any], summary: dict[str, Any], path: str) -> tuple[dict[str, Any], list[Any]]:
    """The rows of a run given its header and summary (a finished run's)."""
    run_id = _digest(header)
    ident = identity(header)
    run = {"run_id": run_id, "path": path, "started": (header.get("clock") or {}).get("unix"),
           "created": header.get("created"), "added": datetime.now(UTC).isoformat(timespec="seconds"),
           "series": _digest(ident), "identity": json.dumps(ident, sort_keys=True),
           "about": json.dumps(about(header), sort_keys=True), "unjudged": _client_limited(summary)}  # fmt: skip
    steady = steady_windows(summary)
    rows = []
    for (fpath, key, _), name in zip(FIGURES, FIGURE_NAMES, strict=True):
        noise, n = _noise(summary, key)
        values = [w.get(key) for w in steady] if key else []
        rows.append((run_id, name, _get(summary, fpath), noise, n, json.dumps(values)))
    return run, rows


def add(db: sqlite3.Connection, run: dict[str, Any], rows: list[tuple[Any, ...]]) -> bool:
    """Put one night in the history, in one transaction; True when it was not there before."""
    with db:
        new = db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run["run_id"],)).fetchone() is None
        db.execute("DELETE FROM figures WHERE run_id = ?", (run["run_id"],))
        db.execute(
            f"INSERT OR REPLACE INTO runs ({', '.join(run)}) VALUES ({', '.join('?' * len(run))})", tuple(run.values())
        )
        db.executemany("INSERT INTO figures VALUES (?, ?, ?, ?, ?, ?)", rows)
    return new


def nights(db: sqlite3.Connection) -> list[Night]:
    """Every night of the history in the order they ran (the run's start; then the order they were added)."""
    figures: dict[str, dict[str, tuple[float | None, float, int]]] = {}
    for run_id, name, value, noise, n in db.execute("SELECT run_id, figure, value, noise, noise_windows FROM figures"):
        figures.setdefault(run_id, {})[name] = (value, noise or 0.0, n or 0)
    out = []
    query = "SELECT run_id, path, started, created, series, identity, about, unjudged FROM runs"
    for run_id, path, started, created, series, ident, ab, unjudged in db.execute(query + " ORDER BY started, rowid"):
        out.append(Night(run_id, path, started, created, series, json.loads(ident), json.loads(ab), unjudged,
                         figures.get(run_id, {})))  # fmt: skip
    return out
