"""Live equals offline: ``replay run --json`` and ``replay report RUN --json`` of the same run are the same JSON,
every key, in every mode (closed, open, both recipes, worker processes, a resumed run, a windowed run). The two
are made by one function (``replay.runner.rebuild.finish``) from the same accumulators; a figure made in one
place only (as the recorded-timeline drift once was, by the report alone) fails here."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.records.reader import read_run
from tests.support.trajectories import simple_turns, write_trajectory

MODES = {
    "closed": ["-c", "3"],
    "open": ["-c", "3", "--arrivals", "poisson:20", "--tasks", "6"],
    "agentx": ["-c", "3", "--recipe", "agentx", "--recipe-min-duration", "2s", "--duration", "2s"],
    "aa-agentperf": ["-c", "3", "--recipe", "aa-agentperf", "--duration", "2s"],
    "workers": ["-c", "4", "--workers", "2", "--tasks", "6"],
    "windowed": ["-c", "3", "--duration", "2s", "--window", "0.5s"],
    "goodput": ["-c", "3", "--duration", "2s", "--window", "0.5s", "--slo", "ttft<=20ms,user_decode_tps>=300"],
    "goodput-workers": ["-c", "4", "--workers", "2", "--tasks", "6", "--slo", "ttft<=20ms,e2e<=1s"],
}
DRIFT = "breakdown.recorded_timeline.model_time_s.ratio_p50<1000"  # a threshold on a figure the report once alone had


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six trajectories whose every call has a recorded latency, so the recorded-timeline drift has tasks."""
    work = tmp_path_factory.mktemp("work") / "recorded.jsonl"
    for i in range(6):
        turns = simple_turns(3 + i % 3, output_tokens=16, tool_time_s=0.02)
        for t in turns:
            t["recorded"] = {"latency_s": 0.04}
        write_trajectory(work, f"rec{i}", turns)
    return work


def _run(*args: str) -> dict:
    res = CliRunner().invoke(main, ["run", *args, "--sim-profile", "fast", "-q", "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


def _report(out: Path) -> dict:
    res = CliRunner().invoke(main, ["report", str(out), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


def _differences(live: object, offline: object, path: str = "") -> list[str]:
    """Every key path where the two JSON values differ (a key on one side only included)."""
    if isinstance(live, dict) and isinstance(offline, dict):
        out = [f"{path}.{k}: only offline" for k in offline if k not in live]
        out += [f"{path}.{k}: only live" for k in live if k not in offline]
        for k in live.keys() & offline.keys():
            out += _differences(live[k], offline[k], f"{path}.{k}")
        return out
    if isinstance(live, list) and isinstance(offline, list) and len(live) == len(offline):
        return [
            d for i, (a, b) in enumerate(zip(live, offline, strict=True)) for d in _differences(a, b, f"{path}[{i}]")
        ]
    return [] if live == offline else [f"{path}: {live!r} live, {offline!r} offline"]


def _check(live: dict, offline: dict) -> None:
    assert _differences(live, offline) == []
    assert live == offline
    assert live["schema_version"] == 1
    timeline = live["breakdown"]["recorded_timeline"]
    assert timeline["tasks"] > 0 and timeline["model_time_s"]["ratio_p50"] > 0  # compared, not a note


@pytest.mark.parametrize("mode", list(MODES))
def test_live_summary_equals_the_report_of_its_file(mode: str, recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    live = _run(str(recorded), *MODES[mode], "--threshold", DRIFT, "--out", str(out))
    _check(live, _report(out))
    if mode.startswith("goodput"):
        assert live["goodput"]["calls"] == live["window"]["requests"] > 0 and live["goodput"]["tasks"] > 0
    if mode == "goodput":  # each window carries its goodput (equal live and offline, as every key above)
        assert len(live["windows"]) >= 3 and all(w["goodput"]["slo"] == live["goodput"]["slo"] for w in live["windows"])
        assert sum(w["goodput"]["tasks"] for w in live["windows"]) == live["goodput"]["tasks"]
    [judged] = live["thresholds"]
    assert judged["ok"] and judged["value"] == live["breakdown"]["recorded_timeline"]["model_time_s"]["ratio_p50"]
    if mode == "windowed":
        assert len(live["windows"]) >= 3
    if mode == "workers":  # the run was split, as its footer says
        assert len(read_run(out).footer["workers"]) == 2
    if mode in ("agentx", "aa-agentperf"):
        assert live["recipe"] == mode


def test_a_resumed_runs_live_summary_covers_both_segments_as_the_report_does(recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    args = [str(recorded), "-c", "3", "--duration", "2s"]
    first = _run(*args, "--out", str(out))
    live = _run(*args, "--resume", str(out))
    _check(live, _report(out))
    assert [s["index"] for s in live["segments"]] == [0, 1]
    requests = out.read_bytes().count(b'{"type":"request"')
    assert live["requests"] == requests > first["requests"]  # the earlier segment's calls are in the live figures


def test_the_terminal_report_is_the_same_live_and_shows_the_breakdowns_drift_and_host_metrics(
    recorded: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run.jsonl"
    args = ["run", str(recorded), "-c", "3", "--duration", "2s", "--window", "0.5s", "--scrape-metrics", "auto"]
    live = CliRunner().invoke(main, [*args, "--sim-profile", "fast", "-q", "--out", str(out)], catch_exceptions=False)
    offline = CliRunner().invoke(main, ["report", str(out)], catch_exceptions=False)
    assert live.exit_code == offline.exit_code == 0, live.output
    text = live.stdout
    assert text == offline.stdout
    summary = _report(out)
    buckets = [r for r in summary["breakdown"]["by_turn"] if r["requests"]]
    assert "By turn (0 = a trajectory's first call)" in text and "By prompt tokens (calls measured" in text
    for r in buckets:  # each non-empty bucket is a row with its calls
        assert any(line.split()[:2] == [r["bucket"], f"{r['requests']:,}"] for line in text.splitlines()), r
    timeline = summary["breakdown"]["recorded_timeline"]
    assert f"Against the recorded timeline ({timeline['tasks']} complete tasks" in text
    scraped = [w["host_metrics"] for w in summary["windows"] if w["host_metrics"]]
    assert scraped and f"The host's own metrics per window ({len(scraped)} windows scraped" in text
