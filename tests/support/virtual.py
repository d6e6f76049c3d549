"""A run on the virtual clock for the tests: the simulated engine of a profile in this process (``execute_virtual``),
as ``replay sweep --virtual`` runs one level (a warm-up, then a steady window)."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

from replay.loops.load import LoadConfig
from replay.runner.single_run import RunResult, RunSpec
from replay.runner.virtual_run import execute_virtual
from replay.sessions.tool_time import ToolTimePolicy
from replay.sim.core.profiles import SimProfile
from replay.workload.trajectory import Workload

_RUNS = itertools.count()
_DIR = Path(tempfile.mkdtemp(prefix="replay-virtual-"))


def virtual_run(profile: SimProfile, workload: Workload, concurrency: int, duration_s: float, warmup_s: float,
                tool_time: str = "recorded", seed: int = 0, out: Path | None = None,
                **spec: Any) -> RunResult:  # fmt: skip
    """One level on the virtual clock, its run file in ``out`` (a temporary directory by default)."""
    load = LoadConfig(concurrency=concurrency, duration_s=duration_s, warmup_s=warmup_s, seed=seed,
                      tool_time=ToolTimePolicy.parse(tool_time))  # fmt: skip
    path = out or _DIR / f"v{next(_RUNS)}.jsonl"
    return execute_virtual(RunSpec(load=load, out=str(path), progress=False, **spec), workload, profile=profile)
