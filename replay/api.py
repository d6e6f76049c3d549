"""The library face of replay: what ``import replay`` offers, for scripts, notebooks and CI jobs.

    import replay
    spec = replay.RunSpec(load=replay.LoadConfig(concurrency=8, tasks=8), sim_profile="fast", out="run.jsonl")
    result = replay.run(spec)
    print(result.summary["throughput"]["total_tokens_per_min"], result.path)
    again = replay.summarize(result.path)   # the same figures, rebuilt from the run file

Everything here is a thin, typed door onto the modules the command line uses, so a run from Python and a run
from ``replay run`` are the same run. See docs/api.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from replay.metrics.summary_types import Summary
from replay.records.reader import read_run
from replay.records.run_file import RunData
from replay.runner.rebuild import rebuild_run
from replay.runner.single_run import RunResult, RunSpec, execute
from replay.workload.history import HistoryPolicy
from replay.workload.trajectory import Workload, default_workload_path, load_workload


def run(spec: RunSpec | None = None, workload: Workload | None = None, progress: bool = False) -> RunResult:
    """Run ``spec`` (default: the shipped workload against the embedded simulated host) to its end.

    The run file is complete when this returns; ``result.summary`` is its summary. ``progress`` prints the live
    lines on stderr as ``replay run`` does. Raises RunError (a bad host or option) or TrajectoryError (a bad
    workload file) with a message naming what is wrong.
    """
    spec = spec or RunSpec()
    spec.progress = progress
    return execute(spec, workload)


def load(
    paths: Iterable[str | Path] = (),
    tokenizer: str | None = None,
    history: HistoryPolicy | None = None,
    unrecorded_context: str = "omit",
) -> Workload:
    """Load and validate trajectory files or directories (default: the shipped workload), counted once.
    ``unrecorded_context="pad"`` puts back the context the recordings left out, as ``replay run`` does by default."""
    return load_workload(list(paths) or [default_workload_path()], tokenizer, history, unrecorded_context)


def read(run_file: str | Path) -> RunData:
    """Every record of a run file, parsed."""
    return read_run(run_file)


def summarize(run_file: str | Path, truth: str | Path | None = None) -> Summary:
    """Every figure of a run, rebuilt from its run file (and the simulated host's truth log, when there is one)."""
    return rebuild_run(run_file, truth).summary
