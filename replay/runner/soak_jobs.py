"""The jobs a run runs beside its sessions for a soak: closing windows (with the host's own metrics) and serving
the live figures to Prometheus."""

from __future__ import annotations

import asyncio
from time import perf_counter
from typing import Any

from replay.metrics.windows import WindowRecorder
from replay.records.run_file import RunWriter
from replay.reports.prometheus_export import PrometheusSink, serve_metrics
from replay.runner.host_metrics import HostMetrics, endpoint


def side_jobs(
    spec: Any, windows: WindowRecorder | None, writer: RunWriter, exporter: PrometheusSink | None, base_url: str
) -> list[Any]:
    jobs: list[Any] = []
    if windows is not None:
        scrape = endpoint(spec.scrape_metrics, base_url) if spec.scrape_metrics else None
        jobs.append(lambda: _close_windows(windows, writer, scrape))
    if exporter is not None and spec.prometheus:
        address = spec.prometheus
        jobs.append(lambda: serve_metrics(exporter, address))
    return jobs


async def _close_windows(windows: WindowRecorder, writer: RunWriter, scrape: str | None) -> None:
    """Append each window's record as it closes (written and synced: a killed soak keeps every closed window),
    with the host's own metrics of the window when asked to scrape them."""
    sampler = HostMetrics(scrape) if scrape else None
    if sampler is not None:
        await sampler.sample()  # the baseline the first window's deltas count from
    while True:
        await asyncio.sleep(max(windows.due() - perf_counter(), 0.0))
        if sampler is not None:
            windows.host_metrics = await sampler.sample()
        writer.mark("window", windows.close(perf_counter()))
