"""A sweep by a recipe's rules (``replay sweep --recipe``): each level that recipe's run. The AgentX sweep (its own
warm-up, the window from its barrier, one InferenceX row per level) is tested with the export in
tests/reports/test_exports.py; this is the other recipe, whose levels keep the sweep's timed warm-up."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from tests.support.trajectories import simple_turns, write_trajectory


def test_a_sweep_by_the_aa_agentperf_recipe_keeps_its_timed_warmup_and_each_level_its_aa_block(tmp_path: Path) -> None:
    """--recipe aa-agentperf on a sweep: each level an AA-AgentPerf run (its `aa` block at the tier given), warmed up
    for --warmup as any sweep (no barrier), and refused by the InferenceX export (no AgentX figures)."""
    traj = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(traj, f"w{i}", simple_turns(6, output_tokens=24, tool_time_s=0.2))
    out = tmp_path / "sw"
    args = ["sweep", str(traj), "-c", "1,2", "--virtual", "--window", "4s", "--warmup", "1s", "--sim-profile", "fast",
            "--recipe", "aa-agentperf", "--slo-tier", "t:2:50", "--out", str(out), "--json", "-q"]  # fmt: skip
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout)
    assert doc["recipe"] == "aa-agentperf" and doc["warmup_s"] == 1.0 and doc["warmup_per_lane"] is None
    for lv in doc["levels"]:
        assert lv["recipe"] == "aa-agentperf" and [t["name"] for t in lv["aa"]["slo_tiers"]] == ["t"]
        assert lv["window"]["end_s"] - lv["window"]["start_s"] == pytest.approx(4.0)
    res = CliRunner().invoke(main, ["export", str(out / "sweep.json"), "--format", "inferencex", "-o", "-"])
    assert res.exit_code == 1 and "level 1 has no AgentX figures" in res.output
