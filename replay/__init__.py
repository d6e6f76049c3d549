"""replay: load-test LLM inference hosts with recorded coding-agent trajectories.

The library face (``replay.run``, ``replay.load``, ``replay.summarize``, ``replay.RunSpec``, ...) lives in
``replay.api`` and is loaded on first use, so ``import replay`` stays cheap for the command line. The data flow,
one package per step: workload (trajectories) → sessions (simulated agents) → clients (API flavours) → results
(records, metrics, reports); jobs run them end to end; ``replay.sim`` is the simulated host, never imported by the
client side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_API = {
    "run": "replay.api",
    "load": "replay.api",
    "read": "replay.api",
    "summarize": "replay.api",
    "Summary": "replay.api",
    "RunSpec": "replay.runner.run_spec",
    "RunResult": "replay.runner.single_run",
    "RunError": "replay.runner.single_run",
    "ReplayError": "replay.errors",
    "LoadConfig": "replay.loops.load",
    "ToolTimePolicy": "replay.sessions.tool_time",
    "HistoryPolicy": "replay.workload.history",
    "Workload": "replay.workload.trajectory",
    "TrajectoryError": "replay.workload.trajectory",
}
__all__ = [  # noqa: RUF022 (the face's names, grouped by what they are)
    "__version__",
    "run",
    "load",
    "read",
    "summarize",
    "Summary",
    "RunSpec",
    "RunResult",
    "RunError",
    "ReplayError",
    "LoadConfig",
    "ToolTimePolicy",
    "HistoryPolicy",
    "Workload",
    "TrajectoryError",
]

if TYPE_CHECKING:  # pragma: no cover
    from replay.api import Summary, load, read, run, summarize
    from replay.errors import ReplayError
    from replay.loops.load import LoadConfig
    from replay.runner.run_spec import RunSpec
    from replay.runner.single_run import RunError, RunResult
    from replay.sessions.tool_time import ToolTimePolicy
    from replay.workload.history import HistoryPolicy
    from replay.workload.trajectory import TrajectoryError, Workload


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'replay' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
