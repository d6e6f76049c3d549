"""The host's own metrics (``--scrape-metrics``) over their label sets: counters and counts of requests add up over a
host's ranks; a share or a rate is their mean (two ranks each at 80 % KV-cache use are a cache 80 % used, not 160 %).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.runner.host_metrics import HostMetrics, parse
from tests.support.trajectories import simple_turns, write_trajectory

# Two ranks of one host, as vLLM's data-parallel engines and SGLang's ranks label them
TWO_RANKS = (
    "# TYPE vllm:kv_cache_usage_perc gauge\n"
    'vllm:kv_cache_usage_perc{engine="0"} 0.8\nvllm:kv_cache_usage_perc{engine="1"} 0.8\n'
    "# TYPE sglang:cache_hit_rate gauge\n"
    'sglang:cache_hit_rate{dp_rank="0"} 0.6\nsglang:cache_hit_rate{dp_rank="1"} 0.9\n'
    "# TYPE vllm:num_requests_waiting gauge\n"
    'vllm:num_requests_waiting{engine="0"} 2\nvllm:num_requests_waiting{engine="1"} 3\n'
    "# TYPE vllm:prefix_cache_hits counter\n"
    'vllm:prefix_cache_hits_total{engine="0"} {hits}\nvllm:prefix_cache_hits_total{engine="1"} {hits}\n'
)


def _exposition(hits: int) -> str:
    return TWO_RANKS.replace("{hits}", str(hits))


def test_shares_and_rates_are_averaged_over_ranks_and_counts_summed() -> None:
    got = parse(_exposition(10))
    assert got["kv_cache_usage"] == pytest.approx(0.8)  # summed it read 1.6
    assert got["cache_hit_rate"] == pytest.approx(0.75)  # summed it read 1.5
    assert got["requests_waiting"] == 5.0 and got["prefix_cache_hits"] == 20.0


def test_a_counter_that_went_down_was_reset_and_counts_its_new_value() -> None:
    sampler = HostMetrics("http://127.0.0.1:1/metrics")
    sampler.update(_exposition(100))
    assert sampler.update(_exposition(130))["prefix_cache_hits"] == 60.0
    assert sampler.update(_exposition(4))["prefix_cache_hits"] == 8.0  # the host restarted: never -252


@pytest.fixture
def metrics_url() -> Iterator[tuple[str, list[int]]]:
    """A /metrics of two ranks whose counters grow by 7 a rank at each scrape; the scrapes' hit counts served."""
    served: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.append(7 * (len(served) + 1))
            body = _exposition(served[-1]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics", served
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_runs_windows_keep_the_ranks_gauges_as_gauges(tmp_path, metrics_url) -> None:
    url, served = metrics_url
    work = tmp_path / "w.jsonl"
    for i in range(2):
        write_trajectory(work, f"w{i}", simple_turns(4, output_tokens=16))
    out = tmp_path / "run.jsonl"
    args = ["run", str(work), "--sim-profile", "fast", "-c", "2", "--tool-time", "none", "--window", "0.2",
            "--scrape-metrics", url, "--out", str(out), "-q", "--json"]  # fmt: skip
    live = CliRunner().invoke(main, args)
    assert live.exit_code == 0, live.output
    offline = CliRunner().invoke(main, ["report", str(out), "--json"])
    assert offline.exit_code == 0, offline.output
    windows = orjson.loads(live.stdout)["windows"]
    assert windows == orjson.loads(offline.stdout)["windows"]
    raw = [orjson.loads(line) for line in out.read_bytes().splitlines() if b'"type":"window"' in line]
    scraped = [w["host_metrics"] for w in raw]
    assert len(scraped) >= 1 and all("error" not in m for m in scraped)
    for m in scraped:  # what the endpoint served, recounted here: each rank 0.8 used, hit rates 0.6 and 0.9
        assert (m["kv_cache_usage"], m["cache_hit_rate"], m["requests_waiting"]) == pytest.approx((0.8, 0.75, 5))
    # the counters' increases add up to what the two ranks counted after the baseline scrape
    assert sum(m.get("prefix_cache_hits", 0) for m in scraped) == 2 * (served[len(scraped)] - served[0])
    assert [w["host_metrics"] for w in windows] == scraped
