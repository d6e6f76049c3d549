"""``replay sweep`` and ``replay capacity`` end to end: a small real sweep against the embedded simulated host, the
sweep index that ``replay report`` rebuilds, and the overloaded profile's knee on the virtual clock."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.cli.run_specs import resolve_host
from replay.cli.study_options import parse_levels
from replay.records.reader import read_run
from tests.support.trajectories import simple_turns, write_trajectory


def _invoke(args: list[str]) -> dict:
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory) -> tuple[Path, dict]:
    """Levels 1, 2 and 4 on the fast profile: half a second of warm-up, a 1.5 s window each."""
    tmp = tmp_path_factory.mktemp("sweep")
    work = tmp / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(4, output_tokens=16, tool_time_s=0.02))
    args = ["sweep", str(work), "-c", "1,2,4", "--window", "1.5", "--warmup", "0.5", "--sim-profile", "fast"]
    args += ["--out", str(tmp / "sw"), "--slo", "ttft_p95<=1s", "--json", "-q", "--csv", str(tmp / "csv")]
    return tmp, _invoke(args)


def test_a_sweep_gives_one_run_per_level_and_the_json_outside_checks_read(small_sweep):
    _tmp, doc = small_sweep
    assert doc["format"] == "replay.sweep/1" and doc["host"] == "sim:fast" and doc["mode"] == "real time"
    assert [lv["concurrency"] for lv in doc["levels"]] == [1, 2, 4]
    assert doc["window_s"] == 1.5 and doc["warmup_s"] == 0.5 and "restarted per level" in doc["sessions"]
    for lv in doc["levels"]:
        assert Path(lv["run_file"]).exists() and lv["run"]["concurrency"] == lv["concurrency"]
        # the stated warm-up, then the stop at warm-up + window: a busy machine makes either mark late, never early
        # (but for the loop clock's millisecond); a late start shortens the window by as much
        start, window = lv["window"]["start_s"], lv["window_s"]
        assert lv["window"]["steady"] and start >= 0.5 - 1e-3 and start + window >= 2.0 - 1e-3
        assert lv["errors"] == 0 and lv["slo_ok"] is True
        assert lv["per_gpu"]["total_tps"] == lv["throughput"]["total_tps"] / 1  # fast: one GPU (its profile)
        # each level ran its number of sessions (counts; whether the host's throughput rose with them is timing:
        # the levels take turns with whatever else the machine runs)
        assert len({r.session for r in read_run(lv["run_file"]).requests}) == lv["concurrency"]
    assert set(doc["knee"]) >= {"concurrency", "rule"} and doc["knee"]["kind"] == "growth"
    assert doc["hardware"]["gpus"] == 1 and doc["hardware"]["source"] == "sim profile fast (gpus)"
    assert [p["concurrency"] for p in doc["frontier"]]  # at least one level is on it


def test_report_rebuilds_the_sweep_from_its_index_and_run_files(small_sweep):
    tmp, live = small_sweep
    rebuilt = _invoke(["report", str(tmp / "sw" / "sweep.json"), "--json"])
    assert rebuilt["levels"] == live["levels"]
    assert (rebuilt["knee"], rebuilt["frontier"]) == (live["knee"], live["frontier"])
    text = CliRunner().invoke(main, ["report", str(tmp / "sw" / "sweep.json")])
    assert text.exit_code == 0 and "knee:" in text.output and "sessions" in text.output
    rows = (tmp / "csv" / "levels.csv").read_text().splitlines()
    assert rows[0].startswith("concurrency,throughput.total_tps") and len(rows) == 4


def test_a_sweep_index_whose_run_file_is_gone_is_a_one_line_error(small_sweep, tmp_path):
    tmp, _ = small_sweep
    index = orjson.loads((tmp / "sw" / "sweep.json").read_bytes())
    moved = tmp_path / "sweep.json"
    moved.write_bytes(orjson.dumps(index))
    res = CliRunner().invoke(main, ["report", str(moved)])
    assert res.exit_code == 1 and "run file" in res.output and "is missing" in res.output
    assert "Traceback" not in res.output


def test_html_pages_of_a_sweep_and_a_capacity_search(small_sweep, tmp_path):
    pytest.importorskip("matplotlib")
    tmp, _ = small_sweep
    page = tmp_path / "sweep.html"
    res = CliRunner().invoke(main, ["report", str(tmp / "sw" / "sweep.json"), "--html", str(page)])
    assert res.exit_code == 0, res.output
    html = page.read_text()
    for anchor in ('id="levels"', 'id="curves"', 'id="knee"', 'id="frontier"'):
        assert anchor in html
    assert html.count("<svg") == 2 and "<script" not in html


def test_overloaded_knee_on_the_virtual_clock_is_where_its_kv_budget_puts_it(tmp_path):
    doc = _invoke(["sweep", "-c", "1..8", "--sim-profile", "overloaded", "--virtual", "--window", "90", "--warmup",
                   "30", "--json", "-q", "--out", str(tmp_path)])  # fmt: skip
    assert doc["mode"] == "virtual clock" and all(lv["run_file"] for lv in doc["levels"])
    assert 3 <= doc["knee"]["concurrency"] <= 5  # the profile predicts 3.8 (docs/simulated-host.md)
    # a virtual level has its run file as a real-time one does: the report rebuilds every level from them
    rebuilt = _invoke(["report", str(tmp_path / "sweep.json"), "--json"])
    assert rebuilt["knee"] == doc["knee"] and rebuilt["levels"] == doc["levels"]


def test_capacity_on_the_virtual_clock_states_per_gpu_and_per_mw(tmp_path):
    args = ["capacity", "--sim-profile", "moe-8gpu", "--virtual", "--slo", "user_decode_tps_p25>=40"]
    doc = _invoke(
        [*args, "--window", "40", "--warmup", "10", "--power-kw", "5.6", "--json", "-q", "--out", str(tmp_path)]
    )
    n = doc["max_concurrency"]
    assert n >= 2 and doc["first_broken"] == n + 1  # exact to one agent
    assert doc["hardware"]["gpus"] == 8  # the profile's, as nobody said --gpus
    assert doc["per_gpu"] == pytest.approx(n / 8) and doc["per_mw"] == pytest.approx(n / 0.0056)
    assert doc["per_kw"] == pytest.approx(n / 5.6) and doc["per_dollar_hour"] is None  # no price given
    assert len(doc["probes"]) == doc["runs"]  # each level once: a repeat on the virtual clock is the same run
    assert all(p["step"] != "repeat" for p in doc["probes"]) and "deterministic" in doc["uncertainty"]["text"]
    rebuilt = _invoke(["report", str(tmp_path / "capacity.json"), "--json"])
    assert rebuilt["max_concurrency"] == n and rebuilt["probes"] == doc["probes"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sweep", "-c", "4,x"], "expected levels like 1,2,4,8"),
        (["sweep", "--knee", "bend"], "--knee"),
        (["sweep", "--slo", "ttft_p95 fast"], "expected FIGURE OP VALUE"),
        (["sweep", "--host", "ftp://x"], "base URL"),
        (["sweep", "--host", "sim:nonesuch"], "no sim profile 'nonesuch'"),
        (["sweep", "--host", "http://127.0.0.1:9/v1", "--virtual"], "no --host URL"),
        (["capacity", "--slo", "nonesuch_p95<1s", "--virtual", "--max", "2"], "has no figure 'nonesuch_p95'"),
        (
            ["sweep", "--host", "sim:fast", "--host", "sim:default", "--gpus", "1", "--gpus", "2", "--gpus", "3"],
            "given 3 times for 2 hosts",
        ),
    ],
)
def test_bad_options_are_one_line_errors(args, message, tmp_path):
    res = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and message in res.output, res.output
    assert "Traceback" not in res.output


def test_levels_and_hosts_are_read_as_documented():
    assert parse_levels("1..4,8,16") == [1, 2, 3, 4, 8, 16]
    assert parse_levels("8, 2, 2") == [2, 8]
    assert resolve_host(None, "fast") == (None, "fast")
    assert resolve_host("sim:moe-8gpu", "fast") == (None, "moe-8gpu")
    assert resolve_host("http://127.0.0.1:8000/v1", "fast") == ("http://127.0.0.1:8000/v1", "fast")


def test_two_hosts_swept_side_by_side_and_rebuilt(small_sweep, tmp_path):
    tmp, _ = small_sweep
    args = ["sweep", str(tmp / "w.jsonl"), "-c", "1,2", "--window", "0.6", "--warmup", "0.3", "--host", "sim:fast"]
    doc = _invoke([*args, "--host", "sim:default", "--out", str(tmp_path), "--json", "-q"])
    assert doc["kind"] == "host sweeps" and [s["host"] for s in doc["sweeps"]] == ["sim:fast", "sim:default"]
    (pair,) = doc["comparisons"]
    assert [lv["concurrency"] for lv in pair["levels"]] == [1, 2]
    for name in ("1-sim-fast", "2-sim-default"):
        assert (tmp_path / name / "sweep.json").exists() and (tmp_path / name / "c2.jsonl").exists()
    rebuilt = _invoke(["report", str(tmp_path / "compare.json"), "--json"])
    assert rebuilt["comparisons"][0]["levels"] == pair["levels"]


def test_hardware_comes_from_the_options_then_the_hosts_file_then_the_sim_profile(tmp_path):
    from replay.hosts.hardware import hardware_for
    from replay.runner.single_run import RunSpec

    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[hosts.node]\nurl = "http://127.0.0.1:9/v1"\ngpus = 8\npower_kw = 5.6\n')
    node = RunSpec(host="node", hosts_file=str(hosts))
    hw = hardware_for(node)
    assert (hw.gpus, hw.power_kw, hw.price_per_hour) == (8, 5.6, None) and hw.source.startswith("hosts file")
    hw = hardware_for(node, gpus=4, price_per_hour=12.0)
    assert (hw.gpus, hw.power_kw, hw.price_per_hour) == (4, 5.6, 12.0)
    sim = hardware_for(RunSpec(sim_profile="moe-8gpu"))
    assert sim.gpus == 8 and sim.power_kw is None and sim.source == "sim profile moe-8gpu (gpus)"
    assert hardware_for(RunSpec(host="http://127.0.0.1:9/v1")).gpus is None  # a bare URL says nothing
