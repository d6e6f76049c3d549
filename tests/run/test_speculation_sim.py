"""Speculative decoding's acceptance against the simulated host's speculator profile, checked three ways: per call
(the finish chunk's ``meta_info``) against the truth log, per window (the host's vLLM-named counters scraped as
each window closes) against the truth log's totals and against the profile's own acceptance curve, and the live
JSON against the report rebuilt from the file. Every expectation here is computed from the truth log and the
profile's stated numbers by this file's own code, not replay's."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from tests.support.trajectories import simple_turns, write_trajectory

# the profile file's speculator: 3-token drafts, acceptance length 1.5 -> 3.0 over the first 4,000 tokens generated
START, END, LEARN = 1.5, 3.0, 4_000


def _length(generated: float) -> float:
    """The profile's acceptance length once the engine has generated ``generated`` tokens (as its docs say)."""
    return START + (END - START) * min(generated / LEARN, 1.0)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("spec")
    work = tmp / "work.jsonl"
    for i in range(8):
        write_trajectory(work, f"s{i}", simple_turns(4, output_tokens=250))
    profile = tmp / "spec.toml"
    profile.write_text(f'base = "speculator"\nspec_learn_tokens = {LEARN}\n')
    out, truth = tmp / "run.jsonl", tmp / "truth.jsonl"
    args = ["run", str(work), "-c", "8", "--sim-profile-file", str(profile), "--tool-time", "none", "--window", "0.2s",
            "--scrape-metrics", "auto", "--sim-truth-log", str(truth), "--out", str(out), "-q", "--json"]  # fmt: skip
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    report = CliRunner().invoke(main, ["report", str(out), "--json"], catch_exceptions=False)
    text = CliRunner().invoke(main, ["report", str(out)], catch_exceptions=False)
    assert report.exit_code == 0 and text.exit_code == 0, report.output + text.output
    lines = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    return {
        "live": orjson.loads(res.stdout),
        "offline": orjson.loads(report.stdout),
        "text": text.stdout,
        "requests": [x for x in lines if x["type"] == "request"],
        "truth": [orjson.loads(x) for x in truth.read_bytes().splitlines()],
    }


def _truth_totals(truth: list[dict]) -> tuple[int, int, int]:
    ok = [t for t in truth if t["status"] == "ok"]
    return tuple(sum(t["speculation"][k] for t in ok) for k in ("accepted", "drafted", "drafts"))  # type: ignore[return-value]


def test_every_call_records_the_acceptance_the_host_reported(run: dict) -> None:
    truth = {t["request_id"]: t for t in run["truth"]}
    assert len(run["requests"]) == 32 and all(r["error"] is None for r in run["requests"])
    for r in run["requests"]:
        t = truth[r["id"]]["speculation"]
        assert r["speculation"] == t, r["id"]
        # a verify step yields its own token and the accepted drafts; the first token comes from the prefill
        assert t["accepted"] + t["drafts"] == r["output_tokens"] - 1
        assert t["drafted"] == 3 * t["drafts"]


def test_the_summary_equals_the_truth_log(run: dict) -> None:
    accepted, drafted, drafts = _truth_totals(run["truth"])
    sp = run["live"]["speculation"]
    assert (sp["accepted_tokens"], sp["drafted_tokens"], sp["drafts"], sp["calls"]) == (accepted, drafted, drafts, 32)
    assert sp["source"] == "calls"
    assert sp["acceptance_length_mean"] == pytest.approx(1 + accepted / drafts, rel=1e-12)


def test_the_hosts_counters_per_window_add_up_to_the_truth_and_rise_as_the_profile_says(run: dict) -> None:
    windows = run["live"]["windows"]
    assert len(windows) >= 3
    scraped = [w["host_metrics"] for w in windows]
    got = tuple(round(sum(m.get(k, 0) for m in scraped)) for k in ("spec_accepted_tokens", "spec_draft_tokens",
                                                                   "spec_drafts"))  # fmt: skip
    assert got == _truth_totals(run["truth"])  # the last scrape closes the last window: every step counted
    calls = [w["speculation"] for w in windows if w["speculation"]]  # none in a window where no call completed
    assert {s["source"] for s in calls} == {"calls"}
    assert sum(s["accepted_tokens"] for s in calls) == _truth_totals(run["truth"])[0]
    generated, checked, lengths = 0.0, 0, []
    for m in scraped:
        before, generated = generated, generated + m["generation_tokens"]
        if m["spec_drafts"] < 200:  # too few verify steps for the ratio to mean much
            continue
        length = 1 + m["spec_accepted_tokens"] / m["spec_drafts"]
        assert _length(before) - 0.15 <= length <= _length(generated) + 0.15, (before, generated, length)
        lengths.append(length)
        checked += 1
    assert checked >= 2 and lengths[0] < lengths[-1]
    assert lengths[0] < 2.5 and lengths[-1] > 2.6  # it rose from near 1.5 to near 3.0


def test_live_equals_offline_and_the_report_shows_acceptance_over_time(run: dict) -> None:
    assert run["live"]["speculation"] == run["offline"]["speculation"]
    assert run["live"]["windows"] == run["offline"]["windows"]
    assert run["live"] == run["offline"]
    assert "accept." in run["text"] and "speculative decoding: mean acceptance length" in run["text"]
    assert all(len(line) <= 100 for line in run["text"].splitlines() if "accept" in line or "drafted" in line)


def test_a_plain_profile_reports_no_speculation(tmp_path: Path) -> None:
    work = write_trajectory(tmp_path / "w.jsonl", "w", simple_turns(2, output_tokens=8))
    res = CliRunner().invoke(main, ["run", str(work), "--sim-profile", "fast", "-q", "--json", "--out",
                                    str(tmp_path / "run.jsonl")], catch_exceptions=False)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.stdout)["speculation"] is None


def _small_run(tmp: Path, *extra: str) -> tuple[dict, list[dict], list[dict]]:
    work = tmp / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(3, output_tokens=100))
    out, truth = tmp / "run.jsonl", tmp / "truth.jsonl"
    args = ["run", str(work), "-c", "4", "--sim-profile", "speculator", "--tool-time", "none", "--sim-truth-log",
            str(truth), "--out", str(out), "-q", "--json", *extra]  # fmt: skip
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    requests = [x for x in map(orjson.loads, out.read_bytes().splitlines()) if x["type"] == "request"]
    return orjson.loads(res.stdout), requests, [orjson.loads(x) for x in truth.read_bytes().splitlines()]


def test_a_vllm_host_reports_acceptance_only_in_its_counters(tmp_path: Path) -> None:
    """vLLM says nothing per request: the summary's acceptance is its counters' increases over the windows."""
    scrape = ("--window", "0.2s", "--scrape-metrics", "auto")
    live, requests, truth = _small_run(tmp_path, "--sim-dialect", "vllm", *scrape)
    assert all(r["speculation"] is None for r in requests) and len(requests) == 12
    accepted, drafted, drafts = _truth_totals(truth)
    sp = live["speculation"]
    assert sp["source"] == "host metrics" and sp["calls"] is None and sp["windows"] >= 1
    assert (sp["accepted_tokens"], sp["drafted_tokens"], sp["drafts"]) == (accepted, drafted, drafts)
    assert sp["acceptance_length_mean"] == pytest.approx(1 + accepted / drafts, rel=1e-12)
    assert any(w["speculation"] and w["speculation"]["source"] == "host metrics" for w in live["windows"])


def test_llama_cpp_reports_draft_counts_in_its_timings(tmp_path: Path) -> None:
    """llama.cpp's ``timings.draft_n`` and ``draft_n_accepted``: drafted and accepted tokens, no count of drafts, so
    no mean acceptance length."""
    live, requests, truth = _small_run(tmp_path, "--sim-dialect", "llamacpp")
    by_id = {t["request_id"]: t["speculation"] for t in truth}
    for r in requests:
        t = by_id[r["id"]]
        assert r["speculation"] == {"accepted": t["accepted"], "drafted": t["drafted"]}
    accepted, drafted, _ = _truth_totals(truth)
    sp = live["speculation"]
    assert (sp["accepted_tokens"], sp["drafted_tokens"], sp["drafts"], sp["calls"]) == (accepted, drafted, None, 12)
    assert sp["acceptance_length_mean"] is None
