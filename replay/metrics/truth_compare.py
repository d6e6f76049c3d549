"""The client's records lined up with the simulated host's truth log, by request id.

The sim writes what it did for every request (when it arrived, when each token was handed to the socket,
how many tokens it served from cache; docs/simulated-host.md). Both sides stamp with ``perf_counter()``
(CLOCK_MONOTONIC, one clock per machine), so on one machine the two can be compared time for time: how far
the client's TTFT, token times and inter-token gaps are from the host's, and whether the counts agree.
It also splits the host's TTFT into intake, queue wait and prefill, which only the host can see.

This module reads the truth log as plain JSON; the client side never imports the sim.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson

from replay.errors import ReplayError
from replay.histogram import US, SignedHistogram, percentile, percentiles
from replay.records.run_file import RequestRecord


class TruthLogError(ReplayError, ValueError):
    """A truth log line that is not what the sim writes; the message names the file and line."""


def load_truth(path: str | Path, ids: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """The truth records of a log, by request id (only ``ids`` when given); a torn last line, from a host that was
    killed, is skipped. Read line by line: a soak's log is not held, only the records asked for."""
    out: dict[str, dict[str, Any]] = {}
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                if not line.endswith(b"\n"):  # no newline after it: written as the host died
                    break
                raise TruthLogError(f"{path}:{number}: not JSON ({exc})") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("request_id"), str):
                raise TruthLogError(f"{path}:{number}: field 'request_id' missing: not a truth log line")
            if ids is None or rec["request_id"] in ids:
                out[rec["request_id"]] = rec
    return out


MAX_COMPARED = 10_000  # requests held for the check (a few KB each): beyond it, every k-th call of the run is compared


class _Every:
    """A run-reader sink keeping every ``stride``-th request record and nothing else."""

    def __init__(self, stride: int) -> None:
        self.stride, self.seen = stride, 0
        self.requests: list[RequestRecord] = []

    def request(self, r: RequestRecord) -> None:
        if self.seen % self.stride == 0:
            self.requests.append(r)
        self.seen += 1

    def phase(self, name: str, t: float) -> None:
        pass

    def task(self, t: Any) -> None:
        pass

    def sample(self, s: Any) -> None:
        pass


def compare_file(run_file: str | Path, truth_logs: list[Path], total: int) -> dict[str, Any]:
    """``compare`` of a run file against its truth logs in bounded memory: all its ``total`` requests up to
    ``MAX_COMPARED``, else every k-th one in file order (``every`` says k; ``of_requests`` the total)."""
    from replay.records.reader import read_run

    stride = max(1, -(-total // MAX_COMPARED))
    keep = _Every(stride)
    read_run(run_file, notes=lambda _: None, sink=keep)
    ids = {r.id for r in keep.requests}
    logs: dict[str, dict[str, Any]] = {}
    for path in truth_logs:
        logs.update(load_truth(path, ids))
    return compare(keep.requests, logs) | {"every": stride, "of_requests": keep.seen}


def find_truth_log(run_file: str | Path, header: dict[str, Any]) -> Path | None:
    """The truth log a run file names, where it was written or beside the run file (moved together)."""
    named = header.get("simulated_truth_log")
    if not named:
        return None
    for candidate in (Path(named), Path(run_file).parent / Path(named).name):
        if candidate.exists():
            return candidate
    return None


def _spread(values: list[float] | np.ndarray) -> dict[str, float | int | None]:
    """Percentiles of absolute deviations (seconds), the worst one, and the median signed one (the bias)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return {"p50": None, "p95": None, "p99": None, "max": None, "bias": None, "n": 0}
    a = np.abs(v)
    return {**percentiles(a, (50, 95, 99), US), "max": float(a.max()), "bias": percentile(v, 50, US), "n": int(v.size)}


class _Deviations:
    """Deviations of every token (millions in a long run's compared calls) as ``_spread`` reads them, in bounded
    memory: gathered in batches into histograms (the one percentile method's, so the same figures), not held.
    Held whole, 1.5 million token deviations took 108 MB at the percentiles (measured), more the longer the answers."""

    BATCH = 1 << 16

    def __init__(self) -> None:
        self.magnitude, self.signed = SignedHistogram(), SignedHistogram()
        self.parts: list[np.ndarray] = []
        self.held = self.n = 0
        self.max = 0.0

    def add(self, v: np.ndarray) -> None:
        self.parts.append(v)
        self.held += v.size
        if self.held >= self.BATCH:
            self._flush()

    def _flush(self) -> None:
        if self.parts:
            v = np.concatenate(self.parts)
            a = np.abs(v)
            self.magnitude.record_many(a, US)
            self.signed.record_many(v, US)
            self.max, self.n = max(self.max, float(a.max())) if a.size else self.max, self.n + int(v.size)
            self.parts, self.held = [], 0

    def spread(self) -> dict[str, float | int | None]:
        self._flush()
        if not self.n:
            return _spread([])
        points = {f"p{p}": self.magnitude.percentile(p, US) for p in (50, 95, 99)}
        return {**points, "max": self.max, "bias": self.signed.percentile(50, US), "n": self.n}


def _dist(values: list[float]) -> dict[str, float | int | None]:
    mean = float(np.mean(values)) if len(values) else None  # the parts' means add up to the whole's (_host_split)
    return {**percentiles(values, (50, 95), US), "mean": mean, "n": len(values)}


def _host_split(t: dict[str, Any], split: dict[str, list[float]]) -> None:
    """The host's TTFT (first token written − request arrived) and its three parts, for a call that got its first
    token: queue wait and prefill (the engine's) and intake, the rest: reading and tokenising the prompt before the
    queue, and handing the first token to the socket after the step. The parts add up to the TTFT call by call, and
    their means to its mean (the same calls)."""
    queue, prefill = t.get("queue_wait"), t.get("prefill_time")
    if queue is None or prefill is None or t.get("first_token") is None or t.get("arrival") is None:
        return
    ttft = t["first_token"] - t["arrival"]
    split["ttft"].append(ttft)
    split["intake"].append(ttft - queue - prefill)
    split["queue"].append(queue)
    split["prefill"].append(prefill)


def client_token_times(rec: RequestRecord) -> np.ndarray:
    """One arrival time per streamed event (absolute), from the record's flat [dt, n, ...] reads."""
    ch = rec.chunks
    return rec.t_sent + np.repeat(np.asarray(ch[0::2], dtype=float), np.asarray(ch[1::2], dtype=int))


def host_token_times(truth: dict[str, Any]) -> np.ndarray:
    """One write time per token (absolute), from the truth's flat [t, n, ...] writes."""
    w = truth.get("writes") or []
    return np.repeat(np.asarray(w[0::2], dtype=float), np.asarray(w[1::2], dtype=int))


def compare(requests: list[RequestRecord], truth: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """How the client's figures stand against the host's own, request by request (JSON-ready).

    Deviations are client minus host, in seconds: TTFT (client: first token read − bytes sent; host: first
    token written − request arrived), every token's time (read vs written) and every inter-token gap. Token
    times are compared where the client saw one event per token the host wrote (the sim's wire format).
    """
    ttft: list[float] = []
    tokens, itl = _Deviations(), _Deviations()
    matched = ok = output_equal = cached_equal = cached_known = aligned = 0
    split: dict[str, list[float]] = {"ttft": [], "intake": [], "queue": [], "prefill": []}
    preemptions = 0
    for rec in requests:
        t = truth.get(rec.id)
        if t is None:
            continue
        matched += 1
        preemptions += t.get("preemptions") or 0
        _host_split(t, split)
        if not rec.ok:
            continue
        ok += 1
        output_equal += rec.output_tokens == t.get("output_tokens")
        if rec.cached_tokens is not None:
            cached_known += 1
            cached_equal += rec.cached_tokens == t.get("cached_tokens")
        if rec.t_first_token is not None and t.get("first_token") is not None:
            ttft.append((rec.t_first_token - rec.t_sent) - (t["first_token"] - t["arrival"]))
        client, host = client_token_times(rec), host_token_times(t)
        if client.size and client.size == host.size:
            aligned += 1
            tokens.add(client - host)
            itl.add(np.diff(client) - np.diff(host))
    return {
        "requests": len(requests),
        "matched": matched,
        "aligned": aligned,
        "ttft_dev_s": _spread(ttft),
        "token_dev_s": tokens.spread(),
        "itl_dev_s": itl.spread(),
        "output_tokens_equal": output_equal,
        "cached_tokens_equal": cached_equal,
        "cached_tokens_reported": cached_known,
        "ok_matched": ok,
        "host_ttft_s": _dist(split["ttft"]),
        "host_intake_s": _dist(split["intake"]),
        "host_queue_wait_s": _dist(split["queue"]),
        "host_prefill_s": _dist(split["prefill"]),
        "host_preemptions": preemptions,
    }
