"""Hosts side by side and ``replay compare``: ratios equal to the separate runs' own figures, differences judged
against the bootstrap's noise, costs from the hourly price; the bootstrap's resampling itself."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import orjson
import pytest
from click.testing import CliRunner
from hdrh.histogram import HdrHistogram

from replay.cli import main
from replay.metrics.agreement import agreement
from replay.metrics.bootstrap import _draw_counts, _weighted_percentile, bootstrap
from replay.metrics.level_figures import FIGURES, value
from replay.records.reader import read_run
from replay.studies.compare import compare_runs, side_from_file
from tests.support.trajectories import simple_turns, write_trajectory


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory) -> tuple[Path, dict]:
    """One workload against sim:fast and sim:default (one after the other), as `replay run --host A --host B`."""
    tmp = tmp_path_factory.mktemp("hosts")
    work = tmp / "w.jsonl"
    for i in range(6):
        write_trajectory(work, f"w{i}", simple_turns(4, output_tokens=16, tool_time_s=0.02))
    args = ["run", str(work), "--host", "sim:fast", "--host", "sim:default", "-c", "3", "--duration", "2.5"]
    args += ["--warmup", "0.5", "--out", str(tmp / "run.jsonl"), "--price-per-hour", "10", "--price-per-hour", "4"]
    res = CliRunner().invoke(main, [*args, "--json", "-q"])
    assert res.exit_code == 0, res.output
    return tmp, orjson.loads(res.stdout)


def _report(path: Path) -> dict:
    res = CliRunner().invoke(main, ["report", str(path), "--json"])
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


def test_two_simulated_profiles_ratios_equal_the_separate_runs_figures(two_hosts):
    tmp, doc = two_hosts
    assert doc["kind"] == "hosts" and doc["mode"] == "one after the other"
    assert [r["host"] for r in doc["runs"]] == ["sim:fast", "sim:default"]
    fast, default = (_report(tmp / f"run.{n}.jsonl") for n in ("1-sim-fast", "2-sim-default"))
    (cmp,) = doc["comparisons"]
    for f in cmp["figures"]:
        a, b = value(fast, f["figure"]), value(default, f["figure"])
        assert (f["a"], f["b"]) == (a, b), f["figure"]
        if a:
            assert f["ratio"] == pytest.approx(b / a, rel=1e-12), f["figure"]
    by = {f["figure"]: f for f in cmp["figures"]}
    # Each verdict is what the bootstrap's interval of B/A says: above 1 higher, below 1 lower, else within noise.
    # Which way two real-time runs of these profiles come out is timing: on a busy machine the fast profile's TTFT
    # was within the default's noise (the decode speeds of ~1,000 and ~220 tok/s per user differ more, but a stall
    # moves those too), so the direction is not asserted here.
    for f in cmp["figures"]:
        if f["ci"] is not None and f["verdict"] != "equal":
            lo, hi = f["ci"]
            want = "higher" if lo > 1 else "lower" if hi < 1 else "within noise"
            assert f["verdict"] == want, f
            assert f["b_better"] == (None if want == "within noise" else want == f["better"]), f
    assert by["error_rate"]["verdict"] == "equal"
    assert cmp["notes"] == []  # same workload, same seed, same concurrency


def test_costs_follow_the_hourly_price_of_each_host(two_hosts):
    _, doc = two_hosts
    (cmp,) = doc["comparisons"]
    for side, price in (("a", 10.0), ("b", 4.0)):
        s = _report(Path(cmp[side]["path"]))
        c = cmp["costs"][side]
        assert c["price_per_hour"] == price
        assert c["per_task"] == pytest.approx(price / 3600 * s["tasks"]["wall_s"] / 3)
        assert c["per_million_tokens"] == pytest.approx(price / 3600 * 1e6 / s["throughput"]["total_tps"])


def test_the_comparison_index_rebuilds_the_same_comparison(two_hosts):
    tmp, doc = two_hosts
    rebuilt = _report(tmp / "run.compare.json")
    assert rebuilt["comparisons"][0]["figures"] == doc["comparisons"][0]["figures"]
    assert [i["label"] for i in rebuilt["inputs"]] == ["sim:fast", "sim:default"]


def test_compare_cli_on_two_run_files_and_a_run_against_itself(two_hosts, tmp_path):
    tmp, _ = two_hosts
    a, b = tmp / "run.1-sim-fast.jsonl", tmp / "run.2-sim-default.jsonl"
    res = CliRunner().invoke(main, ["compare", str(a), str(b), "--json"])
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout)
    assert doc["kind"] == "runs" and [f["figure"] for f in doc["figures"]] == [f.key for f in FIGURES]
    assert doc["a"]["host"] == "sim:fast" and doc["b"]["host"] == "sim:default"
    same = compare_runs(side_from_file(a), side_from_file(a))
    for f in same["figures"]:
        if f["ratio"] is not None and f["ci"] is not None:
            assert f["ratio"] == 1.0 and f["ci"][0] <= 1 <= f["ci"][1], f
            assert f["verdict"] == "within noise"
    text = CliRunner().invoke(main, ["compare", str(a), str(b)])
    assert text.exit_code == 0 and "B/A" in text.output and "per-user decode p25" in text.output


def test_compare_refuses_a_run_against_a_sweep(two_hosts, tmp_path):
    tmp, _ = two_hosts
    index = tmp_path / "sweep.json"
    index.write_bytes(orjson.dumps({"format": "replay.sweep/1", "levels": []}))
    res = CliRunner().invoke(main, ["compare", str(tmp / "run.1-sim-fast.jsonl"), str(index)])
    assert res.exit_code != 0 and "both be run files or both sweep indexes" in res.output


def _hdr(values, q: float) -> float:
    """The summary's percentile counted here: values held as an HdrHistogram holds them (the hdrh library itself,
    not replay's code) in seconds as µs, at the nearest rank ⌈q n / 100⌉ (hdrh's own rank rounds; the summary's
    takes the ceiling)."""
    h = HdrHistogram(1, 2**40, 3)
    held = sorted(h.get_highest_equivalent_value(max(round(v * 1e6), 1)) for v in values)
    return held[max(math.ceil(round(q * len(held) / 100, 9)), 1) - 1] / 1e6


def test_weighted_percentile_is_the_summarys_percentile_of_the_draw():
    rng = np.random.default_rng(1)
    values = rng.exponential(1.0, 500)
    codes = rng.integers(0, 40, 500)
    ones = np.ones((3, 40), dtype=np.int64)
    twice = ones.copy()
    twice[:, 7] = 2  # task 7 drawn twice: its calls count twice
    for q in (25, 50, 95):
        assert np.all(_weighted_percentile(values, codes, ones, q) == _hdr(values, q))
        doubled = np.concatenate([values, values[codes == 7]])
        assert np.all(_weighted_percentile(values, codes, twice, q) == _hdr(doubled, q))
    counts = _draw_counts(rng, 40, 7)
    assert counts.shape == (7, 40) and np.all(counts.sum(axis=1) == 40)


def test_bootstrap_of_a_run_centres_on_its_figures(two_hosts):
    tmp, _ = two_hosts
    path = tmp / "run.1-sim-fast.jsonl"
    summary, data = _report(path), read_run(path)
    boot = bootstrap(data, [f.key for f in FIGURES], resamples=200)
    for key in ("throughput.total_tps", "ttft_s.p50", "user_decode_tps.p25", "tasks.wall_s"):
        lo, hi = np.percentile(boot[key], (1, 99))
        assert lo <= value(summary, key) * 1.01 and value(summary, key) * 0.99 <= hi, key


def test_compare_says_why_no_answers_were_compared(two_hosts):
    """Runs recorded apart keep no answer text (only `replay run --host A --host B` does): the comparison says so
    and what keeps it, instead of a bare 0 pairs; runs of hosts side by side are compared in the text too."""
    tmp, _ = two_hosts
    kept = tmp / "run.1-sim-fast.jsonl"
    apart = tmp / "apart.jsonl"
    args = ["run", str(tmp / "w.jsonl"), "--sim-profile", "fast", "-c", "3", "--duration", "1", "--out", str(apart)]
    assert CliRunner().invoke(main, [*args, "-q", "--json"]).exit_code == 0
    records = [r for line in apart.read_bytes().splitlines() if (r := orjson.loads(line))["type"] == "request"]
    assert records and all(r["answer_text"] is None for r in records)  # recorded apart: no text kept
    for a, b, why in ((apart, apart, "neither run kept its answers' text"), (kept, apart, "run B kept no answer text")):
        res = CliRunner().invoke(main, ["compare", str(a), str(b), "--json"])
        ag = orjson.loads(res.stdout)["agreement"]
        assert ag["pairs"] == 0 and ag["exact_share"] is None and ag["why"].startswith(why)
        assert "replay run --host A --host B" in ag["why"]
        text = CliRunner().invoke(main, ["compare", str(a), str(b)]).output
        assert f"answers A / B: not compared, {why}" in text
    both = CliRunner().invoke(main, ["compare", str(kept), str(tmp / "run.2-sim-default.jsonl")]).output
    assert "answers A / B: 100.0% identical over" in both


def test_no_pairs_say_which_run_kept_no_text_or_answered_nothing():
    def call(text, error=None):
        return SimpleNamespace(task=0, trajectory="t", turn=0, parent=None, attempt=1, error=error, phase="measured",
                               answer_text=text)  # fmt: skip

    kept_failed = agreement([call("a")], [call(None, "http_5xx")], kept=(True, True))
    assert kept_failed["pairs"] == 0 and kept_failed["why"].startswith("run B: no answer to compare")
    assert agreement([call("a")], [call(None)], kept=(True, False))["why"].startswith("run B kept no answer text")
    assert "no call answered by both" in agreement([call("a")], [SimpleNamespace(**{**vars(call("b")), "turn": 1})],
                                                   kept=(True, True))["why"]  # fmt: skip
