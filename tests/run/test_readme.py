"""README's promise: it opens with the two commands, and CI runs the same test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), flags=re.S)


def test_readme_opens_with_install_and_run_then_tests() -> None:
    run, tests = _blocks()[:2]
    assert "pip install" in run and run.rstrip().endswith("replay run")
    assert "pip install" in tests and "pytest" in tests


def test_ci_runs_the_readme_test_command() -> None:
    tests = _blocks()[1].strip()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert any(line.strip().startswith(tests) for line in ci)
