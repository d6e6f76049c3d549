"""One run per load level, for the studies (sweep, capacity search, claims): a runner turns a concurrency into a
summary, in real time against a host or on the simulated engine's virtual clock.

``RealRunner`` is ``replay run`` at one concurrency: the base ``RunSpec`` with that many sessions, a warm-up and
then a steady window of stated length (``duration = warm-up + window``), its own run file per level, sessions
(and the embedded simulated host) started afresh per level. ``VirtualRunner`` drives the same engine model as the
simulated host on a virtual clock (``replay.sim.core.virtual``): no HTTP, no client, seconds of CPU per level, and a
summary with the engine's figures only (throughput, TTFT p50/p95, decode p25/p50, host cache hit). Both are
deterministic enough to repeat a level (``attempt``): the real one measures again, the virtual one gives the same
figures (it has no noise to show).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.workload.trajectory import Workload


@dataclass(slots=True)
class Level:
    """One measured level: its concurrency, its summary and its run file (None on the virtual clock)."""

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
        from replay.runner.single_run import execute

        if self.workload is None:  # loaded once, shared by every level
            from replay.runner.single_run import load_run_workload

            self.workload = load_run_workload(self.spec)
        suffix = "" if attempt == 1 else f"-r{attempt}"
        out = self.out_dir / f"{self.name}{concurrency}{suffix}.jsonl"
        load = dataclasses.replace(
            self.spec.load,
            concurrency=concurrency,
            duration_s=self.warmup_s + self.window_s,
            warmup_s=self.warmup_s,
            tasks=None,
        )
        spec = dataclasses.replace(self.spec, load=load, out=str(out), sim_truth_log=None)
        result = execute(spec, self.workload)
        return Level(concurrency, result.summary, str(out), attempt)


@dataclass(slots=True)
class VirtualRunner:
    """The simulated engine alone on a virtual clock (``replay.sim.core.virtual.simulate``), per level."""

    profile: str
    workload: Workload
    window_s: float
    warmup_s: float
    seed: int = 0
    distinct_tasks: bool = True  # as --salt-tasks: no two tasks share a cached prefix
    tool_scale: float = 1.0
    profile_file: str | None = None  # a profile from a file, over ``profile`` as its base

    def __call__(self, concurrency: int, attempt: int = 1) -> Level:
        from replay.sim.core.profile_file import resolve_profile
        from replay.sim.core.profiles import get_profile
        from replay.sim.core.virtual import simulate

        profile = resolve_profile(self.profile, self.profile_file) if self.profile_file else get_profile(self.profile)
        raw = simulate(
            profile,
            self.workload,
            concurrency,
            self.warmup_s + self.window_s,
            self.warmup_s,
            self.seed,
            tool_scale=self.tool_scale,
            unique_tasks=self.distinct_tasks,
        )
        return Level(concurrency, virtual_summary(raw), None, attempt)


def virtual_summary(raw: dict[str, Any]) -> dict[str, Any]:
    """The virtual engine's figures in the summary's shape (the keys it has), marked ``virtual``."""
    t = dict(raw["throughput"])
    t["total_tokens_per_min"] = t["total_tps"] * 60
    t["output_tokens_per_min"] = t["output_tps"] * 60
    return {**raw, "throughput": t, "errors": 0, "errors_by_class": {}, "virtual": True}


def tool_scale(policy: Any) -> float:
    """The virtual clock's tool-time factor for a ``ToolTimePolicy`` (it knows recorded, scale:X and none)."""
    if policy.kind == "recorded":
        return 1.0
    if policy.kind in ("scale", "none"):
        return policy.value
    raise ValueError(f"--tool-time {policy}: the virtual clock takes recorded, scale:X or none")
