"""What a probe's phases share: each phase's log and budgeted runner, and what the phases have measured so far
(its own module, so the ladder and the probe both use it without importing each other)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replay.records.run_file import RequestRecord
from replay.twin.fit import DEFAULT_CHUNK, Coefficients, DecodePoint, PrefillPoint, fit
from replay.twin.plan import Passes, Shape
from replay.twin.runners import Runner
from replay.workload.trajectory import Workload


@dataclass(slots=True)
class PhaseLog:
    name: str
    budget_s: float
    used_s: float = 0.0
    calls: int = 0
    errors: int = 0
    stopped: str = "done"  # done | budget | cap | saturated | kv | max-concurrency

    def public(self) -> dict[str, Any]:
        return {"name": self.name, "budget_s": round(self.budget_s, 2), "used_s": round(self.used_s, 2),
                "calls": self.calls, "errors": self.errors, "stopped": self.stopped}  # fmt: skip


class Phase:
    """Runs a phase's passes within its budget and counts them."""

    def __init__(self, runner: Runner, log: PhaseLog) -> None:
        self.runner, self.log, self.t0 = runner, log, runner.elapsed

    def left(self) -> float:
        return self.log.budget_s - (self.runner.elapsed - self.t0)

    def run(self, workload: Workload, concurrency: int) -> list[RequestRecord]:
        records = self.runner.run(workload, concurrency, max(self.left(), 0.5))
        self.log.calls += len(records)
        self.log.errors += sum(1 for r in records if not r.ok)
        self.log.used_s = self.runner.elapsed - self.t0
        return records


@dataclass(slots=True)
class Measured:
    """What the phases have found so far, shared by the later ones."""

    shape: Shape
    passes: Passes
    ratio: float = 1.0
    prefill: list[PrefillPoint] = field(default_factory=list)
    decode: list[DecodePoint] = field(default_factory=list)
    limit: int | None = None  # client tokens (prompt + answer) a call may hold
    accepted: int | None = None
    refused: int | None = None

    @property
    def chunk(self) -> int:
        return round(DEFAULT_CHUNK * self.ratio)

    def coefficients(self) -> Coefficients:
        return fit(self.prefill, self.decode, self.chunk).coefficients
