"""What a run's report sections read: its records, its summary and the per-task comparison with the recording."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from replay.metrics.recorded_timeline import TaskDrift
from replay.metrics.summary import steady_window
from replay.metrics.timeline import run_start
from replay.records.run_file import RequestRecord, RunData
from replay.reports.html_page import Section


@dataclass(slots=True)
class RunReport:
    """One run for the report: ``summary`` is what ``replay report --json`` prints (truth and breakdown included)."""

    run: RunData
    summary: dict[str, Any]
    drift: list[TaskDrift] = field(default_factory=list)
    name: str = "run"

    def window(self) -> tuple[float, float]:
        """The steady window, in seconds from the run's start."""
        w = steady_window(self.run)
        t0 = run_start(self.run)
        return w.start - t0, w.end - t0

    def measured(self) -> list[RequestRecord]:
        """The calls the per-call figures cover: successful, sent in the steady window."""
        w = steady_window(self.run)
        return [r for r in self.run.requests if r.ok and r.t_sent in w]


SectionFn = Callable[[RunReport], Section | None]
