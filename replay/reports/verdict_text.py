"""The terminal report's verdict block: tonight against the baseline (``--baseline``) and among the nights of its
history (``--history``), each threshold, the verdict's warnings and the verdict itself, the last line."""

from __future__ import annotations

from textwrap import wrap
from typing import Any


def _history_lines(gate: dict[str, Any] | None) -> list[str]:
    """``--history-file``: tonight among the nights before it, and each change point it starts."""
    if not gate:
        return []
    worse = ", ".join(gate["regressed"]) or "none"
    said = f"NOT JUDGED: {gate['unjudged']}" if gate.get("unjudged") else f"started a worse regime: {worse}"
    lines = [f"In the history {gate['file']} ({gate['judged_before']} judged nights of this series before): {said}"]
    if gate.get("note"):
        lines.append(f"  {gate['note']}")
    for name, row in gate["figures"].items():
        if c := row.get("change_point"):
            lines.append(f"  {name:<26} {c['before']:>11.6g} -> {c['after']:<11.6g} {c['direction']} regime, "
                         f"confidence {c['confidence']:.4f}")  # fmt: skip
    return lines


def verdict_lines(s: dict[str, Any]) -> list[str]:
    """The verdict block: the baseline's and the history's judgements, the thresholds, the warnings, the verdict."""
    verdict = s.get("verdict")
    if not verdict:
        return []
    lines = [""]
    base = s.get("baseline")
    if base:
        worse = ", ".join(base["regressed"]) or "none"
        counts = next((r["noise_windows"] for r in base["figures"] if r.get("noise_windows")), None)
        noise = f"noise of {counts['current']} + {counts['baseline']} full steady windows" if counts else "noise"
        said = f"NOT JUDGED: {base['unjudged']}" if base.get("unjudged") else f"regressed: {worse}"
        lines.append(f"Against the baseline {base['file']} (tolerance {100 * base['tolerance']:.0f}% + {noise}):"
                     f" {said}")  # fmt: skip
        for row in base["figures"]:
            if row.get("change") is not None:
                mark = ("worse" if base.get("unjudged") else "REGRESSED") if row["regressed"] else "ok"
                allowed = f"(allowed {100 * row['allowed']:.0f}%)"
                lines.append(f"  {row['figure']:<26} {row['baseline']:>11.6g} -> {row['current']:<11.6g}"
                             f" {100 * row['change']:+7.1f}%  {mark:<9} {allowed}")  # fmt: skip
    lines += _history_lines(s.get("history"))
    for t in s.get("thresholds") or ():
        value = "-" if t.get("value") is None else f"{t['value']:.6g}"
        lines.append(f"  threshold {t['expr']:<32} {'ok' if t['ok'] else 'BREACHED':<9} (value {value})")
    lines += [
        line for w in verdict.get("warnings") or () for line in wrap(f"WARNING: {w}", 100, subsequent_indent="  ")
    ]
    if verdict["passed"]:
        lines.append("Verdict: passed (exit code 0)")
    else:
        lines.append(f"Verdict: {'; '.join(verdict['reasons'])} (exit code {verdict['exit_code']})")
    return lines
