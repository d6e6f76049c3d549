"""The host's own timings beside the client's: server TTFT and decode speed, and how far the client's are.

A record's ``server_timings`` is what the host sent, as it sent it; this module reads each provider's shape:

- Groq ``x_groq.usage`` and Cerebras ``time_info``: ``queue_time``, ``prompt_time``, ``completion_time``
  (seconds); server TTFT = queue + prompt, decode time = completion.
- llama.cpp ``timings``: ``prompt_ms`` (TTFT; it sends no queue figure) and ``predicted_ms`` (decode).
- Fireworks ``perf_metrics`` (or its header): ``server-time-to-first-token`` as sent, decode time =
  ``server-processing-time`` − TTFT (only in ``perf_metrics``).

Server decode speed is ``(output tokens − 1) / decode time``, the client's own definition of per-user decode
speed, so the two compare; the client's minus the server's TTFT is the network, queueing in front of the
engine (a gateway, a load balancer) and the client itself.
"""

from __future__ import annotations

from typing import Any, Protocol

from replay.histogram import Histogram, read_percentiles
from replay.records.host_numbers import MAX_MS, MAX_SECONDS, number

US = 1_000_000
TPS_SCALE = 1000


class Signed(Protocol):
    """A tally of signed differences (``replay.histogram.SignedHistogram``)."""

    def count(self) -> int: ...

    def percentile(self, p: float, scale: float) -> float | None: ...


class ServerTally(Protocol):
    """What ``server_figures`` reads of a run's tally (``host_tally.HostTally``, which reads timings with
    ``server_times``)."""

    # Read-only (properties), so a tally whose fields are the concrete types matches.
    @property
    def server(self) -> dict[str, Histogram]: ...  # ttft, queue, prefill, decode

    @property
    def gap_ttft(self) -> Signed: ...  # the client's minus the server's TTFT

    @property
    def gap_tps(self) -> Signed: ...


def _num(d: dict[str, Any], key: str, hi: float = MAX_SECONDS) -> float | None:
    """A time the host sent, through the bounded parser (a run file may hold 1e303 from a hostile host)."""
    return number(d.get(key), 0.0, hi)


def server_times(t: Any) -> dict[str, float | None] | None:
    """(queue, prefill, ttft, decode) seconds of one record's ``server_timings``; None for an unknown shape."""
    if not isinstance(t, dict):
        return None
    if "completion_time" in t or "queue_time" in t:  # Groq, Cerebras
        q, p, c = _num(t, "queue_time"), _num(t, "prompt_time"), _num(t, "completion_time")
        ttft = (q or 0.0) + p if p is not None else None
        return {"queue": q, "prefill": p, "ttft": ttft, "decode": c}
    if "predicted_ms" in t or "prompt_ms" in t:  # llama.cpp
        p, d = _num(t, "prompt_ms", MAX_MS), _num(t, "predicted_ms", MAX_MS)
        return {"queue": None, "prefill": p / 1000 if p is not None else None,
                "ttft": p / 1000 if p is not None else None, "decode": d / 1000 if d is not None else None}  # fmt: skip
    if "server-time-to-first-token" in t:  # Fireworks
        ttft, total = _num(t, "server-time-to-first-token"), _num(t, "server-processing-time")
        decode = total - ttft if total is not None and ttft is not None and total >= ttft else None
        return {"queue": None, "prefill": None, "ttft": ttft, "decode": decode}
    return None


def _pcts(h: Histogram, scale: float, ps: tuple[int, ...] = (50, 95)) -> dict[str, float | int | None]:
    return read_percentiles(h, ps, scale)


def _signed(s: Signed, scale: float, ps: tuple[int, ...] = (50, 95)) -> dict[str, float | int | None]:
    out: dict[str, float | int | None] = {f"p{p}": s.percentile(p, scale) for p in ps}
    out["n"] = s.count()
    return out


def server_figures(t: ServerTally, always: bool = False) -> dict[str, Any] | None:
    """Server TTFT and decode speed, and the client's minus the server's, over the calls that carried timings;
    None when no call did (the summary then has no ``server`` key); ``always``: its keys even then."""
    h = t.server
    ttft, decode = h["ttft"].get_total_count(), h["decode"].get_total_count()
    if not ttft and not decode and not always:
        return None
    return {
        "ttft_s": _pcts(h["ttft"], US),
        "queue_s": _pcts(h["queue"], US),
        "prefill_s": _pcts(h["prefill"], US),
        "decode_tps": _pcts(h["decode"], TPS_SCALE, (25, 50)),
        "client_minus_server_ttft_s": _signed(t.gap_ttft, US),
        "client_minus_server_decode_tps": _signed(t.gap_tps, TPS_SCALE, (50,)),
        "requests": ttft or decode,
    }
