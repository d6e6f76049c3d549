"""``replay export``: llm-d's Benchmark Report v0.2, validated with llm-d's own models (PyPI
``llmd-benchmark-report``), and InferenceX's aggregate fields; every figure the summary's own, and two of each
format recounted from the run file by code that shares nothing with replay (tests/support/recount.py)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from tests.support import recount
from tests.support.trajectories import simple_turns, write_trajectory

llmd = pytest.importorskip("llmd_benchmark_report", reason="the test extra brings llmd-benchmark-report")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """Six trajectories whose calls have a recorded latency (AgentX's start points read the recorded timeline)."""
    path = tmp_path_factory.mktemp("work") / "w.jsonl"
    for i in range(6):
        turns = simple_turns(3 + i % 3, output_tokens=16, tool_time_s=0.02)
        for t in turns:
            t["recorded"] = {"latency_s": 0.04}
        write_trajectory(path, f"w{i}", turns)
    return path


def _run(work: Path, out: Path, *extra: str) -> dict:
    args = ["run", str(work), "--sim-profile", "fast", "-q", "--json", "--out", str(out), *extra]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


def _export(path: Path, fmt: str, out: Path) -> tuple[int, str, object]:
    res = CliRunner().invoke(main, ["export", str(path), "--format", fmt, "-o", str(out)])
    return res.exit_code, res.output, orjson.loads(out.read_bytes()) if out.exists() else None


@pytest.fixture(scope="module")
def plain(work, tmp_path_factory) -> tuple[Path, dict]:
    run = tmp_path_factory.mktemp("plain") / "run.jsonl"
    return run, _run(work, run, "-c", "3", "--duration", "2", "--warmup", "0.5")


@pytest.fixture(scope="module")
def agentx(work, tmp_path_factory) -> tuple[Path, dict]:
    run = tmp_path_factory.mktemp("agentx") / "run.jsonl"
    args = ("-c", "3", "--recipe", "agentx", "--recipe-min-duration", "2s", "--duration", "2s", "--gpus", "2")
    return run, _run(work, run, *args)


def test_llmd_report_validates_and_carries_the_summarys_figures(plain, tmp_path):
    run, summary = plain
    code, output, doc = _export(run, "llm-d", tmp_path / "br.json")
    assert code == 0, output
    assert isinstance(doc, dict)
    report = llmd.BenchmarkReportV02.model_validate(doc)  # llm-d's own models: extra fields are refused
    assert llmd.load_benchmark_report(doc).version == "0.2.1"
    agg = doc["results"]["request_performance"]["aggregate"]
    ttft, e2e, itl = summary["ttft_s"], summary["e2e_s"], summary["itl_s"]
    assert agg["latency"]["time_to_first_token"] == {"units": "s", "mean": ttft["mean"], "p50": ttft["p50"],
                                                     "p75": ttft["p75"], "p90": ttft["p90"], "p95": ttft["p95"],
                                                     "p99": ttft["p99"]}  # fmt: skip
    assert agg["latency"]["request_latency"]["p95"] == e2e["p95"] and agg["latency"]["request_latency"]["units"] == "s"
    assert agg["latency"]["inter_token_latency"]["p50"] == itl["p50"]
    ntpot = agg["latency"]["normalized_time_per_output_token"]
    for key in ("p50", "p75", "p90", "p95", "mean"):
        assert ntpot[key] == pytest.approx(1 / summary["interactivity_e2e"][key], rel=1e-12)
    tp = summary["throughput"]
    assert agg["throughput"]["total_token_rate"] == {"units": "tokens/s", "mean": tp["total_tps"]}
    assert agg["throughput"]["output_token_rate"]["mean"] == tp["output_tps"]
    assert agg["throughput"]["input_token_rate"]["mean"] == pytest.approx(tp["cached_input_tps"] + tp["new_input_tps"])
    assert agg["requests"] == {"total": summary["requests"], "failures": summary["errors"]}
    assert report.scenario.load.standardized.concurrency == 3
    fingerprint = summary["run"]["workload"]["fingerprint"]
    assert fingerprint in doc["scenario"]["load"]["metadata"]["description"]
    # two figures recounted from the raw run file: TTFT p90 and seconds per output token at p90 (3 significant digits)
    assert agg["latency"]["time_to_first_token"]["p90"] == pytest.approx(
        recount.rank_percentile(recount.ttft(run), 90), rel=0.002
    )
    assert ntpot["p90"] == pytest.approx(
        recount.rank_percentile(recount.seconds_per_token(recount.measured(run)), 90), rel=0.002
    )
    _, _, again = _export(run, "llm-d", tmp_path / "again.json")
    assert again == doc  # the same run file, the same report (its id too)


def test_inferencex_fields_are_the_agentx_figures_and_recount(agentx, tmp_path):
    run, summary = agentx
    code, output, doc = _export(run, "inferencex", tmp_path / "ix.json")
    assert code == 0, output
    assert isinstance(doc, dict)
    ax = summary["agentx"]
    latency = doc["request_metrics"]["latency"]
    assert list(latency) == ["ttft", "e2el", "itl", "tpot", "e2e_norm_intvty"]
    names = {"ttft": "ttft_s", "e2el": "e2e_s", "itl": "itl_s", "tpot": "itl_s", "e2e_norm_intvty": "interactivity_e2e"}
    for field, key in names.items():
        assert list(latency[field]) == ["mean", "p50", "p75", "p90", "p95", "std"]
        assert latency[field] == {k: ax[key][k] for k in latency[field]}, field
        assert all(isinstance(v, float) and v > 0 for v in latency[field].values()), field
    tp = doc["request_metrics"]["throughput"]
    assert tp["per_gpu"]["total_tput_tps"] == ax["throughput"]["total_tps_per_gpu"] == ax["throughput"]["total_tps"] / 2
    assert tp["total"]["tokens_per_second"] == ax["throughput"]["total_tps"]
    assert tp["duration_seconds"] == ax["throughput"]["span_s"]
    assert doc["num_gpus"] == 2 and doc["submission_valid"] == summary["submission_valid"]
    # two figures recounted from the raw run file: throughput per GPU, and E2E-normalised interactivity at p90
    mine = recount.agentx_throughput(run, 2)
    assert tp["duration_seconds"] == pytest.approx(mine["span_s"], rel=1e-9)
    assert tp["per_gpu"]["total_tput_tps"] == pytest.approx(mine["total_tps_per_gpu"], rel=1e-9)
    theirs = recount.interactivity_e2e(run)
    assert ax["interactivity_e2e"]["n"] == theirs["n"] > 0
    assert latency["e2e_norm_intvty"]["p90"] == pytest.approx(theirs["p90"], rel=0.002)


def test_a_run_without_agentx_figures_is_refused_for_inferencex(plain, tmp_path):
    run, _ = plain
    code, output, doc = _export(run, "inferencex", tmp_path / "ix.json")
    assert code == 1 and doc is None
    assert "the run has no AgentX figures" in output and "--recipe agentx" in output


def test_a_sweep_exports_one_llmd_report_per_level(work, tmp_path):
    args = ["sweep", str(work), "-c", "1,2", "--window", "2", "--warmup", "0.5", "--sim-profile", "fast", "--virtual",
            "--out", str(tmp_path / "sw"), "--json", "-q"]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    levels = orjson.loads(res.stdout)["levels"]
    code, output, docs = _export(tmp_path / "sw" / "sweep.json", "llm-d", tmp_path / "br.json")
    assert code == 0, output
    assert isinstance(docs, list) and len(docs) == len(levels) == 2
    for doc, level in zip(docs, levels, strict=True):
        llmd.BenchmarkReportV02.model_validate(doc)
        assert doc["scenario"]["load"]["metadata"]["treatment"] == f"concurrency-{level['concurrency']}"
        got = doc["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]["p50"]
        assert got == level["ttft_s"]["p50"]
    assert len({d["run"]["eid"] for d in docs}) == 1 and len({d["run"]["uid"] for d in docs}) == 2
    code, output, doc = _export(tmp_path / "sw" / "sweep.json", "inferencex", tmp_path / "ix.json")
    assert code == 1 and doc is None  # refused, with the reason and what would do
    assert "level 1 has no AgentX figures" in output and "make the sweep with --recipe agentx" in output


@pytest.fixture(scope="module")
def agentx_sweep(work, tmp_path_factory) -> tuple[Path, dict]:
    """replay sweep --recipe agentx on the virtual clock: each level an AgentX run (its warm-up, then --window)."""
    out = tmp_path_factory.mktemp("agentx-sweep") / "sw"
    args = ["sweep", str(work), "-c", "1,2,4", "--virtual", "--window", "3s", "--recipe", "agentx",
            "--recipe-min-duration", "2s", "--gpus", "2", "--sim-profile", "fast", "--out", str(out), "--json",
            "-q"]  # fmt: skip
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out / "sweep.json", orjson.loads(res.stdout)


def test_a_sweep_made_with_the_agentx_recipe_runs_each_level_by_its_rules(agentx_sweep):
    index, doc = agentx_sweep
    assert doc["recipe"] == "agentx" and doc["warmup_s"] is None and doc["warmup_per_lane"] == 10
    for lv in doc["levels"]:
        c = lv["concurrency"]
        assert lv["recipe"] == "agentx" and lv["submission_valid"] is True, lv["invalid_reasons"]
        assert lv["agentx"]["warmup_requests"] >= 10 * c  # ten calls per lane (and the primers) before the barrier
        assert lv["window"]["end_s"] - lv["window"]["start_s"] == pytest.approx(3.0)  # --window, from the barrier
        assert lv["agentx"]["requests"] == lv["window"]["requests"] > 0
    text = CliRunner().invoke(main, ["report", str(index)]).output
    assert "agentx's warm-up (10 calls per lane at max_tokens 1, then a barrier)" in text
    assert "each level a --recipe agentx run" in text


def test_a_sweep_made_with_the_agentx_recipe_exports_one_inferencex_row_per_level(agentx_sweep, tmp_path):
    index, live = agentx_sweep
    code, output, doc = _export(index, "inferencex", tmp_path / "ix.json")
    assert code == 0, output
    assert isinstance(doc, dict) and doc["format"] == "replay.inferencex/1"
    rows = doc["levels"]
    assert [r["concurrency"] for r in rows] == [lv["concurrency"] for lv in live["levels"]] == [1, 2, 4]
    names = {"ttft": "ttft_s", "e2el": "e2e_s", "itl": "itl_s", "tpot": "itl_s", "e2e_norm_intvty": "interactivity_e2e"}
    for row, lv in zip(rows, live["levels"], strict=True):
        ax, latency, tp = lv["agentx"], row["request_metrics"]["latency"], row["request_metrics"]["throughput"]
        for field, key in names.items():
            assert latency[field] == {k: ax[key][k] for k in ("mean", "p50", "p75", "p90", "p95", "std")}, field
        assert tp["total"]["tokens_per_second"] == ax["throughput"]["total_tps"]
        assert tp["output"]["tokens_per_second"] == ax["throughput"]["output_tps"]
        assert tp["input"]["tokens_per_second"] == ax["throughput"]["input_tps"]
        assert tp["duration_seconds"] == ax["throughput"]["span_s"]
        assert tp["per_gpu"] == {"total_tput_tps": ax["throughput"]["total_tps_per_gpu"],
                                 "output_tput_tps": ax["throughput"]["output_tps_per_gpu"],
                                 "input_tput_tps": ax["throughput"]["input_tps_per_gpu"]}  # fmt: skip
        assert row["num_gpus"] == 2 and row["requests"] == ax["requests"] > 0
        assert row["submission_valid"] is lv["submission_valid"] and row["replay"]["concurrency"] == lv["concurrency"]
        # two figures recounted from the level's own run file: throughput per GPU, E2E-normalised interactivity p90
        mine = recount.agentx_throughput(lv["run_file"], 2)
        assert tp["duration_seconds"] == pytest.approx(mine["span_s"], rel=1e-9)
        assert tp["per_gpu"]["total_tput_tps"] == pytest.approx(mine["total_tps_per_gpu"], rel=1e-9)
        assert latency["e2e_norm_intvty"]["p90"] == pytest.approx(recount.interactivity_e2e(lv["run_file"])["p90"],
                                                                  rel=0.002)  # fmt: skip
    _, _, again = _export(index, "inferencex", tmp_path / "again.json")
    assert again == doc  # rebuilt from the run files, the same rows


def test_a_file_that_is_no_run_is_a_one_line_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    code, output, _ = _export(bad, "llm-d", tmp_path / "br.json")
    assert code == 1 and "Traceback" not in output
    assert output.splitlines()[-1] == f"Error: {bad}: not a replay run file (no header line)"
