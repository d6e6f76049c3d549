"""replay history on real runs of the embedded simulated host: add (idempotent), list, show --json and --html.

The figures a history keeps are each run's own, three ways: the run's live ``--json``, ``replay report RUN --json``
(offline), and an independent recount of the run file's raw records (tests/support/oracle.py, which imports
nothing of replay). The page loads in Debian's headless Chromium with no console error and one chart per figure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from replay.cli import main
from tests.support import oracle

FIGURES = ("throughput.total_tps", "throughput.output_tps", "ttft_s.p50", "ttft_s.p95", "e2e_s.p50",
           "user_decode_tps.p25", "user_decode_tps.p50", "cache.host_hit_ratio", "error_rate")  # fmt: skip


def _get(summary: dict, name: str) -> float | None:
    node = summary
    for key in name.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node  # type: ignore[return-value]


def short_run(out: Path, seed: int) -> dict:
    cmd = [sys.executable, "-m", "replay", "run", "-c", "2", "--tool-time", "none", "--duration", "4", "--warmup",
           "1", "--window", "1", "--seed", str(seed), "--json", "-q", "--out", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 3), done.stderr[-2000:]  # 3: the busy machine held the client up (not judged)
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def nights(tmp_path_factory) -> tuple[Path, list[Path], list[dict]]:
    tmp = tmp_path_factory.mktemp("history")
    runs = [tmp / f"night-{i}.jsonl" for i in range(3)]
    live = [short_run(r, seed) for seed, r in enumerate(runs)]
    hist = tmp / "nights.db"
    res = CliRunner().invoke(main, ["history", "add", *map(str, runs), "--file", str(hist)])
    assert res.exit_code == 0, res.output
    return hist, runs, live


def invoke(*args: str) -> str:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def test_each_night_is_in_the_history_once_with_its_own_figures(nights):
    hist, runs, live = nights
    res = CliRunner().invoke(main, ["history", "add", str(runs[1]), "--file", str(hist)])  # again: no second row
    assert res.exit_code == 0 and "already in the history" in res.stderr
    listed = json.loads(invoke("history", "list", "--file", str(hist), "--json"))
    assert [Path(n["run"]).name for n in listed["nights"]] == [r.name for r in runs]
    assert len(listed["series"]) == 1  # same model, workload and options; the seed is not an identity
    assert {n["simulated_host"] for n in listed["nights"]} == {"default"}
    doc = json.loads(invoke("history", "show", "--file", str(hist), "--json"))
    assert set(doc["history"]) == set(FIGURES)
    for i, run in enumerate(runs):
        offline = json.loads(invoke("report", str(run), "--json"))
        raw = oracle.figures(oracle.read(run))
        for name in FIGURES:
            point = doc["history"][name]["points"][i]
            assert point["value"] == _get(offline, name) == _get(live[i], name), (run, name)
        point = {name: doc["history"][name]["points"][i]["value"] for name in FIGURES}
        assert point["throughput.total_tps"] == pytest.approx(raw["total_tps"], rel=1e-9)
        assert point["throughput.output_tps"] == pytest.approx(raw["output_tps"], rel=1e-9)
        assert point["error_rate"] == raw["error_rate"]


def test_the_page_draws_one_chart_per_figure_each_night_a_link(nights, tmp_path):
    hist, runs, _ = nights
    page = tmp_path / "nights.html"
    invoke("history", "show", "--file", str(hist), "--html", str(page))
    html = page.read_text()
    assert html.count("<figure") == len(FIGURES)
    assert html.count('class="night"') == len(FIGURES) * len(runs)
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    for run in runs:  # a run's link: its file (no report beside it yet), relative to the page
        assert f'href="{os.path.relpath(run, tmp_path)}"' in html
    report = runs[0].with_suffix(".html")  # once its report is written beside it, the report
    report.write_text("<html></html>")
    try:
        invoke("history", "show", "--file", str(hist), "--html", str(page))
        assert f'href="{os.path.relpath(report, tmp_path)}"' in page.read_text()
    finally:
        report.unlink()


def test_a_missing_history_and_a_killed_run_are_refused_by_name(nights, tmp_path):
    _, runs, _ = nights
    res = CliRunner().invoke(main, ["history", "list", "--file", str(tmp_path / "none.db")])
    assert res.exit_code == 1 and "none.db: no such history file" in res.output
    torn = tmp_path / "killed.jsonl"
    lines = runs[0].read_bytes().splitlines(keepends=True)
    torn.write_bytes(b"".join(line for line in lines if b'"type":"footer"' not in line))
    res = CliRunner().invoke(main, ["history", "add", str(torn), "--file", str(tmp_path / "h.db")])
    assert res.exit_code == 1 and "killed.jsonl: the run did not finish" in res.output


CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (apt-get install chromium)")
def test_the_page_loads_clean_in_a_browser(nights, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    from tests.reports.test_report_browser import FLAGS

    hist, _, _ = nights
    page_file = tmp_path / "nights.html"
    invoke("history", "show", "--file", str(hist), "--html", str(page_file))
    problems: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(page_file.as_uri(), wait_until="load")
            assert problems == []
            assert page.locator("figure svg").count() == len(FIGURES)
            box = page.locator("figure svg").first.bounding_box()
            assert box is not None and box["width"] > 600
        finally:
            browser.close()


def test_without_the_history_extra_show_names_it_in_one_line(nights, monkeypatch):
    hist, runs, _ = nights
    monkeypatch.setitem(sys.modules, "ruptures", None)  # import ruptures: ImportError, as in the core install
    res = CliRunner().invoke(main, ["history", "show", "--file", str(hist), "--json"])
    assert res.exit_code == 0, res.output
    said = [line for line in res.stderr.splitlines() if "agentic-replay[history]" in line]
    assert len(said) == 1 and said[0].startswith("no change points:")
    doc = json.loads(res.stdout)
    assert all(f["change_points"] is None for f in doc["history"].values())  # not computed, not "none found"
    assert len(doc["history"]["throughput.total_tps"]["points"]) == len(runs)
