"""The studies' HTML pages (sweep, capacity search, comparisons) in headless Chromium: they load with no console
error and no request leaving the page, and every picture is drawn. Skipped where Chromium is missing, as the run
report's browser test (tests/reports/test_report_browser.py, whose flags and blank check this reuses)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from replay.cli import main
from tests.reports.test_report_browser import CHROMIUM, FLAGS, _colours
from tests.support.trajectories import simple_turns, write_trajectory

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (apt-get install chromium)")


def _ok(args: list[str]) -> None:
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, tuple[Path, int]]:
    """Each study page and the number of pictures it must show."""
    pytest.importorskip("matplotlib")
    tmp = tmp_path_factory.mktemp("study-pages")
    work = tmp / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(4, output_tokens=16, tool_time_s=0.02))
    virtual = ["--virtual", "--window", "30", "--warmup", "10", "-q"]  # the engine alone: pages in a second
    _ok(["sweep", "-c", "1..8", "--sim-profile", "overloaded", *virtual, "--out", str(tmp / "a"),
         "--html", str(tmp / "sweep.html")])  # fmt: skip
    _ok(["sweep", "-c", "1..8", "--sim-profile", "h100-8b", *virtual, "--out", str(tmp / "b")])
    _ok(["compare", str(tmp / "a" / "sweep.json"), str(tmp / "b" / "sweep.json"), "--html", str(tmp / "sweeps.html")])
    real = ["-c", "2", "--duration", "1.5", "--warmup", "0.5", "-q"]  # the runs page needs records (its noise)
    _ok(["run", str(work), "--host", "sim:fast", "--host", "sim:default", *real, "--out", str(tmp / "r.jsonl")])
    _ok(["compare", str(tmp / "r.1-sim-fast.jsonl"), str(tmp / "r.2-sim-default.jsonl"), "--html",
         str(tmp / "runs.html")])  # fmt: skip
    _ok(["capacity", "--sim-profile", "overloaded", "--slo", "ttft_p95<=2s", "--max", "16", *virtual,
         "--power-kw", "0.7", "--out", str(tmp / "cap"), "--html", str(tmp / "capacity.html")])  # fmt: skip
    return {
        "sweep": (tmp / "sweep.html", 2),  # curves, frontier
        "sweeps": (tmp / "sweeps.html", 1),  # the two sweeps' curves overlaid
        "runs": (tmp / "runs.html", 1),  # the ratios
        "capacity": (tmp / "capacity.html", 1),  # the probes
    }


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    sync_api = pytest.importorskip("playwright.sync_api")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 800},
        )
        try:
            yield context
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.parametrize("name", ["sweep", "sweeps", "runs", "capacity"])
def test_study_page_loads_clean_and_every_picture_is_drawn(pages, browser, name):
    path, pictures = pages[name]
    page = browser.new_page()
    problems: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    url = path.as_uri()

    def only_the_page(route) -> None:
        if route.request.url == url:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_page)
    page.goto(url, wait_until="load")
    assert problems == [] and outside == []
    figures = page.locator("figure")
    assert figures.count() == pictures
    for i in range(figures.count()):
        svg = figures.nth(i).locator("svg")
        box = svg.bounding_box()
        assert box is not None and box["width"] > 600 and box["height"] > 150, (name, i, box)
        assert _colours(svg.screenshot()) > 16, f"{name}: figure {i} looks blank"
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    page.close()
