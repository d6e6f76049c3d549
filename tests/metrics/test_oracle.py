"""Every headline figure of `replay report --json` against an independent recount from the run file's raw lines
(tests/support/oracle.py: the standard library only, nothing of replay), in the modes a run has (issue 24).

Counts must be equal, token sums and rates equal to float precision, percentiles within HdrHistogram's stated
precision (3 significant digits, 0.1 %, of values kept in whole microseconds or milli-tokens per second).
"""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from tests.support import oracle
from tests.support.trajectories import simple_turns, write_trajectory

SIM = ["--sim-profile", "fast", "-q"]
MODES = {
    "closed loop, steady window, windows": ["-c", "3", "--duration", "4", "--window", "1"],
    "tasks, the whole run": ["-c", "2", "--tasks", "5"],
    "faults and retries": ["-c", "3", "--duration", "4", "--sim-faults", "500:0.1,drop:0.05", "--retries", "1"],
    "open loop": ["--arrivals", "poisson:4", "--max-live", "2", "--duration", "4"],
    "completions, reasoning": ["-c", "2", "--duration", "3", "--api", "completions"],
}
LATENCIES = {"ttft_s": ("ttft", (50, 75, 90, 95, 99)), "ttfat_s": ("ttfat", (50, 90, 95, 99)),
             "e2e_s": ("e2e", (50, 90, 95, 99)), "itl_s": ("itl", (50, 75, 90, 95, 99))}  # fmt: skip


@pytest.fixture(scope="module", params=list(MODES))
def run(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("oracle")
    work = tmp / "w.jsonl"
    for i in range(5):
        write_trajectory(work, f"w{i}", simple_turns(6, output_tokens=24 + 8 * i, tool_time_s=0.05))
    out = tmp / "run.jsonl"
    res = CliRunner().invoke(main, ["run", str(work), *SIM, *MODES[request.param], "--out", str(out)])
    # 2: faults past the default verdict's 10 %; 3: the open loop's backlog (arrivals that never started)
    assert res.exit_code in (0, 2) or (res.exit_code == 3 and "arrivals started by the stop" in res.output), res.output
    report = CliRunner().invoke(main, ["report", str(out), "--json"])
    assert report.exit_code == 0, report.output
    return orjson.loads(report.stdout), oracle.figures(oracle.read(out))


def _close(reported: float | None, exact: float | None, unit: float) -> bool:
    """HdrHistogram's precision: within 0.1 % of the exact value, plus the unit values are kept in."""
    if reported is None or exact is None:
        return reported is exact
    return abs(reported - exact) <= 0.001 * abs(exact) + unit


def test_counts_errors_and_the_window(run):
    s, o = run
    assert (s["requests"], s["errors"], s["errors_by_class"]) == (o["requests"], o["errors"], o["errors_by_class"])
    assert s["error_rate"] == pytest.approx(o["error_rate"], abs=1e-12)
    assert s["window"]["requests"] == o["measured"] and s["window"]["steady"] == o["steady"]
    assert s["window_s"] == pytest.approx(o["window_s"], rel=1e-12)
    assert o["measured"] >= 5


def test_throughput_over_the_steady_window(run):
    s, o = run
    t = s["throughput"]
    for key in ("cached_input", "new_input", "output"):
        assert t["tokens"][key] == pytest.approx(o["tokens"][key], rel=1e-9), key
    assert t["total_tps"] == pytest.approx(o["total_tps"], rel=1e-9)
    assert t["output_tps"] == pytest.approx(o["output_tps"], rel=1e-9)
    assert t["total_tokens_per_min"] == pytest.approx(60 * o["total_tps"], rel=1e-9)
    assert t["cached_input_tps"] + t["new_input_tps"] + t["output_tps"] == pytest.approx(t["total_tps"], rel=1e-9)


@pytest.mark.parametrize("key", list(LATENCIES))
def test_latency_percentiles(run, key):
    s, o = run
    name, ps = LATENCIES[key]
    values = o[name]
    assert s[key]["n"] == len(values)
    for p in ps:
        assert _close(s[key][f"p{p}"], oracle.nearest_rank(values, p), 1e-6), (key, p)


def test_per_user_decode_speed(run):
    s, o = run
    d = s["user_decode_tps"]
    assert d["n"] == len(o["decode"]) and d["not_measured"] == o["decode_not_measured"]
    for p in (25, 50, 75):
        assert _close(d[f"p{p}"], oracle.nearest_rank(o["decode"], p), 1e-3), p  # milli-tokens per second


def test_cache_ratios(run):
    s, o = run
    c = s["cache"]
    assert c["client_reuse_ratio"] == pytest.approx(o["client_reuse_ratio"], rel=1e-12)
    assert c["host_hit_ratio"] == pytest.approx(o["host_hit_ratio"], rel=1e-12)
    assert c["requests_with_cached_tokens"] == o["with_cached_count"] and c["requests"] == o["measured"]
    # the efficiency sets the hit ratio beside the client's reuse of the same calls: those the host reported
    if o["host_hit_ratio"] is not None and o["reported_reuse_ratio"]:
        assert c["efficiency"] == pytest.approx(o["host_hit_ratio"] / o["reported_reuse_ratio"], rel=1e-12)
