"""The page's section on what served the calls: served models, routes and tiers, the fallback, the speed modes and
speed by load (the text report's "What the host says" lines on them, as tables). Figures come from the summary."""

from __future__ import annotations

from typing import Any

from replay.reports.html_page import Section, note, num, paragraph, pct, table, text
from replay.reports.report_input import RunReport

_PARTS = (("models", "model"), ("routes", "route"), ("tiers", "service tier"))


def _share_rows(served: dict[str, dict[str, float]]) -> list[list[str]]:
    return [[what, name, pct(share)] for key, what in _PARTS for name, share in (served.get(key) or {}).items()]


def _mode_rows(modes: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for m in modes:
        who = ", ".join(f"{k} {v['value']} ({pct(v['share'])})" for k, v in (m.get("served") or {}).items())
        rows.append([pct(m["share"]), num(m["user_decode_tps_p50"], 1), f"{m['requests']:,}", who or "-"])
    return rows


def served(rep: RunReport) -> Section | None:
    """Served identity, fallback and speed by load; None when the host named nothing and no speed was seen."""
    s = rep.summary
    shares = s.get("served") or {}
    load = s.get("speed_by_load") or {}
    modes = s.get("speed_modes") or []
    if not any(shares.values()) and not load.get("rows"):
        return None
    body = ""
    if rows := _share_rows(shares):
        body += table(["served", "name", "share of successful calls"], rows, numeric_from=2)
    if fb := s.get("fallback"):
        who = ", ".join(f"{k} {v}" for k, v in fb["served"].items()) or "not named"
        body += paragraph(text(
            f"Fallback: {pct(fb['share'])} of successful calls ({fb['requests']:,}), served by {who}; found by"
            f" {', '.join(fb['by'])}."
        ))  # fmt: skip
    else:
        body += paragraph(text("No fallback found: no host field said so, and no speed mode coincides with a"
                               " different served model, route or tier."))  # fmt: skip
    if len(modes) == 2:
        body += table(["share", "decode p50 tok/s", "calls", "served by"], _mode_rows(modes))
    if load.get("split"):
        body += note(_speed_cause(load.get("by") or []))
    if load.get("rows"):
        rows = [[r["inflight"], num(r["user_decode_tps_p50"], 1), f"{r['requests']:,}"] for r in load["rows"]]
        body += table(["calls in flight when sent", "decode p50 tok/s", "calls"], rows)
    return Section("served", "What served the calls", body)


def _speed_cause(by: list[str]) -> str:
    """Two speed clusters no served identity explains, and the cause their rows show (``speed_by_load.by``)."""
    head = "Per-user decode speed falls in two clusters that no served model, route or tier explains"
    if not by:
        return (
            head + "; nor do load or prompt length (its medians by calls in flight and by prompt tokens differ less)."
        )
    shown = {
        "load": "load (the batch each call shares; the table below)",
        "prompt_length": "prompt length (a longer context slows each step; the breakdown by prompt tokens)",
    }
    return f"{head}: it varies with {' and '.join(shown[b] for b in by)}."
