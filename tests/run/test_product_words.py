"""The product's files speak of the product: no "issue N" of its development, and no path of a development
machine, in the docs, the README or the package (user-visible strings and comments alike)."""

from __future__ import annotations

import re

from tests.support.paths import ROOT

ISSUE = re.compile(r"\bissues? ?#?\d+", re.IGNORECASE)
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|root|home/\w+)/")


def _files() -> list:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*")), *sorted((ROOT / "replay").rglob("*.py"))]
    return [f for f in files if f.is_file() and f.suffix in (".md", ".py", ".toml", ".json", ".txt")]


def test_no_issue_numbers_nor_machine_paths_in_the_product() -> None:
    found = []
    for path in _files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if ISSUE.search(line) or MACHINE_PATH.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not found, "\n".join(found)
    assert ISSUE.search("as in issue 11") and ISSUE.search("Issue #12") and MACHINE_PATH.search("at /work/shared/x")
