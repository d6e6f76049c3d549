"""The host's own view, window by window: ``--scrape-metrics URL`` samples its Prometheus endpoint as each window
closes and keeps what changed, so a report can line the client's figures up with the server's in time.

vLLM, SGLang, llama.cpp and the simulated host (which uses vLLM's names) export prefix-cache hits and queries, KV
cache usage, waiting requests and preemptions; with speculative decoding on, vLLM counts drafts, draft tokens and
accepted tokens (``vllm:spec_decode_*``, docs.vllm.ai "Metrics"; mean acceptance length = 1 + accepted / drafts)
and SGLang exports its acceptance length as a gauge (``sglang:spec_accept_length``, averaged over its ranks here).
Counters are kept as their increase over the window (a counter that went down was reset, a host restarted: its
increase is its new value), gauges as their value at its end. Over a metric's label sets (a host's ranks, engines,
models) counters and counts of requests add up; a share or a rate (KV-cache use, SGLang's hit rate, its acceptance
length) is their mean: two ranks each at 80 % are a cache 80 % used, not 160 %. A scrape that fails is noted in the
window, never fatal.
"""

from __future__ import annotations

import contextlib
from ssl import SSLContext
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from replay.clients import http_session

# Prometheus names (after the parser's own suffix handling), and what replay calls each figure.
COUNTERS = {
    "vllm:prefix_cache_hits": "prefix_cache_hits",
    "vllm:prefix_cache_queries": "prefix_cache_queries",
    "vllm:num_preemptions": "preemptions",
    "vllm:prompt_tokens": "prompt_tokens",
    "vllm:generation_tokens": "generation_tokens",
    "llamacpp:prompt_tokens": "prompt_tokens",
    "llamacpp:tokens_predicted": "generation_tokens",
    "vllm:spec_decode_num_accepted_tokens": "spec_accepted_tokens",
    "vllm:spec_decode_num_draft_tokens": "spec_draft_tokens",
    "vllm:spec_decode_num_drafts": "spec_drafts",
}
GAUGES = {
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:num_requests_waiting": "requests_waiting",
    "vllm:num_requests_running": "requests_running",
    "sglang:cache_hit_rate": "cache_hit_rate",  # a gauge: the hit rate SGLang computes, not a count
    "sglang:num_queue_reqs": "requests_waiting",
    "sglang:num_running_reqs": "requests_running",
    "llamacpp:requests_processing": "requests_running",
    "llamacpp:requests_deferred": "requests_waiting",
    "sglang:spec_accept_length": "spec_acceptance_length",  # a windowed gauge of SGLang's, per rank: averaged
}
# Gauges that are a share or a rate of each label set (a rank's own pool, its own hit rate): averaged over the label
# sets, never summed; the other gauges count requests, which add up over ranks.
MEAN_GAUGES = {"kv_cache_usage", "cache_hit_rate", "spec_acceptance_length"}


def parse(text: str) -> dict[str, float]:
    """The figures replay follows from one exposition, each over its label sets: summed (counters, counts of
    requests), or averaged (``MEAN_GAUGES``)."""
    out: dict[str, float] = {}
    source: dict[str, str] = {}  # figure -> the metric name it was read from (one per figure: vLLM has aliases)
    samples: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name.removesuffix("_total")
            figure = COUNTERS.get(name) or GAUGES.get(name)
            if figure is None or sample.name.endswith(("_created", "_bucket")):
                continue
            if source.setdefault(figure, name) == name:
                out[figure] = out.get(figure, 0.0) + float(sample.value)
                samples[figure] = samples.get(figure, 0) + 1
    for figure in MEAN_GAUGES & set(out):
        out[figure] /= samples[figure]
    return out


def endpoint(value: str, base_url: str) -> str:
    """The URL to scrape: as given, or for ``auto`` the /metrics beside the host's API (``.../v1`` cut off)."""
    if value != "auto":
        return value
    root = base_url.rstrip("/")
    return (root[: -len("/v1")] if root.endswith("/v1") else root) + "/metrics"


class HostMetrics:
    """Samples one endpoint; each ``sample`` returns the window's counter increases and gauge values."""

    def __init__(self, url: str, ssl: SSLContext | bool = True) -> None:
        self.url = url
        self.ssl = ssl  # the run's TLS setting (replay.clients.tls)
        self.last: dict[str, float] | None = None

    async def sample(self) -> dict[str, Any]:
        text = None
        with contextlib.suppress(aiohttp.ClientError, TimeoutError, UnicodeDecodeError):
            async with (
                http_session.session(ssl=self.ssl, timeout=aiohttp.ClientTimeout(total=5)) as http,
                http.get(self.url, allow_redirects=False) as resp,  # (replay.clients.http_session)
            ):
                if resp.status == 200:
                    text = await resp.text()
        if text is None:
            return {"error": f"{self.url} could not be scraped"}
        return self.update(text)

    def update(self, text: str) -> dict[str, Any]:
        """The window's figures from the exposition ``text``: counters' increases since the last, gauges' values."""
        try:
            now = parse(text)
        except ValueError:
            return {"error": f"{self.url} is not Prometheus text"}
        counters = set(COUNTERS.values())
        out: dict[str, Any] = {}
        for figure, value in now.items():
            if figure in counters:
                if self.last is not None and figure in self.last:
                    before = self.last[figure]
                    out[figure] = value - before if value >= before else value  # below: reset since the last
            else:
                out[figure] = value
        self.last = now
        return out
