"""The terminal report's lines on delivered concurrency: the lanes asked beside what they did (the summary's
``concurrency``; docs/metrics.md, "Delivered concurrency")."""

from __future__ import annotations

from typing import Any

from replay.reports.units import pct


def concurrency_lines(c: dict[str, Any] | None) -> list[str]:
    if not c or (c["active_mean"] is None and c["arrivals_asked"] is None):
        return []
    judged = "" if not c["judged"] else " (delivered)" if c["delivered"] else " (NOT delivered: under 95%)"
    lines = [f"Concurrency: {c['asked']} sessions asked, {c['made_calls']} made calls{judged}"]
    if c["active_mean"] is not None:
        lines += [
            f"  lanes, mean of {c['seconds']} whole seconds of the window: active {c['active_mean']:.2f} of "
            f"{c['lanes']} ({pct(c['active_share'])}; lowest second {c['active_min']:.2f})",
            f"    = in a call {c['in_call_mean']:.2f} (lowest second {c['in_call_min']:.2f}) + in a tool pause "
            f"{c['in_tool_mean']:.2f}; waiting on the client {c['client_wait_mean']:.2f}, idle {c['idle_mean']:.2f}",
        ]
    if c["arrivals_asked"] is not None:
        lines.append(f"  open loop: {c['arrivals_started']} of {c['arrivals_asked']} arrivals started by the stop")
    return lines
