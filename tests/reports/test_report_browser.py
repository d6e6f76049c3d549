"""The HTML report in a real browser: Debian's headless Chromium, driven by Playwright (no browser download).

It loads with no console error and no request leaving the page, every picture is drawn (a screenshot of each
figure is not one flat colour), it fits a laptop's width, and it prints. Skipped where Chromium or Playwright
is missing; .ci/run installs Chromium.
"""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from replay.cli import main
from tests.support.report_runs import recorded_run

CHROMIUM = Path("/usr/bin/chromium")
# Flags this machine needs (no sandbox as root, no GPU) and nothing that would reach for the network.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (apt-get install chromium)")


@pytest.fixture(scope="module")
def page_file(tmp_path_factory) -> Path:
    pytest.importorskip("matplotlib")
    tmp = tmp_path_factory.mktemp("browser")
    html = tmp / "report.html"
    res = CliRunner().invoke(main, ["report", str(recorded_run(tmp)), "--html", str(html)])
    assert res.exit_code == 0, res.output
    return html


@pytest.fixture
def browser_page(tmp_path: Path):
    """A fresh headless Chromium (its own user data dir) and a page in it; closed afterwards."""
    sync_api = pytest.importorskip("playwright.sync_api")
    profile = tmp_path / "chromium-profile"
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 800},
        )
        try:
            yield context.new_page()
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)


def _colours(png: bytes) -> int:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        return len(im.convert("RGB").getcolors(maxcolors=1 << 20) or ())


def test_report_loads_clean_and_every_picture_is_drawn(page_file: Path, browser_page) -> None:
    page = browser_page
    problems: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    url = page_file.as_uri()

    def only_the_page(route) -> None:
        if route.request.url == url:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_page)
    page.goto(url, wait_until="load")
    assert problems == [] and outside == []
    assert page.title() == "replay report: run.jsonl"
    figures = page.locator("figure")
    assert figures.count() == 6
    for i in range(figures.count()):
        fig = figures.nth(i)
        box = fig.locator("svg").bounding_box()
        assert box is not None and box["width"] > 600 and box["height"] > 150, (i, box)
        shot = fig.locator("svg").screenshot()
        assert _colours(shot) > 16, f"figure {fig.get_attribute('aria-label')!r} looks blank"
    # a laptop's width: nothing wider than the window
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    page.set_viewport_size({"width": 1024, "height": 700})
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")


def test_report_prints(page_file: Path, browser_page) -> None:
    page = browser_page
    page.goto(page_file.as_uri(), wait_until="load")
    page.emulate_media(media="print")
    assert page.locator("nav").is_hidden()  # the table of contents is for screens
    pdf = page.pdf(format="A4")
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
    assert pdf.startswith(b"%PDF") and pages >= 3, pages  # tables and six pictures do not fit on one or two
