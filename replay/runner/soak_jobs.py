"""The jobs a run runs beside its sessions for a soak: closing windows (with the host's own metrics) and serving
the live figures to Prometheus."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from replay import clock, event_loop
from replay.clients import tls
from replay.metrics.windows import WindowRecorder
from replay.records.run_file import RunWriter
from replay.reports.prometheus_export import PrometheusSink, serve_metrics
from replay.runner.host_metrics import HostMetrics, endpoint


def host_sampler(spec: Any, windows: WindowRecorder | None, base_url: str) -> HostMetrics | None:
    """The sampler of the host's own metrics, its baseline taken now (before any call of the run), when asked."""
    if windows is None or not spec.scrape_metrics:
        return None
    sampler = HostMetrics(endpoint(spec.scrape_metrics, base_url), tls.context(spec.ca_bundle, spec.insecure))
    event_loop.run(sampler.sample())  # the baseline the first window's deltas count from
    return sampler


def close_last_window(windows: WindowRecorder, writer: RunWriter, sampler: HostMetrics | None) -> None:
    """The last window, cut at the end of the run, with the host's metrics scraped as it closes (so the windows'
    increases add up to the host's over the whole run)."""
    if sampler is not None:
        windows.host_metrics = event_loop.run(sampler.sample())
    writer.mark("window", windows.close(clock.now()))


def side_jobs(
    spec: Any,
    windows: WindowRecorder | None,
    writer: RunWriter,
    exporter: PrometheusSink | None,
    sampler: HostMetrics | None,
) -> list[Any]:
    jobs: list[Any] = []
    if windows is not None:
        jobs.append(lambda: _close_windows(windows, writer, sampler))
    if exporter is not None and spec.prometheus:
        address = spec.prometheus
        jobs.append(lambda: _serve(exporter, address))
    return jobs


async def _serve(exporter: PrometheusSink, address: str) -> None:
    """``--prometheus`` for the run's length; its address was checked before the run (``preflight``), and if it is
    taken between that check and now, the run says so rather than serve nothing in silence."""
    try:
        await serve_metrics(exporter, address)
    except OSError as exc:
        print(f"replay: --prometheus: cannot listen at {address}: {exc.strerror or exc}", file=sys.stderr)


async def _close_windows(windows: WindowRecorder, writer: RunWriter, sampler: HostMetrics | None) -> None:
    """Append each window's record as it closes (written and synced: a killed soak keeps every closed window),
    with the host's own metrics of the window when asked to scrape them."""
    while True:
        await asyncio.sleep(max(windows.due() - clock.now(), 0.0))
        if sampler is not None:
            windows.host_metrics = await sampler.sample()
        writer.mark("window", windows.close(clock.now()))
