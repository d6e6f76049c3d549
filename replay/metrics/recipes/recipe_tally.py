"""What the recipe figures need, gathered one request at a time (docs/recipes.md): the AgentX block, the validity
checks, latency from the intended start and the open loop's backlog.

Like the ``Accumulator`` it rides in, a ``RecipeTally`` keeps counts, whole-number sums and histograms, so it merges
exactly across windows and travels as JSON; a soak with a recipe summarises in flat memory. Times go in as whole
microseconds (as the histograms take them), so means and spreads are the same whichever order the parts merge in.
Per task it keeps one pair (the first call's intended start and its TTFT from there), as the task list does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from replay.histogram import Histogram, read_percentiles
from replay.metrics.task_tables import TaskFirsts
from replay.records.run_file import RequestRecord

US = 1_000_000
TPS_SCALE = 1000  # tokens/s held as milli-tokens/s, as the summary's speed histograms
SLICE_S = 1.0  # AgentX's coverage slices
MAX_DECODE_TPS = 20_000.0  # tokens/s of one stream: far above any host's per-user decode (Cerebras, Groq: thousands)


class Stat:
    """A histogram of one per-call value with its exact sum and sum of squares, held as whole units of ``1 / scale``
    (µs for times, milli-tokens/s for speeds): mean and spread as well."""

    __slots__ = ("hist", "scale", "sq", "total")

    def __init__(self, scale: int = US) -> None:
        self.hist, self.total, self.sq, self.scale = Histogram(), 0, 0, scale

    def record(self, x: float) -> None:
        v = self.hist.record_clipped(x * self.scale)
        self.total += v
        self.sq += v * v

    def merge(self, other: Stat) -> None:
        self.hist.add(other.hist)
        self.total += other.total
        self.sq += other.sq

    def figures(self, ps: tuple[int, ...]) -> dict[str, float | int | None]:
        """mean, the percentiles, std (population) and n, in seconds."""
        n = self.hist.get_total_count()
        if not n:
            return {"mean": None, **{f"p{p}": None for p in ps}, "std": None, "n": 0}
        k = self.scale
        mean = self.total / n
        std = math.sqrt(max(self.sq / n - mean * mean, 0.0))
        pcts = {key: v for key, v in read_percentiles(self.hist, ps, k).items() if key != "n"}
        return {"mean": mean / k, **pcts, "std": std / k, "n": n}

    def encode(self) -> list[Any]:
        return [self.hist.encode(), self.total, self.sq]

    @classmethod
    def decode(cls, data: list[Any] | None, scale: int = US) -> Stat:
        s = cls(scale)
        if data:  # None: a window record written before this figure existed
            s.hist, s.total, s.sq = Histogram.decode(data[0]), int(data[1]), int(data[2])
        return s


# The fourth to sixth from the intended start, and the TTFT of the tasks' first calls (an open loop's arrivals, which
# wait for a free session) apart from their later calls; ``e2e_norm``: each call's end-to-end latency over its output
# tokens (s per token) and ``e2e_norm_tps`` its inverse (tokens/s, kept for the spread), over the calls
# ``e2e_norm_sample`` admits.
STATS = ("ttft", "e2e", "itl", "i_ttft", "i_e2e", "lag", "i_first", "i_later", "e2e_norm", "e2e_norm_tps")
SCALES = {"e2e_norm_tps": TPS_SCALE}
_COUNTS = ("warmup", "finals", "overflow")
_CALLS = ("n", "subagents", "tokens_in", "tokens_out", "seen_tokens", "seen_est", "host_prompt", "host_cached")


def decode_tps(r: RequestRecord) -> float | None:
    """Per-user decode speed after the first token: (output tokens − 1) / (last token − first token), or None when
    the call has none: fewer than two output tokens, or its tokens not read apart in time. Reads closer together
    than the answer would take at ``MAX_DECODE_TPS`` were one burst (a host's single write split over reads, or a
    backlog drained after the client stalled): their gap times the socket, not the decode, and would give an
    unbounded speed (24 million tokens/s for an answer read at once)."""
    n_out = r.output_tokens if r.output_tokens is not None else r.output_events
    if n_out < 2 or not r.t_first_token or not r.t_last_token:
        return None
    span = r.t_last_token - r.t_first_token
    return (n_out - 1) / span if span * MAX_DECODE_TPS >= n_out - 1 and span > 0 else None


def request_itl(r: RequestRecord) -> float | None:
    """AIPerf's inter-token latency of one call: (end-to-end - TTFT) / (output tokens - 1)."""
    n = r.output_tokens if r.output_tokens is not None else r.output_events
    if n is None or n < 2 or r.t_first_token is None or r.t_done is None:
        return None
    return (r.t_done - r.t_first_token) / (n - 1)


def e2e_norm_sample(r: RequestRecord) -> float | None:
    """One call's end-to-end latency over its output tokens (seconds per token), the per-call value of InferenceX's
    E2E-normalised interactivity: only for a call whose latency, output, TTFT and input are all above 0 (the filter
    of aiperf PR #1270); output and input are the host's counts, else the client's (events, prompt estimate)."""
    n_out = r.output_tokens if r.output_tokens is not None else r.output_events
    n_in = r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_est
    if r.t_done is None or r.t_first_token is None or not n_out or n_out <= 0 or n_in <= 0:
        return None
    e2e, ttft = r.t_done - r.t_sent, r.t_first_token - r.t_sent
    return e2e / n_out if e2e > 0 and ttft > 0 else None


class RecipeTally:
    """Counts over every request, and per measured call the AgentX, coverage and intended-start figures."""

    def __init__(self) -> None:
        self.origin: float | None = None  # the steady window's start: coverage slices count from it
        self.counts = dict.fromkeys(_COUNTS, 0)
        self.calls = dict.fromkeys(_CALLS, 0)
        self.span_end: float | None = None
        self.stats = {name: Stat(SCALES.get(name, US)) for name in STATS}
        self.slices: set[int] = set()
        self.firsts = TaskFirsts()  # task -> (intended start, TTFT from it) of its first call (32 bytes a task)

    def add_warmup(self) -> None:
        self.counts["warmup"] += 1

    def add(self, r: RequestRecord, measured: bool) -> None:
        if r.final:
            self.counts["finals"] += 1
            self.counts["overflow"] += r.error == "context_overflow"
        if measured:
            self._measured(r)

    def _measured(self, r: RequestRecord) -> None:
        c, st = self.calls, self.stats
        c["n"] += 1
        c["subagents"] += r.parent is not None
        c["tokens_in"] += r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_est
        c["tokens_out"] += r.output_tokens if r.output_tokens is not None else r.output_events
        if r.prefix_seen_tokens is not None:
            c["seen_tokens"] += r.prefix_seen_tokens
            c["seen_est"] += r.prompt_tokens_est
        if r.prompt_tokens is not None and r.cached_tokens is not None:
            c["host_prompt"] += r.prompt_tokens
            c["host_cached"] += r.cached_tokens
        if r.t_done is not None:
            self.span_end = r.t_done if self.span_end is None else max(self.span_end, r.t_done)
            st["e2e"].record(r.t_done - r.t_sent)
        if r.t_first_token is not None:
            st["ttft"].record(r.t_first_token - r.t_sent)
        if (itl := request_itl(r)) is not None:
            st["itl"].record(itl)
        if (per_token := e2e_norm_sample(r)) is not None:
            st["e2e_norm"].record(per_token)
            st["e2e_norm_tps"].record(1.0 / per_token)
        if self.origin is not None:
            self._slices(r)
        if r.t_intended is not None:
            self._intended(r, r.t_intended)

    def _slices(self, r: RequestRecord) -> None:
        """The slices this call's first token and reads fell in (numpy's float arithmetic is Python's, term by
        term, so the slices are the same as one ``math.floor`` per read, without 500 Python steps per answer)."""
        origin, ch = self.origin or 0.0, r.chunks
        if r.t_first_token is not None:
            self.slices.add(math.floor((r.t_first_token - origin) / SLICE_S))
        if len(ch) > 32:
            times = np.asarray(ch[0::2], dtype=np.float64)
            k = np.floor((r.t_sent + times - origin) / SLICE_S)  # non-decreasing, as the reads' times are
            self.slices.update(k[np.concatenate(([True], k[1:] != k[:-1]))].astype(np.int64).tolist())
        else:  # a few reads: numpy's set-up would cost more than the loop
            for i in range(0, len(ch), 2):
                self.slices.add(math.floor((r.t_sent + ch[i] - origin) / SLICE_S))

    def _intended(self, r: RequestRecord, t: float) -> None:
        st = self.stats
        ttft = r.t_first_token - t if r.t_first_token is not None else None
        if ttft is not None:
            st["i_ttft"].record(ttft)
            st["i_first" if r.parent is None and r.turn == 0 else "i_later"].record(ttft)
        if r.t_done is not None:
            st["i_e2e"].record(r.t_done - t)
        st["lag"].record(r.t_sent - t)
        if r.parent is None and (r.task not in self.firsts or t < self.firsts[r.task][0]):
            self.firsts[r.task] = (t, ttft)  # the task's first call: the one an open-loop arrival intends

    def merge(self, other: RecipeTally, counts: bool = True, calls: bool = True) -> None:
        if counts:
            for k in _COUNTS:
                self.counts[k] += other.counts[k]
        if not calls:
            return
        for k in _CALLS:
            self.calls[k] += other.calls[k]
        if other.span_end is not None:
            self.span_end = other.span_end if self.span_end is None else max(self.span_end, other.span_end)
        for name in STATS:
            self.stats[name].merge(other.stats[name])
        self.slices |= other.slices
        for task, pair in other.firsts.items():
            if task not in self.firsts or pair[0] < self.firsts[task][0]:
                self.firsts[task] = pair
        self.origin = self.origin if self.origin is not None else other.origin

    def coverage(self, start: float, end: float) -> float | None:
        """Share of the window's 1 s slices that hold a first token or a token of some measured call."""
        n = int((end - start) // SLICE_S)
        if n <= 0 or self.origin is None:
            return None
        shift = round((start - self.origin) / SLICE_S)  # the window opens at the origin (a slice boundary)
        return sum(0 <= k - shift < n for k in self.slices) / n

    def encode(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "counts": self.counts,
            "calls": self.calls,
            "span_end": self.span_end,
            "stats": {name: s.encode() for name, s in self.stats.items()},
            "slices": sorted(self.slices),
            "firsts": [[task, t, ttft] for task, (t, ttft) in self.firsts.items()],
        }

    @classmethod
    def decode(cls, data: dict[str, Any] | None) -> RecipeTally:
        t = cls()
        if not data:  # a window record written before recipe tallies existed
            return t
        t.origin, t.span_end = data["origin"], data["span_end"]
        t.counts.update(data["counts"])
        t.calls.update(data["calls"])
        t.stats = {name: Stat.decode(data["stats"].get(name), SCALES.get(name, US)) for name in STATS}
        t.slices = set(data["slices"])
        for task, ti, ttft in data["firsts"]:
            t.firsts[int(task)] = (float(ti), ttft)
        return t
