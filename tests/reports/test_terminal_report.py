"""The terminal report shows what the JSON has and says what each figure covers (issue 24): the breakdowns by
context and turn depth, the replay against the recorded timeline, the host's own metrics per window, the figures
per GPU and per MW and the hourly cost, how many calls the host hit ratio is over, and no empty last window."""

from __future__ import annotations

import copy

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.reports.text_report import to_text
from replay.sim.core.profiles import PROFILES
from tests.support.trajectories import simple_turns, write_trajectory


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("terminal")
    work = tmp / "recorded.jsonl"
    for i in range(6):
        turns = simple_turns(3 + i % 3, output_tokens=16, tool_time_s=0.02)
        for t in turns:
            t["recorded"] = {"latency_s": 0.04}
        write_trajectory(work, f"rec{i}", turns)
    out = tmp / "run.jsonl"
    args = ["run", str(work), "-c", "3", "--sim-profile", "fast", "--duration", "3", "--window", "0.5",
            "--scrape-metrics", "auto", "--price-per-hour", "36", "--power-kw", "5.6", "-q",
            "--out", str(out)]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    report = CliRunner().invoke(main, ["report", str(out)])
    as_json = CliRunner().invoke(main, ["report", str(out), "--json"])
    assert report.exit_code == 0 and as_json.exit_code == 0
    return report.output, orjson.loads(as_json.stdout)


def test_the_breakdowns_the_drift_and_the_hosts_metrics_are_printed(run):
    text, s = run
    assert "By prompt tokens (calls measured in the window" in text and "By turn (0 = a trajectory's first" in text
    for row in s["breakdown"]["by_turn"]:
        if row["requests"]:
            assert f"  {row['bucket']:<8} {row['requests']:>7,}" in text
    rt = s["breakdown"]["recorded_timeline"]
    assert rt["tasks"] >= 6 and f"Against the recorded timeline ({rt['tasks']} complete tasks" in text
    scraped = [w for w in s["windows"] if w["host_metrics"]]
    assert scraped and f"The host's own metrics per window ({len(scraped)} window" in text


def test_per_gpu_per_mw_and_the_hourly_cost(run):
    text, s = run
    tp, hourly = s["throughput"], s["cost"]["hourly"]
    assert tp["gpus"] == PROFILES["fast"].gpus  # --gpus defaults to the simulated profile's count
    assert tp["total_tps_per_gpu"] == pytest.approx(tp["total_tps"] / tp["gpus"])
    assert tp["power_kw"] == 5.6 and tp["total_tps_per_mw"] == pytest.approx(tp["total_tps"] / 0.0056)
    assert hourly["price_per_hour"] == 36.0
    assert hourly["per_million_tokens_usd"] == pytest.approx(0.01 * 1e6 / tp["total_tps"])
    assert hourly["per_task_usd"] == pytest.approx(0.01 * s["tasks"]["wall_s"] / 3)
    assert 0 < hourly["run_usd"] < 0.01 * 60  # 36 $/h for a run of well under a minute
    assert "tok/s per GPU" in text and "tok/s per MW (5.6 kW of accelerators)" in text and "at $36/h:" in text


def test_every_line_fits_a_terminal(run):
    text, _ = run
    others = ("Verdict", "Against", "  two speed modes")  # lists of names, and a line of the provider report
    long = [line for line in text.splitlines() if len(line) > 100 and not line.startswith(others)]
    assert not long, long


def test_the_host_hit_ratio_says_how_many_calls_it_is_over(run):
    _, s = run
    s = copy.deepcopy(s)
    calls = s["cache"]["requests"]
    s["cache"]["requests_with_cached_tokens"] = calls - 2
    assert f"(over {calls - 2:,} of {calls:,} calls: 2 had no cached count)" in to_text(s)
    s["cache"]["requests_with_cached_tokens"] = calls
    assert "had no cached count" not in to_text(s)


def test_an_empty_last_window_is_not_printed_and_a_short_one_is_marked(run):
    _, s = run
    s = copy.deepcopy(s)
    empty = {"requests": 0, "errors": 0, "total_tps": 0.0, "output_tps": 0.0, "ttft_p50_s": None, "ttft_p95_s": None,
             "user_decode_tps_p25": None, "host_metrics": {}}  # fmt: skip
    last = dict(s["windows"][-1], index=99, start_s=1e4, end_s=1e4 + 0.001, **empty)
    s["windows"] = [*s["windows"], last]
    text = to_text(s)
    assert "10000 s" not in text  # the empty window left out
    s["windows"][-1] = dict(last, requests=1, total_tps=5.0)
    text = to_text(s)
    assert "   10000 s       1" in text and "* the last window: 0.00 s, cut short" in text


def test_the_hosts_own_timings_say_how_many_calls_carried_them(run):
    _, s = run
    s = copy.deepcopy(s)
    calls = s["window"]["requests"]
    p = {"p50": 0.01, "p95": 0.02}
    s["server"] = {"ttft_s": p, "queue_s": p, "decode_tps": {"p50": 90.0}, "client_minus_server_ttft_s": p,
                   "client_minus_server_decode_tps": {"p50": -3.0}, "requests": calls - 4}  # fmt: skip
    assert f"(n={calls - 4} of {calls:,} calls: those that carried timings)" in to_text(s)
