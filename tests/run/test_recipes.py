"""The AgentX recipe on the real Weka trace with subagents, against the simulated host.

Runs are short: the ``fast`` simulated profile stands in for AgentX's 900 s minimum, shortened through the
documented ``--recipe-min-duration`` option where a valid run is wanted (the summary says it was shortened).
"""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.metrics.summary import steady_window, summarize
from replay.metrics.windows import rebuild
from replay.records.reader import read_run
from replay.workload.importers import import_paths, write_canonical
from replay.workload.trajectory import load_workload
from tests.support.paths import SHARED

WEKA = SHARED / "trajectories" / "real" / "weka" / "sample_trace_with_subagent.json"
pytestmark = pytest.mark.skipif(not WEKA.exists(), reason="the real Weka trace is not in shared/")


@pytest.fixture(scope="module")
def weka(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("weka") / "weka.jsonl"
    buf = io.BytesIO()
    write_canonical(import_paths([WEKA]).trajectories, buf)
    out.write_bytes(buf.getvalue())
    return out


def _run(weka: Path, tmp: Path, *extra: str) -> tuple[dict, object]:
    out = tmp / "run.jsonl"
    args = ["run", str(weka), "--recipe", "agentx", "-c", "3", "--sim-profile", "fast", "--gpus", "2", "--json",
            "-q", "--out", str(out), *extra]  # fmt: skip
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return orjson.loads(result.output), read_run(out)


@pytest.fixture(scope="module")
def short_run(weka, tmp_path_factory) -> tuple[dict, object]:
    return _run(weka, tmp_path_factory.mktemp("short"), "--duration", "4", "--window", "1")


def test_initial_lanes_start_between_a_quarter_and_three_quarters_of_their_trajectory(short_run) -> None:
    _, run = short_run
    starts = run.footer["lanes"]["starts"]
    assert len(starts) == 3 and {s["lane"] for s in starts} == {0, 1, 2}
    for s in starts:
        assert 0.25 <= s["ratio"] <= 0.75
        assert 0.25 * s["duration_s"] <= s["t_star_s"] <= 0.75 * s["duration_s"]
        assert s["primers"] >= 1 and s["resume_turn"] >= 1
    first = {}
    for r in run.requests:
        if r.parent is None:
            first.setdefault(r.task, r)
    primed = [first[s["lane"]] for s in starts]  # the first three tasks are the lanes' initial trees
    assert [p.turn for p in primed] == [s["resume_turn"] - 1 for s in starts]  # the primer: the call before t*
    assert all(p.phase == "warmup" and p.max_tokens == 1 for p in primed)


def test_warmup_calls_are_marked_and_in_no_figure(short_run) -> None:
    summary, run = short_run
    warm = [r for r in run.requests if r.phase == "warmup"]
    measured = [r for r in run.requests if r.phase == "measured"]
    assert len(warm) >= 3 + 3 * 10 - 3  # a primer per lane, then up to 10 per lane (a lane's tree may end)
    assert all(r.max_tokens == 1 for r in warm)
    steady = run.phases["steady_start"]
    assert all(r.t_done is not None and r.t_done <= steady for r in warm)  # the barrier: all back before it opens
    assert summary["warmup_requests"] == len(warm)
    assert summary["requests"] == len(measured)
    assert summary["agentx"]["requests"] == sum(r.ok and r.t_sent >= steady for r in measured)
    assert summary["totals"]["output_tokens"] == sum(r.output_tokens or 0 for r in measured)
    rebuilt = summarize(run)  # the run file alone: the same figures and verdict
    windows = rebuild(run, steady_window(run))  # and its window records alone
    for key in ("agentx", "interactivity", "submission_valid", "invalid_reasons", "warmup_requests", "throughput",
                "metric_coverage", "intended", "beside"):  # fmt: skip
        assert rebuilt[key] == summary[key] == windows[key], key


def test_a_sixty_second_run_on_another_corpus_is_invalid_and_says_why(weka, tmp_path) -> None:
    """The verdict judges the configured duration: the run is cut by a signal-free task stop to stay short. The
    run requires another corpus's fingerprint, so that is a reason too."""
    other = "sha256:" + "0f" * 32
    summary, run = _run(weka, tmp_path, "--duration", "60", "--tasks", "1", "--recipe-fingerprint", other)
    assert summary["submission_valid"] is False
    assert any(r.startswith("benchmark_duration_below_minimum: 60 s") for r in summary["invalid_reasons"])
    have = load_workload([weka]).fingerprint
    assert run.header["workload"]["fingerprint"] == summary["run"]["workload"]["fingerprint"] == have
    assert run.header["recipe"]["corpus"] == {"name": "semianalysis_cc_traces_weka_062126", "fingerprint": other}
    reasons = [r for r in summary["invalid_reasons"] if r.startswith("corpus_mismatch:")]
    assert reasons == [f"corpus_mismatch: the workload's fingerprint is {have}, the run requires {other} (given by"
                       " --recipe-fingerprint; the recipe pins semianalysis_cc_traces_weka_062126, whose fingerprint"
                       " replay cannot know)"]  # fmt: skip
    assert f"requires {other} (semianalysis" not in " ".join(summary["invalid_reasons"])  # not named as that corpus
    assert summary["corpus"] == {"name": "semianalysis_cc_traces_weka_062126", "required": other,
                                 "fingerprint": have, "matches": False}  # fmt: skip
    assert summarize(run)["invalid_reasons"] == summary["invalid_reasons"]  # from the run file alone
    text = CliRunner().invoke(main, ["report", str(tmp_path / "run.jsonl")]).output
    assert f"  corpus: workload fingerprint {have}, not the one required ({other})" in text.splitlines()


def test_interactivity_and_per_gpu_throughput(short_run) -> None:
    summary, _ = short_run
    for p in ("p50", "p75", "p90", "p95"):
        assert summary["interactivity"][p] == pytest.approx(1 / summary["itl_s"][p])
        ax = summary["agentx"]
        assert ax["interactivity"][p] == pytest.approx(1 / ax["itl_s"][p])
    tp = summary["throughput"]
    assert tp["gpus"] == 2 and tp["total_tps_per_gpu"] == pytest.approx(tp["total_tps"] / 2)
    ax = summary["agentx"]["throughput"]
    assert ax["total_tps_per_gpu"] == pytest.approx(ax["total_tps"] / 2)
    assert ax["total_tps"] == pytest.approx((ax["input_tokens"] + ax["output_tokens"]) / ax["span_s"])
    cache = summary["agentx"]["prefix_cache"]
    assert 0.5 < cache["theoretical_hit_ratio"] < 1 and 0.5 < cache["host_hit_ratio"] < 1


def test_a_run_long_enough_without_errors_is_valid(weka, tmp_path) -> None:
    """The fast profile and a 30 s minimum (--recipe-min-duration) stand in for AgentX's 900 s. 30 s, not less:
    the first second after the barrier holds no call (every lane first waits its carried pause, 1 s at least in
    this trace), and AgentX wants 95 % of the window's seconds to see tokens."""
    pin = load_workload([weka]).fingerprint  # the corpus the run requires is the one it replays
    summary, run = _run(weka, tmp_path, "--duration", "30", "--recipe-min-duration", "30", "-c", "16",
                        "--recipe-fingerprint", pin)  # fmt: skip
    assert summary["errors"] == 0
    assert summary["submission_valid"] is True, summary["invalid_reasons"]
    assert summary["corpus"]["matches"] is True and summary["corpus"]["required"] == pin
    assert summary["metric_coverage"] >= 0.95
    assert run.header["recipe"]["min_duration_s"] == 30 and run.header["recipe"]["min_duration_shortened"]
