"""One run per load level, for the studies (sweep, capacity search, claims): a runner turns a concurrency into a
summary, in real time against a host or on the virtual clock.

``RealRunner`` is ``replay run`` at one concurrency: the base ``RunSpec`` with that many sessions, a warm-up and
then a steady window of stated length (``duration = warm-up + window``), its own run file per level, sessions
(and the embedded simulated host) started afresh per level. ``VirtualRunner`` is the same run on the virtual clock
(``replay.runner.virtual_run``): the same sessions, run file and summary, with the simulated engine in this process
and time that jumps from event to event, so a level takes seconds of CPU; its levels share the workload's prompt ids.
Both can repeat a level (``attempt``): the real one measures again, the virtual one gives the same figures (it has no
noise to show).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.workload.trajectory import Workload

REAL_MODE, VIRTUAL_MODE = "real time", "virtual clock"  # how a study's levels were run (its index's ``mode``)


@dataclass(slots=True)
class Level:
    """One measured level: its concurrency, its summary and its run file (None in an index written before virtual
    levels had run files: its summary is kept in the index)."""

    concurrency: int
    summary: dict[str, Any]
    run: str | None = None
    attempt: int = 1


Runner = Callable[[int, int], Level]  # (concurrency, attempt) -> Level


@dataclass(slots=True)
class RealRunner:
    """``replay run`` at each asked concurrency, one run file per level in ``out_dir``."""

    spec: Any  # replay.runner.single_run.RunSpec: the options every level shares
    out_dir: Path
    window_s: float
    warmup_s: float
    name: str = "c"
    workload: Workload | None = None

    def __call__(self, concurrency: int, attempt: int = 1) -> Level:
        if self.workload is None:  # loaded once, shared by every level
            from replay.runner.single_run import load_run_workload

            self.workload = load_run_workload(self.spec)
        suffix = "" if attempt == 1 else f"-r{attempt}"
        out = self.out_dir / f"{self.name}{concurrency}{suffix}.jsonl"
        barrier = self.barrier  # the recipe's warm-up opens the window; the duration counts from it
        load = dataclasses.replace(
            self.spec.load,
            concurrency=concurrency,
            duration_s=self.window_s if barrier else self.warmup_s + self.window_s,
            warmup_s=None if barrier else self.warmup_s,
            tasks=None,
        )
        spec = dataclasses.replace(
            self.spec, load=load, out=str(out), sim=dataclasses.replace(self.spec.sim, truth_log=None)
        )
        return Level(concurrency, self.execute(spec, self.workload).summary.to_dict(), str(out), attempt)

    @property
    def barrier(self) -> bool:
        """Whether the levels' lanes warm up to a barrier that opens the steady window (the AgentX recipe: 10 calls
        per lane at max_tokens 1): then a level's duration is its window, counted from the barrier, and
        ``warmup_s`` is not used."""
        lanes = self.spec.load.lanes
        return lanes is not None and lanes.has_warmup

    def execute(self, spec: Any, workload: Workload) -> Any:
        from replay.runner.single_run import execute

        return execute(spec, workload)


@dataclass(slots=True)
class VirtualRunner(RealRunner):
    """The same levels on the virtual clock (the simulated engine in this process), sharing the prompt ids."""

    prompts: Any = None  # replay.sim.core.prompt.WireIds, made at the first level

    def execute(self, spec: Any, workload: Workload) -> Any:
        from replay.runner.virtual_run import execute_virtual
        from replay.sim.core.prompt import WireIds

        if self.prompts is None:
            self.prompts = WireIds()
        return execute_virtual(spec, workload, self.prompts)
