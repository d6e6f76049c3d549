"""A nightly soak's outputs: the live figures for a dashboard, the host's own metrics per window, regression gates."""

from __future__ import annotations

import copy
import math
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.records.reader import read_run
from replay.runner.host_metrics import parse
from replay.runner.rebuild import rebuild_run
from replay.verdict.baseline import _noise as baseline_noise
from replay.verdict.baseline import compare
from tests.support.trajectories import simple_turns, write_trajectory


def _workload(tmp_path: Path) -> Path:
    path = tmp_path / "w.jsonl"
    for i in range(6):
        write_trajectory(path, f"w{i}", simple_turns(40, output_tokens=30, tool_time_s=0.05))
    return path


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _counter(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def test_prometheus_serves_the_live_figures_while_the_run_goes_on(tmp_path: Path) -> None:
    """The run goes on until the test has seen the counter rise three times, then Ctrl-C ends it: what the test
    waits for is the endpoint's own figures, not a duration (a busy machine only makes it wait longer)."""
    port = _port()
    out = tmp_path / "run.jsonl"
    cmd = [sys.executable, "-m", "replay", "run", str(_workload(tmp_path)), "-c", "4", "--sim-profile", "fast",
           "--duration", "10m", "--prometheus", f"127.0.0.1:{port}", "--out", str(out), "-q"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: list[float] = []
    deadline = time.monotonic() + 240  # a bound on a hang only
    try:
        while len(seen) < 3 and time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
                    text = resp.read().decode()
            except OSError:
                time.sleep(0.2)  # the server is not up yet: poll again
                continue
            count = _counter(text, "replay_requests_total")
            if not seen or count > seen[-1]:
                seen.append(count)
            time.sleep(0.5)  # polling the endpoint as a dashboard would
        assert len(seen) >= 3 and seen[0] < seen[-1], seen  # the counter rose during the run
        assert 'host="simulated:fast"' in text and "replay_ttft_seconds_bucket" in text
        assert "replay_tokens_total" in text and "replay_user_decode_tokens_per_second_count" in text
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 130, proc.stderr.read().decode()  # type: ignore[union-attr]
    assert read_run(out).footer["stop_reason"] == "interrupted (SIGINT)"


def test_scrape_metrics_keeps_the_hosts_prefix_cache_counters_per_window(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    res = CliRunner().invoke(main, ["run", str(_workload(tmp_path)), "-c", "4", "--sim-profile", "fast",
                                    "--duration", "4", "--window", "1", "--scrape-metrics", "auto", "--out", str(out),
                                    "-q", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    windows = orjson.loads(res.stdout)["windows"]
    metrics = [w["host_metrics"] for w in windows]
    assert all("prefix_cache_queries" in m and "prefix_cache_hits" in m for m in metrics[:-1])
    queried = sum(m.get("prefix_cache_queries", 0) for m in metrics)
    prompt = orjson.loads(res.stdout)["totals"]["prompt_tokens"]
    assert 0.5 * prompt < queried <= prompt  # the host's queried tokens, window by window (the last may be cut)


def test_the_last_window_is_scraped_as_it_closes(tmp_path: Path) -> None:
    """A run that ends mid-window: its last window is scraped too, so the windows' increases of the host's counters
    add up to what the host counted over the run (the simulated host counts as the run's records do)."""
    out = tmp_path / "run.jsonl"
    res = CliRunner().invoke(main, ["run", str(_workload(tmp_path)), "-c", "4", "--sim-profile", "fast",
                                    "--tasks", "8", "--window", "1", "--scrape-metrics", "auto", "--out", str(out),
                                    "-q", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = orjson.loads(res.stdout)
    windows = [orjson.loads(line) for line in out.read_bytes().splitlines() if b'"type":"window"' in line]
    scraped = [w["host_metrics"] for w in windows]
    assert len(scraped) >= 2 and "error" not in scraped[-1]
    requests = [r for line in out.read_bytes().splitlines() if (r := orjson.loads(line))["type"] == "request"]
    assert sum(m.get("prefix_cache_queries", 0) for m in scraped) == sum(r["prompt_tokens"] for r in requests)
    assert sum(m.get("generation_tokens", 0) for m in scraped) == sum(r["output_tokens"] for r in requests)
    assert sum(r["prompt_tokens"] for r in requests) == summary["totals"]["prompt_tokens"]


def test_parse_reads_each_figure_once_whatever_the_aliases() -> None:
    text = (
        "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.5\n"
        "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc 0.5\n"
        '# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total{model_name="a"} 10\n'
        'vllm:prefix_cache_hits_total{model_name="b"} 5\n'
    )
    assert parse(text) == {"kv_cache_usage": 0.5, "prefix_cache_hits": 15.0}


def test_sglangs_cache_hit_rate_is_a_gauge_and_the_counters_are_increases() -> None:
    """Issue 24: sglang:cache_hit_rate is a gauge (the rate SGLang computes); read as a counter its window value was
    the difference of two rates."""
    from replay.runner.host_metrics import HostMetrics

    sampler = HostMetrics("http://127.0.0.1:1/metrics")
    text = ("# TYPE sglang:cache_hit_rate gauge\nsglang:cache_hit_rate 0.{rate}\n"
            "# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs 3\n"
            "# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total {hits}\n")  # fmt: skip
    assert sampler.update(text.format(rate=7, hits=100)) == {"cache_hit_rate": 0.7, "requests_waiting": 3.0}
    assert sampler.update(text.format(rate=75, hits=160)) == {"cache_hit_rate": 0.75, "requests_waiting": 3.0,
                                                               "prefix_cache_hits": 60.0}  # fmt: skip


def test_a_slower_host_than_the_baseline_fails_the_night(tmp_path: Path) -> None:
    """The gate judges figures against tolerance plus twice their windows' noise. Two real-time runs of one host
    differ by what the machine did meanwhile (on a busy one the same host was judged slower than itself), so the
    band is checked on one real run's own figures, moved by known amounts; and the gate end to end on a host whose
    engine alone makes it slower than a stall could: 150 ms steps (TTFT at least 150 ms, decode at most 7 tok/s)
    against 10 ms ones. Not the fast profile's 1 ms steps as the baseline: calls of 8 tokens decoded in 7 ms, read
    in one burst after a stall, give absurd speeds (issue 29), and a window of them blows the noise term up until
    no decode figure can regress (seen: windows' p25 of 450-850 and 326,107 tok/s, a 99 % drop not flagged)."""
    work = tmp_path / "w.jsonl"
    for i in range(6):
        write_trajectory(work, f"w{i}", simple_turns(40, output_tokens=8))
    args = [str(work), "-c", "4", "--tool-time", "none", "--duration", "5", "--warmup", "1", "--window", "0.5", "-q",
            "--json"]  # fmt: skip
    base = tmp_path / "last-night.jsonl"
    steady, slow = tmp_path / "steady.toml", tmp_path / "slow.toml"
    steady.write_text('base = "fast"\nname = "steady"\nstep_overhead_s = 0.01\n')
    slow.write_text('base = "fast"\nname = "slow"\nstep_overhead_s = 0.15\n')
    res = CliRunner().invoke(main, ["run", *args, "--sim-profile-file", str(steady), "--out", str(base)])
    assert res.exit_code == 0, res.output
    before = rebuild_run(base).summary.to_dict()  # as the gate reads a baseline
    # the band on the figures alone: whether a busy machine held this client up is the end-to-end part's question
    before["client"] = None
    assert compare(before, before, 0.1)["regressed"] == []
    noise, _ = baseline_noise(before, "user_decode_tps_p25")
    assert noise > 0  # the windows' spread: the band is wider than the tolerance alone
    for k, regressed in ((1.0, False), (3.0, True)):  # worse by the tolerance and 1 or 3 times the band's noise term
        after = copy.deepcopy(before)
        after["user_decode_tps"]["p25"] = before["user_decode_tps"]["p25"] * (1 - 0.1 - 2 * k * noise / math.sqrt(2))
        after["windows"] = before["windows"]  # the same windows: the noise of the pair is sqrt(2) times one's
        assert ("user_decode_tps.p25" in compare(after, before, 0.1)["regressed"]) is regressed, k
    res = CliRunner().invoke(main, ["run", *args, "--sim-profile-file", str(slow), "--baseline", str(base),
                                    "--out", str(tmp_path / "tonight.jsonl")])  # fmt: skip
    summary = orjson.loads(res.stdout)
    if not summary["baseline"]["judged"]:  # a machine busy enough to hold the client up: refused, never passed
        assert res.exit_code == 3 and "the baseline comparison was not judged" in summary["verdict"]["reasons"][-1]
        pytest.skip(f"the machine held the client up: {summary['baseline']['unjudged']}")
    assert res.exit_code == 2 and "regressed against the baseline" in summary["verdict"]["reasons"][-1]
    assert {"user_decode_tps.p25", "ttft_s.p50"} <= set(summary["baseline"]["regressed"])
    report = CliRunner().invoke(main, ["report", str(tmp_path / "tonight.jsonl")])
    assert "REGRESSED" in report.output and "exit code 2" in report.output
