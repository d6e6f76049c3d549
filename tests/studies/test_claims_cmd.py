"""``replay claims verify``: the shipped example against the MoE profile (virtual clock), and a small claims file
run for real against the embedded simulated host, its measured values the runs' own figures converted."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from tests.support.trajectories import simple_turns, write_trajectory

ROOT = Path(__file__).resolve().parents[2]


def _verify(args: list[str]) -> dict:
    res = CliRunner().invoke(main, ["claims", "verify", *args, "--json", "-q"])
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


def test_the_example_claims_against_the_moe_profile_on_the_virtual_clock(tmp_path):
    doc = _verify([str(ROOT / "docs" / "claims-example.toml"), "--host", "sim:moe-8gpu", "--virtual"])
    assert doc["host"] == "sim:moe-8gpu" and doc["runs"] == 8  # 1, 2, 4, 8, 16, 32, 48, 64: shared by 18 claims
    rows = {c["name"]: c for c in doc["claims"]}
    assert len(rows) == 18
    for c in doc["claims"]:
        assert set(c) >= {"name", "claimed", "measured", "unit", "ratio", "verdict"}
        assert c["verdict"] in ("pass", "fail")
        if c["measured"] is not None:
            assert c["ratio"] == pytest.approx(c["measured"] / c["claimed"])
    at48 = rows["BLACKBOX 8xB300: total tokens/min at 48 conversations"]
    assert at48["concurrency"] == 48 and at48["unit"] == "tokens/min" and at48["claimed"] == 20.23e6
    assert at48["figure"] == "throughput.total_tps" and at48["figure_unit"] == "tokens/s"  # replay's own unit ...
    assert at48["measured"] == pytest.approx(at48["figure_value"] * 60)  # ... and the claim's (tokens/min)
    assert any("B300" in u for u in at48["unmatched"])  # the sim is 8x H200, not B300
    assert any(u.startswith("gpus") for u in at48["matched"])  # 8 GPUs, as claimed
    peak = rows["Verda SGLang DeepSeek V4.1 Flash: output tokens/s per GPU at peak"]
    assert peak["concurrency"] in (1, 2, 4, 8, 16, 32, 64)
    assert rows["What-if: 1,000 output tokens at 100 vs 1,000 tokens/s"]["verdict"] == "pass"
    text = CliRunner().invoke(main, ["claims", "verify", str(ROOT / "docs" / "claims-example.toml"), "--host",
                                     "sim:moe-8gpu", "--virtual", "-q"])  # fmt: skip
    assert text.exit_code == 0 and "verdict" in text.output and "could not match" in text.output


CLAIMS = """
[verify]
tolerance = "50%"
window = "1.5s"
warmup = "0.5s"

[[claim]]
name = "total tokens per minute at 2"
source = "a test"
metric = "total_tokens"
value = "{total_per_min}"
unit = "tokens/min"
conditions = {{ concurrency = 2, gpus = 1 }}

[[claim]]
name = "output per GPU at 2"
metric = "output_tokens"
value = 1
unit = "tokens/s/gpu"
check = "at_least"
conditions = {{ concurrency = 2 }}

[[claim]]
name = "median output speed per user alone"
metric = "output_speed"
value = 10
unit = "tokens/s/user"
check = "at_least"
tolerance = "20%"
conditions = {{ concurrency = 1, percentile = "median" }}

[[claim]]
name = "a billion tokens per second per user alone"
metric = "output_speed"
value = 1e9
unit = "tokens/s/user"
check = "at_least"
tolerance = "20%"
conditions = {{ concurrency = 1, percentile = "median" }}

[[claim]]
name = "median TTFT alone"
metric = "ttft"
value = 1000
unit = "ms"
conditions = {{ concurrency = 1 }}
"""


def test_a_small_claims_file_run_for_real(tmp_path):
    work = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(4, output_tokens=16, tool_time_s=0.02))
    claims = tmp_path / "claims.toml"
    claims.write_text(CLAIMS.format(total_per_min="10k"))
    doc = _verify([str(claims), str(work), "--sim-profile", "fast", "--out", str(tmp_path / "runs")])
    assert doc["runs"] == 2 and set(doc["levels"]) == {"1", "2"}
    rows = {c["name"]: c for c in doc["claims"]}
    at2 = orjson.loads(CliRunner().invoke(main, ["report", doc["levels"]["2"], "--json"]).stdout)
    alone = orjson.loads(CliRunner().invoke(main, ["report", doc["levels"]["1"], "--json"]).stdout)
    total = rows["total tokens per minute at 2"]
    assert total["measured"] == pytest.approx(at2["throughput"]["total_tps"] * 60)
    assert rows["output per GPU at 2"]["measured"] == pytest.approx(at2["throughput"]["output_tps"] / 1)
    speed = rows["median output speed per user alone"]
    assert speed["measured"] == pytest.approx(alone["user_decode_tps"]["p50"]) and speed["verdict"] == "pass"
    ttft = rows["median TTFT alone"]
    assert ttft["measured"] == pytest.approx(alone["ttft_s"]["p50"] * 1000) and ttft["verdict"] == "pass"
    # Verdicts a busy machine cannot turn (how each check judges is tests/studies/test_claim_units.py's): the fast
    # host's figures are far above the claims that pass (a stall makes them lower, a burst after it higher), and no
    # speed read on a microsecond clock reaches the one that fails.
    impossible = rows["a billion tokens per second per user alone"]
    assert impossible["measured"] == speed["measured"] and impossible["verdict"] == "fail"
    assert [c["name"] for c in doc["claims"] if c["verdict"] != "pass"] == [impossible["name"]], doc["claims"]
    assert "gpus: claimed 1, host 1" in total["matched"]


def test_virtual_levels_write_their_run_files_where_out_says(tmp_path, monkeypatch):
    """The virtual clock writes a run file per level as real time does: ``--out DIR`` is taken, and nothing goes to
    ./replay-runs."""
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "w.jsonl"
    for i in range(2):
        write_trajectory(work, f"w{i}", simple_turns(3, output_tokens=16, tool_time_s=0.02))
    claims = tmp_path / "claims.toml"
    claims.write_text(CLAIMS.format(total_per_min="10k"))
    doc = _verify([str(claims), str(work), "--virtual", "--out", str(tmp_path / "runs")])
    assert doc["mode"] == "virtual clock" and set(doc["levels"]) == {"1", "2"}
    for path in doc["levels"].values():
        assert Path(path).parent == tmp_path / "runs" and Path(path).stat().st_size > 0
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["c1.jsonl", "c2.jsonl"]
    assert not (tmp_path / "replay-runs").exists()
