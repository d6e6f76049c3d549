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
|   | saturated: ``replay.verdict.baseline``); or the client delivered less concurrency than the load asked |
|   | (``concurrency.shortfall``: ``replay.metrics.concurrency``) |
| 128 + N | stopped by signal N (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP), after the graceful stop |
"""

from __future__ import annotations

import signal
from typing import Any

from replay.metrics.client_pauses import paused_warning
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
    shortfall = (summary.get("concurrency") or {}).get("shortfall")
    if shortfall:  # what was measured is not the load asked for: it does not pass, whatever it measured
        code = EXIT_INCOMPLETE
        reasons.append(shortfall)
    if footer and footer.get("signal"):
        code = 128 + int(getattr(signal, footer["signal"], 0))
        reasons.append(f"stopped by {footer['signal']}")
    warnings = [*_warnings(summary), *(w for w in (paused_warning(summary),) if w)]
    summary["verdict"] = {"passed": code == EXIT_OK, "exit_code": code, "reasons": reasons, "warnings": warnings}
    return summary


def _warnings(summary: dict[str, Any]) -> list[str]:
    """What the run claims and did not do, which changes no exit code: a --force-output-length the host ignored
    (vLLM's /v1/messages drops ignore_eos and min_tokens) ran a lighter load than the one asked for."""
    answers = summary.get("answers") or {}
    if answers.get("forced") is not False:
        return []
    checked, reasons = answers["length_checked"], answers.get("short_by_reason") or {}
    if not checked:
        return ["--force-output-length could not be checked: no answer's served length is known"]
    why = ", ".join(f"{k} {v}" for k, v in reasons.items() if v)
    return [f"--force-output-length was not honoured: {answers['length_short'] + reasons.get('over', 0)} of {checked}"
            f" answers were not the length asked ({why}); the load is not the one the run claims"]  # fmt: skip


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
    if not summary.get("requests"):  # nothing was measured, whatever stopped it (a run that sent nothing)
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
