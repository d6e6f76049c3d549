"""Resuming a run (``replay run --resume RUN``): a stopped or killed soak goes on into the same file.

The file keeps everything it holds; a ``segment`` record marks where the new segment begins, and the run goes on
where the old one stopped: the tasks of the seeded order not yet started (a task cut by the kill is not replayed
again: it is in the file as cut), the rest of ``--duration`` or ``--tasks``, window numbers after the last one.
The configuration must be the one the file was made with: a resumed soak that quietly changed its load would not be
one run. Reports read the segments as one run, with the gap between them shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.errors import ReplayError
from replay.records.reader import read_run

# The parts of the header that make a run what it is; a resumed segment must match them.
SAME = (
    ("host", "api"), ("host", "model"), ("simulated_host",), ("simulated", "faults"), ("simulated", "dialect"),
    ("request",), ("load", "concurrency"), ("load", "tasks"), ("load", "tool_time"),
    ("load", "seed"), ("load", "salt_tasks"), ("load", "rate_limit"), ("load", "retry"), ("load", "on_error"),
    ("workload", "digest"), ("thresholds",), ("slo",), ("window_s",),
)  # fmt: skip


class ResumeError(ReplayError, ValueError):
    """The run cannot be resumed as asked; the message says why."""


class _Scan:
    """What resuming needs of a run file, read in flat memory."""

    def __init__(self) -> None:
        self.max_task = -1
        self.starts: list[float] = []
        self.last: float | None = None
        self.elapsed = 0.0

    def phase(self, name: str, t: float) -> None:
        if name == "start":
            self.starts.append(t)
        if name == "end" and self.starts:
            self.elapsed += t - self.starts[-1]
            self.last = None

    def request(self, r: Any) -> None:
        self.max_task = max(self.max_task, r.task)
        self.last = max(self.last or 0.0, r.t_done or r.t_sent)

    def task(self, t: Any) -> None:
        self.max_task = max(self.max_task, t.task)
        self.last = max(self.last or 0.0, t.t_end)

    def sample(self, s: Any) -> None:
        pass

    def segment(self, mark: Any) -> None:
        self._close()

    def _close(self) -> None:
        if self.last is not None and self.starts:  # a segment killed before its end mark: up to its last record
            self.elapsed += self.last - self.starts[-1]
        self.last = None


@dataclass(slots=True)
class Previous:
    """The run so far."""

    header: dict[str, Any]
    segments: int  # segments already in the file
    tasks_started: int
    windows: int  # window records already in the file (the next one's index)
    elapsed_s: float  # time the segments so far ran for
    stop_reason: str | None  # of the last segment (None: it was killed, no footer)


def read_previous(path: str | Path) -> Previous:
    if not Path(path).exists():
        raise ResumeError(f"--resume {path}: no such run file")
    scan = _Scan()
    data = read_run(path, sink=scan)
    scan._close()
    windows = [m for m in data.marks if m["type"] == "window"]
    reason = (data.footer or {}).get("stop_reason")
    if reason in ("completed", "tasks"):
        raise ResumeError(f"--resume {path}: the run completed ({reason}); there is nothing to resume")
    return Previous(
        header=data.header,
        segments=1 + sum(m["type"] == "segment" for m in data.marks),
        tasks_started=scan.max_task + 1,
        windows=(max(w["index"] for w in windows) + 1) if windows else 0,
        elapsed_s=scan.elapsed,
        stop_reason=reason,
    )


def _get(d: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        d = d.get(key) if isinstance(d, dict) else None
    return d


def check_same(before: dict[str, Any], now: dict[str, Any], duration_s: float | None) -> None:
    """ResumeError naming the first part of the configuration that differs (``duration_s``: as asked, before what
    the earlier segments ran was taken off it)."""
    if _get(before, ("load", "duration_s")) != duration_s:
        raise ResumeError(
            f"--resume: the run was made with --duration {_get(before, ('load', 'duration_s'))!r} s; this one asks for"
            f" {duration_s!r}"
        )
    for path in SAME:
        was, asked = _get(before, path), _get(now, path)
        if path == ("slo",):  # goodput's per-call SLO: a run file made before it existed has none
            was, asked = was or [], asked or []
        if was != asked:
            name = ".".join(path)
            raise ResumeError(f"--resume: the run was made with {name} = {was!r}; this one asks for {asked!r}")
    if not before.get("simulated_host") and _get(before, ("host", "base_url")) != _get(now, ("host", "base_url")):
        raise ResumeError("--resume: the run was made against another host")
