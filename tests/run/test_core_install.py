"""The core install (no extras) runs every command, or names the extra it needs in one line (issue 24).

`replay report run.jsonl` used to fail on the README's own install with matplotlib's ModuleNotFoundError: the
pictures module imported matplotlib when it was imported, and CI's install had the test extra, so nobody saw it.
Here the commands run in an environment holding the core install only (tests/support/core_env.py), through the
same script CI runs in a venv built by pip (scripts/smoke_commands.py).
"""

from __future__ import annotations

import subprocess

import pytest

from tests.support.core_env import can_import, core_distributions, make_core_env
from tests.support.paths import ROOT

# The commands issue 24 names, each once, and replay export (issue 27) (the script has more; CI runs them all).
STEPS = ("run", "report", "report --json", "report --html", "compare", "sweep --virtual", "claims verify --virtual",
         "import", "inspect", "inspect --plot", "run --ray (no ray)", "export --format llm-d",
         "export sweep.json")  # fmt: skip


@pytest.fixture(scope="module")
def core_python(tmp_path_factory):
    return make_core_env(tmp_path_factory.mktemp("core") / "venv")


def test_the_core_environment_has_the_core_dependencies_and_no_extra(core_python):
    names = {d.metadata["Name"].lower() for d in core_distributions()}
    assert {"aiohttp", "numpy", "click", "hdrhistogram"} <= names
    assert "matplotlib" not in names and "pytest" not in names
    assert can_import(core_python, "replay") and can_import(core_python, "aiohttp")
    for extra in ("matplotlib", "duckdb", "ray", "pytest"):
        assert not can_import(core_python, extra), extra


@pytest.mark.timeout(300)
def test_every_command_runs_on_the_core_install_or_names_its_extra(core_python, tmp_path):
    only = [a for name in STEPS for a in ("--only", name)]
    done = subprocess.run(
        [str(core_python), str(ROOT / "scripts" / "smoke_commands.py"), "--replay", f"{core_python} -m replay",
         "--keep", str(tmp_path), *only],
        capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert sum(line.startswith("ok ") for line in lines) == len(STEPS), done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    page = tmp_path / "r.html"
    args = ["report", str(tmp_path / "run.jsonl"), "--html", str(page)]
    html = subprocess.run([str(core_python), "-m", "replay", *args], capture_output=True, text=True, timeout=60)
    assert html.returncode == 1 and html.stdout == "" and not page.exists()  # nothing done before the error
    assert html.stderr.splitlines() == ["Error: --html needs matplotlib: pip install 'agentic-replay[plots]'"]
