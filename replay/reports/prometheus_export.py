"""The live figures for a dashboard: ``--prometheus HOST:PORT`` serves them at ``/metrics`` while a run goes on.

A sink of the run writer, beside the summary: each finished call adds to counters and histograms named by
Prometheus' conventions (``replay_`` prefix, ``_total`` counters, ``_seconds`` durations, base units), each
labelled with the host, so one dashboard can follow several runs. The figures are the client's own; a report
still comes from the run file.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from replay.metrics.accumulator import decode_tps, token_scale
from replay.records.run_file import RequestRecord, TaskRecord

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
_SPEED = (1, 5, 10, 20, 40, 60, 100, 200, 400, 1000, 3000)


class PrometheusSink:
    """Counters and histograms of one run, in their own registry."""

    def __init__(self, host: str) -> None:
        self.registry = CollectorRegistry()
        self.host = host
        r, lab = self.registry, ["host"]
        self.requests = Counter("replay_requests", "Calls made (every attempt)", ["host", "outcome"], registry=r)
        self.tokens = Counter("replay_tokens", "Tokens the host reported, by kind", ["host", "kind"], registry=r)
        self.tasks = Counter("replay_tasks", "Tasks ended, by status", ["host", "status"], registry=r)
        self.ttft = Histogram("replay_ttft_seconds", "Time to first token", lab, buckets=_LATENCY, registry=r)
        self.e2e = Histogram("replay_e2e_seconds", "End-to-end call latency", lab, buckets=_LATENCY, registry=r)
        self.decode = Histogram("replay_user_decode_tokens_per_second", "Per-user decode speed after the first token",
                                lab, buckets=_SPEED, registry=r)  # fmt: skip
        self.steady = Gauge("replay_steady_window_open", "1 while the steady window is open", lab, registry=r)

    def phase(self, name: str, t: float) -> None:
        if name == "steady_start":
            self.steady.labels(self.host).set(1)
        elif name in ("stop", "end"):
            self.steady.labels(self.host).set(0)

    def request(self, rec: RequestRecord) -> None:
        h = self.host
        self.requests.labels(h, rec.error or "ok").inc()
        if rec.prompt_tokens is not None:
            cached = rec.cached_tokens or 0
            self.tokens.labels(h, "cached_input").inc(cached)
            self.tokens.labels(h, "new_input").inc(rec.prompt_tokens - cached)
        out = rec.output_tokens if rec.output_tokens is not None else rec.output_events * token_scale(rec)
        self.tokens.labels(h, "output").inc(out)
        if rec.error is not None:
            return
        if rec.t_first_token is not None:
            self.ttft.labels(h).observe(rec.t_first_token - rec.t_sent)
        if rec.t_done is not None:
            self.e2e.labels(h).observe(rec.t_done - rec.t_sent)
        if (speed := decode_tps(rec)) is not None:
            self.decode.labels(h).observe(speed)

    def task(self, rec: TaskRecord) -> None:
        self.tasks.labels(self.host, rec.status).inc()

    def sample(self, _: Any) -> None:
        pass

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


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
