"""The client's own pauses in the figures: how many measured calls' timings include one (``client_pause_ms``, stamped
by ``replay.loops.client_monitor``) and how long, the latency figures over the clean calls, and the collections
every replay process counted (its ``client`` samples' ``gc_*`` keys). Definitions in docs/metrics.md ("Client").

A ``PauseTally`` rides in the ``Accumulator`` like the goodput tally: counts and histograms only, so windows,
workers and a resumed run's segments merge exactly.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from replay.histogram import HIGHEST, Histogram, read_percentiles
from replay.records.run_file import RequestRecord

US = 1_000_000
CLEAN = ("ttft", "itl", "e2e")  # the latency figures read over the clean calls too
CLEAN_POINTS = (50, 90, 99)
PAUSED_SHARE_BOUND = 0.01  # past this share of paused calls the verdict warns: the figures are partly the client's
GC_KEYS = ("gc_collections", "gc_full", "gc_pause_s", "gc_pause_max_ms")


def _us(v: float) -> int:
    return min(max(round(v * US), 1), HIGHEST)


def record_itl(hist: Histogram, chunks: list[float]) -> None:
    """Inter-token gaps: a read carrying k events after a gap g counts k gaps of g/k (in one numpy pass)."""
    if len(chunks) < 4:
        return
    arr = np.asarray(chunks, dtype=float)
    times, counts = arr[0::2], arr[1::2]
    gaps = np.rint(np.diff(times) * US / counts[1:]).astype(np.int64)
    hist.record_many(np.clip(gaps, 1, HIGHEST), np.rint(counts[1:]).astype(np.int64))


class PauseTally:
    """Per measured call: paused (its timing overlapped a client pause) or clean, the paused time, and the clean
    calls' TTFT, ITL and E2E."""

    __slots__ = ("clean", "pause_us", "paused")

    def __init__(self) -> None:
        self.paused = 0
        self.pause_us = 0  # whole microseconds (the field's precision): sums that merge exactly, in any order
        self.clean = {name: Histogram() for name in CLEAN}

    def add(self, r: RequestRecord) -> None:
        if r.client_pause_ms is not None:
            self.paused += 1
            self.pause_us += round(r.client_pause_ms * 1000)
            return
        h = self.clean
        if r.t_first_token:
            h["ttft"].record_value(_us(r.t_first_token - r.t_sent))
        if r.t_done:
            h["e2e"].record_value(_us(r.t_done - r.t_sent))
        record_itl(h["itl"], r.chunks)

    def merge(self, other: PauseTally) -> None:
        self.paused += other.paused
        self.pause_us += other.pause_us
        for name in CLEAN:
            self.clean[name].add(other.clean[name])

    def encode(self) -> dict[str, Any]:
        return {"paused": self.paused, "pause_us": self.pause_us,
                "clean": {name: h.encode() for name, h in self.clean.items()}}  # fmt: skip

    @classmethod
    def decode(cls, data: dict[str, Any] | None) -> PauseTally:
        t = cls()
        if data:  # (a window record written before the client's pauses were counted: none)
            t.paused, t.pause_us = int(data["paused"]), int(data["pause_us"])
            t.clean = {name: Histogram.decode(data["clean"].get(name)) for name in CLEAN}
        return t

    def figures(self, measured: int, timed: bool) -> dict[str, Any]:
        """``client.paused_calls``: of the ``measured`` calls, those whose timing includes a client pause (``n``,
        ``share``) and the paused time in them (``pause_s``); ``clean``: TTFT, ITL and E2E over the others. Each
        null unless the client ``timed`` its pauses (not on the virtual clock, nor in a run file from before)."""
        clean = {f"{name}_s": read_percentiles(self.clean[name], CLEAN_POINTS, US) for name in CLEAN}
        if not timed:  # the same keys, every value null
            return {"n": None, "share": None, "pause_s": None, "clean": {k: dict.fromkeys(v) for k, v in clean.items()}}
        return {"n": self.paused, "share": self.paused / measured if measured else None,
                "pause_s": self.pause_us / US, "clean": clean}  # fmt: skip


def gc_figures(samples: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``client.gc``: the collections the ``samples`` counted (every process's, in all), their total and longest
    pause; each null when no sample counted them (the virtual clock, a run file from before they were)."""
    counted = [s for s in samples if all(isinstance(s.get(k), int | float) for k in GC_KEYS)]
    if not counted:
        return dict.fromkeys(("collections", "full", "pause_total_s", "pause_max_ms"))
    return {
        "collections": sum(int(s["gc_collections"]) for s in counted),
        "full": sum(int(s["gc_full"]) for s in counted),
        "pause_total_s": sum(s["gc_pause_s"] for s in counted),
        "pause_max_ms": max(s["gc_pause_max_ms"] for s in counted),
    }


def paused_warning(summary: dict[str, Any]) -> str | None:
    """The verdict's warning when more than PAUSED_SHARE_BOUND of the measured calls include a client pause: their
    latency figures are partly the client's (read them over the clean calls: ``client.paused_calls.clean``)."""
    client = summary.get("client") or {}
    paused = client.get("paused_calls") or {}
    share = paused.get("share")
    if not isinstance(share, int | float) or share <= PAUSED_SHARE_BOUND:
        return None
    gc = client.get("gc") or {}
    longest = f", the longest collection {gc['pause_max_ms']:.0f} ms" if gc.get("pause_max_ms") is not None else ""
    return (
        f"{100 * share:.1f}% of the measured calls ({paused['n']}) include a pause of the client's own (more than "
        f"{100 * PAUSED_SHARE_BOUND:g}%): {paused['pause_s']:.2f} s in all{longest}; their latencies are partly the "
        "client's (client.paused_calls.clean has the figures without them)"
    )
