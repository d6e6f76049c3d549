"""The verdict of a run: its thresholds judged, and the exit code a nightly job is judged by.

| exit code | meaning |
|---|---|
| 0 | the run completed and every threshold held (without thresholds: at most 10 % of calls failed) |
| 1 | a usage or input error: a bad option, file, workload or output path (nothing was run) |
| 2 | a threshold was breached (without thresholds: more than 10 % of calls failed) |
| 3 | the run started and could not complete: it sent no call, the host was never reached (or never answered in |
|   | HTTP a stream can be read from: class ``protocol``), ``--on-error abort`` stopped it, a session failed with |
|   | an error, a worker died, the run file could not be written or was damaged under the run, stdout was closed, |
|   | or it was killed (no footer); or its ``--baseline`` comparison could not be judged (a client held up or |
|   | saturated: ``replay.verdict.baseline``) |
| 128 + N | stopped by signal N (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP), after the graceful stop |
"""

from __future__ import annotations

import signal
from typing import Any

from replay.verdict.thresholds import ThresholdError, parse_all

EXIT_OK, EXIT_USAGE, EXIT_THRESHOLD, EXIT_INCOMPLETE = 0, 1, 2, 3
DEFAULT_MAX_ERROR_RATE = 0.10


def judge(summary: dict[str, Any], header: dict[str, Any], footer: dict[str, Any] | None) -> dict[str, Any]:
    """Add ``thresholds`` and ``verdict`` to ``summary`` (from the thresholds the run header names) and return it."""
    exprs = list(header.get("thresholds") or [])
    try:
        results = [t.judge(summary) for t in parse_all(exprs)]
    except ThresholdError as exc:  # a run file written by hand, or by an older replay
        results = [{"expr": " ,".join(exprs), "ok": False, "value": None, "error": str(exc)}]
    summary["thresholds"] = results
    reasons: list[str] = []
    code = EXIT_OK
    if results:
        breached = [r["expr"] for r in results if not r["ok"]]
        if breached:
            code = EXIT_THRESHOLD
            reasons.append("threshold breached: " + ", ".join(breached))
    elif (summary.get("error_rate") or 0) > DEFAULT_MAX_ERROR_RATE:
        code = EXIT_THRESHOLD
        reasons.append(f"{100 * summary['error_rate']:.1f}% of calls failed (more than 10%, the default limit)")
    incomplete = _incomplete(summary, footer)
    if incomplete:
        code = EXIT_INCOMPLETE
        reasons.append(incomplete)
    if footer and footer.get("signal"):
        code = 128 + int(getattr(signal, footer["signal"], 0))
        reasons.append(f"stopped by {footer['signal']}")
    summary["verdict"] = {"passed": code == EXIT_OK, "exit_code": code, "reasons": reasons}
    return summary


def _incomplete(summary: dict[str, Any], footer: dict[str, Any] | None) -> str | None:
    if footer is None:
        return "the run file has no footer: the client was killed (or is still running)"
    reason = str(footer.get("stop_reason", ""))
    if footer.get("run_file_error"):
        return f"the run could not complete: {footer['run_file_error']}"
    if reason.startswith(("aborted", "crashed")):
        return f"the run could not complete: {reason}"
    tasks = summary.get("tasks") or {}
    if tasks.get("session_errors"):
        n, first = tasks["session_errors"], tasks["session_error"]
        return f"the run could not complete: {n} session{'s' * (n != 1)} failed with an error ({first})"
    lost = [n for n in footer.get("nodes") or [] if n.get("lost_workers")]
    if lost:  # a fleet run that lost workers went on with the others: what it measured is not the load asked for
        said = [f"node {n['node']}" + ("" if n.get("lost") else f" ({n['lost_workers']} of its {n['workers']} workers)")
                + f", {n['lost_in_flight']} calls in flight lost" for n in lost]  # fmt: skip
        return f"the run lost {'; '.join(said)} mid-run"
    if not summary.get("requests"):  # nothing was measured, whatever stopped it (issue 30: a run that sent nothing)
        return f"the run sent no call (stop: {reason or 'unknown'}): nothing was measured"
    classes = summary.get("errors_by_class") or {}
    if summary.get("requests") and classes.get("connect", 0) + classes.get("tls", 0) == summary["requests"]:
        if classes.get("tls"):
            return "the host was never reached: its TLS handshake failed (a certificate not trusted: --ca-bundle FILE)"
        return "the host was never reached: every call failed to connect"
    unread = classes.get("protocol", 0)
    if unread and unread + classes.get("connect", 0) + classes.get("tls", 0) == summary["requests"]:
        return ("the host was reached but never answered in HTTP a stream can be read from: every call failed as"
                " protocol (or connect)")  # fmt: skip
    return None
