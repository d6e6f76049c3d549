"""The live figures for a dashboard: ``--prometheus HOST:PORT`` serves them at ``/metrics`` while a run goes on.

A sink of the run writer, beside the summary: each finished call adds to counters and histograms named by
Prometheus' conventions (``replay_`` prefix, ``_total`` counters, ``_seconds`` durations, base units), each
labelled with the host, so one dashboard can follow several runs. The figures are the client's own; a report
still comes from the run file.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from replay.metrics.accumulator import token_scale
from replay.metrics.recipes.recipe_tally import decode_tps
from replay.records.run_file import RequestRecord, TaskRecord

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
_SPEED = (1, 5, 10, 20, 40, 60, 100, 200, 400, 1000, 3000)
_HISTOGRAMS = {  # name: (help, bucket bounds, the sum's integer unit per base unit)
    "replay_ttft_seconds": ("Time to first token", _LATENCY, 1_000_000),
    "replay_e2e_seconds": ("End-to-end call latency", _LATENCY, 1_000_000),
    "replay_user_decode_tokens_per_second": ("Per-user decode speed after the first token", _SPEED, 1000),
}


class _Buckets:
    """One histogram's counts per bucket (the last: above every bound) and sum, in integers (µs, milli-tokens/s), so
    a worker's merge into the parent's is a few exact additions (``PrometheusSink.merge_part``)."""

    __slots__ = ("bounds", "counts", "scale", "total")

    def __init__(self, bounds: tuple[float, ...], scale: int) -> None:
        self.bounds, self.scale, self.counts, self.total = bounds, scale, [0] * (len(bounds) + 1), 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1  # Prometheus' buckets: value <= bound
        self.total += round(value * self.scale)

    def add(self, counts: list[int], total: int) -> None:
        self.counts = [a + b for a, b in zip(self.counts, counts, strict=True)]
        self.total += total

    def family(self, name: str, doc: str, host: str) -> HistogramMetricFamily:
        family = HistogramMetricFamily(name, doc, labels=["host"])
        running, cumulative = 0, []
        for bound, count in zip([*(str(float(b)) for b in self.bounds), "+Inf"], self.counts, strict=True):
            running += count
            cumulative.append((bound, running))
        family.add_metric([host], cumulative, sum_value=self.total / self.scale)
        return family


class PrometheusSink:
    """Counters and histograms of one run, served from their own registry (labelled with the host)."""

    def __init__(self, host: str) -> None:
        self.host = host
        self._fresh()
        self.steady = 0.0
        self.registry = CollectorRegistry()
        self.registry.register(_Exposition(self))

    def _fresh(self) -> None:
        self.requests: dict[str, float] = {}  # outcome: ok or the error class
        self.tokens: dict[str, float] = {}  # cached_input, new_input, output
        self.tasks: dict[str, float] = {}  # status
        self.hist = {name: _Buckets(bounds, scale) for name, (_, bounds, scale) in _HISTOGRAMS.items()}

    def phase(self, name: str, t: float) -> None:
        if name == "steady_start":
            self.steady = 1.0
        elif name in ("stop", "end"):
            self.steady = 0.0

    def request(self, rec: RequestRecord) -> None:
        outcome = rec.error or "ok"
        self.requests[outcome] = self.requests.get(outcome, 0.0) + 1
        tokens = self.tokens
        if rec.prompt_tokens is not None:
            cached = rec.cached_tokens or 0
            tokens["cached_input"] = tokens.get("cached_input", 0.0) + cached
            tokens["new_input"] = tokens.get("new_input", 0.0) + rec.prompt_tokens - cached
        out = rec.output_tokens if rec.output_tokens is not None else rec.output_events * token_scale(rec)
        tokens["output"] = tokens.get("output", 0.0) + out
        if rec.error is not None:
            return
        if rec.t_first_token is not None:
            self.hist["replay_ttft_seconds"].observe(rec.t_first_token - rec.t_sent)
        if rec.t_done is not None:
            self.hist["replay_e2e_seconds"].observe(rec.t_done - rec.t_sent)
        if (speed := decode_tps(rec)) is not None:
            self.hist["replay_user_decode_tokens_per_second"].observe(speed)

    def task(self, rec: TaskRecord) -> None:
        self.tasks[rec.status] = self.tasks.get(rec.status, 0.0) + 1

    def sample(self, _: Any) -> None:
        pass

    def take_part(self) -> tuple[Any, ...]:
        """What was counted since the last take (a worker of a sharded run ships it); counting starts afresh."""
        part = (self.requests, self.tokens, self.tasks, {k: (h.counts, h.total) for k, h in self.hist.items()})
        self._fresh()
        return part

    def merge_part(self, part: tuple[Any, ...]) -> None:
        for mine, theirs in zip((self.requests, self.tokens, self.tasks), part[:3], strict=True):
            for key, n in theirs.items():
                mine[key] = mine.get(key, 0.0) + n
        for name, (counts, total) in part[3].items():
            self.hist[name].add(counts, total)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _Exposition(Collector):
    """The sink's figures in Prometheus' text format, by its conventions (``replay_`` prefix, ``_total`` counters,
    ``_seconds`` durations, base units)."""

    def __init__(self, sink: PrometheusSink) -> None:
        self.sink = sink

    def collect(self) -> Iterator[Metric]:
        s, host = self.sink, self.sink.host
        for name, doc, label, values in (
            ("replay_requests", "Calls made (every attempt)", "outcome", s.requests),
            ("replay_tokens", "Tokens the host reported, by kind", "kind", s.tokens),
            ("replay_tasks", "Tasks ended, by status", "status", s.tasks),
        ):
            counter = CounterMetricFamily(name, doc, labels=["host", label])
            for key, value in sorted(values.items()):
                counter.add_metric([host, key], value)
            yield counter
        for name, (doc, _, _) in _HISTOGRAMS.items():
            yield s.hist[name].family(name, doc, host)
        gauge = GaugeMetricFamily("replay_steady_window_open", "1 while the steady window is open", labels=["host"])
        gauge.add_metric([host], s.steady)
        yield gauge


async def serve_metrics(sink: PrometheusSink, address: str) -> None:
    """Serve ``/metrics`` at ``HOST:PORT`` until cancelled (the run's end)."""
    import asyncio

    from aiohttp import web

    host, _, port = address.rpartition(":")

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=sink.exposition(), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or "127.0.0.1", int(port)).start()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
