"""The client's own pauses as the reports show them under Client (text and HTML): its collections, and the measured
calls whose timing includes a client pause with the latencies of the clean calls beside them
(``replay.metrics.client_pauses``)."""

from __future__ import annotations

from typing import Any

from replay.reports.units import pct, seconds


def gc_line(gc: dict[str, Any] | None) -> str | None:
    """The collections of every replay process, in all (None: a run file from before they were counted)."""
    if not gc or gc.get("collections") is None:
        return None
    return (f"{gc['collections']:,} ({gc['full']:,} full), {seconds(gc['pause_total_s'])} in all, the longest "
            f"{gc['pause_max_ms']:.1f} ms")  # fmt: skip


def paused_line(paused: dict[str, Any] | None) -> str | None:
    """How many measured calls' timings include a client pause, and how long (None: not counted)."""
    if not paused or paused.get("share") is None:
        return None
    if not paused["n"]:
        return "none (no call's timing includes a client pause over 5 ms)"
    return f"{paused['n']:,} ({pct(paused['share'])}), {seconds(paused['pause_s'])} of pause in them"


def clean_parts(paused: dict[str, Any] | None) -> tuple[str, str] | None:
    """The latencies over the clean calls, when some calls were paused (otherwise they are the run's own): TTFT and
    ITL, then E2E."""
    if not paused or not paused.get("n"):
        return None
    c = paused["clean"]
    ttft, e2e, itl = c["ttft_s"], c["e2e_s"], c["itl_s"]
    return (f"TTFT p50 {seconds(ttft['p50'])}, p99 {seconds(ttft['p99'])} · ITL p50 {seconds(itl['p50'])}, p99 "
            f"{seconds(itl['p99'])}", f"E2E p50 {seconds(e2e['p50'])}, p99 {seconds(e2e['p99'])}")  # fmt: skip


def text_lines(cl: dict[str, Any]) -> list[str]:
    """The text report's lines under Client (each under 100 characters)."""
    gc, paused = gc_line(cl.get("gc")), paused_line(cl.get("paused_calls"))
    lines = [f"  collections: {gc}"] if gc else []
    lines += [f"  calls paused by the client: {paused}"] if paused else []
    if clean := clean_parts(cl.get("paused_calls")):
        lines += [f"    without them ({cl['paused_calls']['clean']['ttft_s']['n']:,} calls): {clean[0]}",
                  f"      {clean[1]}"]  # fmt: skip
    return lines


def html_rows(cl: dict[str, Any]) -> list[list[str]]:
    """The HTML report's rows of its Client table."""
    clean = clean_parts(cl.get("paused_calls"))
    rows = [("collections (all processes)", gc_line(cl.get("gc"))),
            ("calls whose timing includes a client pause", paused_line(cl.get("paused_calls"))),
            ("the clean calls' latencies", " · ".join(clean) if clean else None)]  # fmt: skip
    rows += [(f"worker {w['worker']}: collections", gc_line(w.get("gc"))) for w in cl.get("workers") or []]
    return [[name, value] for name, value in rows if value is not None]
