"""The terminal report's lines on delivered concurrency: the lanes asked beside what they did (the summary's
``concurrency``; docs/metrics.md, "Delivered concurrency")."""

from __future__ import annotations

from typing import Any

from replay.reports.units import pct


def _n(value: float | None, spec: str = ",") -> str:
    """A figure of the block, or "-" where the run had none (no sessions asked: a library caller's summary)."""
    return "-" if value is None else format(value, spec)


def concurrency_lines(c: dict[str, Any] | None) -> list[str]:
    if not c or (c["active_mean"] is None and c["arrivals_asked"] is None):
        return []
    judged = "" if not c["judged"] else " (delivered)" if c["delivered"] else " (NOT delivered: under 95%)"
    lines = [f"Concurrency: {_n(c['asked'])} sessions asked, {_n(c['made_calls'])} made calls{judged}"]
    if c["active_mean"] is not None:
        closed = c["arrivals_asked"] is None
        between = "active: taking the next one" if closed else "idle: waiting for an arrival"
        lines += [
            f"  lanes over {c['seconds']} whole seconds of the window, mean (lowest second):",
            f"    active {_n(c['active_mean'], ',.1f')} ({_n(c['active_min'], ',.1f')}) of {_n(c['lanes'])} = "
            f"{pct(c['active_share'])}, idle {_n(c['idle_mean'], ',.1f')}",
            f"    in a call {_n(c['in_call_mean'], ',.1f')} ({_n(c['in_call_min'], ',.1f')}), of it waiting on the "
            f"client {_n(c['client_wait_mean'], ',.1f')}; in a tool pause {_n(c['in_tool_mean'], ',.1f')}",
            f"    between two tasks {_n(c['between_tasks_mean'], ',.1f')} ({between})",
        ]
    if c["arrivals_asked"] is not None:
        lines.append(
            f"  open loop: {_n(c['arrivals_started'])} of {_n(c['arrivals_asked'])} arrivals started by the stop"
        )
    return lines
