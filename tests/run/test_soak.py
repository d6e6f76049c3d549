"""A nightly soak's outputs: the live figures for a dashboard, the host's own metrics per window, regression gates."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson
from click.testing import CliRunner

from replay.cli import main
from replay.runner.host_metrics import parse
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
    port = _port()
    out = tmp_path / "run.jsonl"
    cmd = [sys.executable, "-m", "replay", "run", str(_workload(tmp_path)), "-c", "4", "--sim-profile", "fast",
           "--duration", "8", "--prometheus", f"127.0.0.1:{port}", "--out", str(out), "-q"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: list[float] = []
    deadline = time.monotonic() + 30
    try:
        while len(seen) < 3 and time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
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
        proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr.read().decode()  # type: ignore[union-attr]


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


def test_a_slower_host_than_the_baseline_fails_the_night(tmp_path: Path) -> None:
    work = _workload(tmp_path)
    args = [str(work), "-c", "4", "--tool-time", "none", "--duration", "4", "--window", "1", "-q", "--json"]
    base = tmp_path / "last-night.jsonl"
    assert CliRunner().invoke(main, ["run", *args, "--sim-profile", "fast", "--out", str(base)]).exit_code == 0
    same = CliRunner().invoke(main, ["run", *args, "--sim-profile", "fast", "--baseline", str(base),
                                     "--baseline-tolerance", "50%", "--out", str(tmp_path / "same.jsonl")])  # fmt: skip
    assert same.exit_code == 0, orjson.loads(same.stdout)["baseline"]
    slow = CliRunner().invoke(main, ["run", *args, "--sim-profile", "default", "--baseline", str(base),
                                     "--out", str(tmp_path / "tonight.jsonl")])  # fmt: skip
    summary = orjson.loads(slow.stdout)
    assert slow.exit_code == 2 and "regressed against the baseline" in summary["verdict"]["reasons"][-1]
    assert {"user_decode_tps.p25", "ttft_s.p50"} <= set(summary["baseline"]["regressed"])
    report = CliRunner().invoke(main, ["report", str(tmp_path / "tonight.jsonl")])
    assert "REGRESSED" in report.output and "exit code 2" in report.output
