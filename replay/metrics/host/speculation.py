"""Speculative decoding's acceptance, as the host reports it: per call (accepted and drafted tokens, drafts) where
it says so on the call, else from its own counters scraped per window (``--scrape-metrics``).

A draft of k tokens is verified in one step of the model, which keeps the drafted tokens up to the first it
disagrees with and adds one of its own (the bonus token), so a verify step yields 1 + accepted tokens. The mean
acceptance length is therefore 1 + accepted / drafts (vLLM's definition: docs.vllm.ai "Metrics"), over the calls or
the window that reported both. Every count is read through ``records.host_numbers`` (a run file written by hand is
read the same way as a live call). Docs: docs/metrics.md ("speculation"), docs/providers.md (who reports what).
"""

from __future__ import annotations

from typing import Any

from replay.records.host_numbers import MAX_ANY, MAX_COUNT, integer, number

NAMES = ("accepted", "drafted", "drafts")
# a tally: calls that reported any, then per name its sum and the calls that reported it, then accepted and drafts
# summed over the calls that reported both (what the mean acceptance length is made of)
EMPTY = (0, 0, 0, 0, 0, 0, 0, 0, 0)


def counts(value: Any) -> dict[str, int] | None:
    """A call's counts (``RequestRecord.speculation``), each a whole number in 0..MAX_COUNT; None if none is."""
    if not isinstance(value, dict):
        return None
    got = {name: n for name in NAMES if (n := integer(value.get(name), 0, MAX_COUNT)) is not None}
    return got or None


def add(tally: list[int], value: Any) -> None:
    """Add one call's counts to ``tally`` (a list laid out as ``EMPTY``)."""
    got = counts(value)
    if got is None:
        return
    tally[0] += 1
    for i, name in enumerate(NAMES):
        if name in got:
            tally[1 + 2 * i] += got[name]
            tally[2 + 2 * i] += 1
    if "accepted" in got and "drafts" in got:
        tally[7] += got["accepted"]
        tally[8] += got["drafts"]


def figures(tally: list[int]) -> dict[str, Any] | None:
    """The ``speculation`` figures of the calls a tally holds; None when no call reported any."""
    calls, accepted, n_accepted, drafted, n_drafted, drafts, n_drafts, paired_accepted, paired_drafts = tally
    if not calls:
        return None
    return {
        "acceptance_length_mean": 1 + paired_accepted / paired_drafts if paired_drafts else None,
        "accepted_tokens": accepted if n_accepted else None,
        "drafted_tokens": drafted if n_drafted else None,
        "drafts": drafts if n_drafts else None,
        "calls": calls,
        "source": "calls",
    }


def _host(m: dict[str, Any], key: str) -> float | None:
    return number(m.get(key), 0.0, MAX_ANY)


def from_host_metrics(m: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``speculation`` figures of one window from the host's scraped metrics (``runner.host_metrics``): vLLM's
    counters' increases (accepted, draft tokens, drafts), or SGLang's acceptance-length gauge; None without them."""
    m = m or {}
    accepted, drafted, drafts = (_host(m, k) for k in ("spec_accepted_tokens", "spec_draft_tokens", "spec_drafts"))
    gauge = _host(m, "spec_acceptance_length")
    if accepted is None and drafts is None and gauge is None:
        return None
    length = 1 + accepted / drafts if accepted is not None and drafts else gauge
    return {
        "acceptance_length_mean": length,
        "accepted_tokens": round(accepted) if accepted is not None else None,
        "drafted_tokens": round(drafted) if drafted is not None else None,
        "drafts": round(drafts) if drafts is not None else None,
        "calls": None,
        "source": "host metrics",
    }


def over_windows(windows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run's ``speculation`` from its windows' scraped metrics (when no call reported any): the counters'
    increases summed over the windows; SGLang's gauge (its own windowed value) averaged over them."""
    parts = [f for w in windows if (f := from_host_metrics(w.get("host_metrics"))) is not None]
    if not parts:
        return None

    def total(key: str) -> int | None:
        got = [p[key] for p in parts if p[key] is not None]
        return sum(got) if got else None

    accepted, drafts = total("accepted_tokens"), total("drafts")
    if accepted is not None and drafts:
        length: float | None = 1 + accepted / drafts
    else:
        gauges = [p["acceptance_length_mean"] for p in parts if p["acceptance_length_mean"] is not None]
        length = sum(gauges) / len(gauges) if gauges else None
    return {
        "acceptance_length_mean": length,
        "accepted_tokens": accepted,
        "drafted_tokens": total("drafted_tokens"),
        "drafts": drafts,
        "calls": None,
        "source": "host metrics",
        "windows": len(parts),
    }
