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

from typing import Any

import numpy as np

from replay.results.records import RequestRecord


def _num(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 else None


def server_times(t: Any) -> dict[str, float | None] | None:
    """(queue, prefill, ttft, decode) seconds of one record's ``server_timings``; None for an unknown shape."""
    if not isinstance(t, dict):
        return None
    if "completion_time" in t or "queue_time" in t:  # Groq, Cerebras
        q, p, c = _num(t, "queue_time"), _num(t, "prompt_time"), _num(t, "completion_time")
        ttft = (q or 0.0) + p if p is not None else None
        return {"queue": q, "prefill": p, "ttft": ttft, "decode": c}
    if "predicted_ms" in t or "prompt_ms" in t:  # llama.cpp
        p, d = _num(t, "prompt_ms"), _num(t, "predicted_ms")
        return {"queue": None, "prefill": p / 1000 if p is not None else None,
                "ttft": p / 1000 if p is not None else None, "decode": d / 1000 if d is not None else None}  # fmt: skip
    if "server-time-to-first-token" in t:  # Fireworks
        ttft, total = _num(t, "server-time-to-first-token"), _num(t, "server-processing-time")
        decode = total - ttft if total is not None and ttft is not None and total >= ttft else None
        return {"queue": None, "prefill": None, "ttft": ttft, "decode": decode}
    return None


def _pcts(values: list[float], ps: tuple[int, ...] = (50, 95)) -> dict[str, float | int | None]:
    if not values:
        return {f"p{p}": None for p in ps} | {"n": 0}
    arr = np.asarray(values, dtype=float)
    return {f"p{p}": float(np.percentile(arr, p)) for p in ps} | {"n": int(arr.size)}


def server_figures(measured: list[RequestRecord]) -> dict[str, Any] | None:
    """Server TTFT and decode speed, and the client's minus the server's, over the calls that carried timings;
    None when no call did (the summary then has no ``server`` key)."""
    ttft, decode, queue, prefill, gap_ttft, gap_tps = [], [], [], [], [], []
    for r in measured:
        s = server_times(r.server_timings)
        if s is None:
            continue
        if s["queue"] is not None:
            queue.append(s["queue"])
        if s["prefill"] is not None:
            prefill.append(s["prefill"])
        if s["ttft"] is not None:
            ttft.append(s["ttft"])
            if r.t_first_token is not None:
                gap_ttft.append(r.t_first_token - r.t_sent - s["ttft"])
        n = r.output_tokens
        if s["decode"] and n is not None and n >= 2:
            tps = (n - 1) / s["decode"]
            decode.append(tps)
            if r.t_first_token and r.t_last_token and r.t_last_token > r.t_first_token:
                gap_tps.append((n - 1) / (r.t_last_token - r.t_first_token) - tps)
    if not ttft and not decode:
        return None
    return {
        "ttft_s": _pcts(ttft),
        "queue_s": _pcts(queue),
        "prefill_s": _pcts(prefill),
        "decode_tps": _pcts(decode, (25, 50)),
        "client_minus_server_ttft_s": _pcts(gap_ttft),
        "client_minus_server_decode_tps": _pcts(gap_tps, (50,)),
        "requests": len(ttft) or len(decode),
    }
