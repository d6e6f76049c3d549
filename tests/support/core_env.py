"""A Python environment holding replay's core install only (no extras), made in a second from the test venv.

A fresh virtual environment without pip whose only packages are links to the distributions the core install
depends on (``agentic-replay``'s requirements without extras, and theirs, followed through the installed metadata),
and the checkout itself. Whatever an extra brings (matplotlib, duckdb, ray, the test tools) cannot be imported
there, so a command that needs one must say so, as on a user's ``pip install .``. CI does the same for real in a
venv built by pip (``.ci/run``); this one lets the test suite check it on every run.
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from tests.support.paths import ROOT

PROJECT = "agentic-replay"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def core_distributions(project: str = PROJECT) -> list[metadata.Distribution]:
    """The installed distributions of ``project``'s core requirements, and of theirs (markers judged here)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [project]
    while todo:
        name = _norm(todo.pop())
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement for another platform or Python
        seen[name] = dist
        for text in dist.requires or ():
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue  # an extra's requirement (or another platform's)
            todo.append(req.name)
    return [d for n, d in seen.items() if n != _norm(project)]


def _top_level(dist: metadata.Distribution) -> set[str]:
    """The names a distribution puts at the top of site-packages (its packages, modules and metadata)."""
    names = set()
    for f in dist.files or ():
        first = Path(str(f)).parts[0]
        if first not in ("..", "__pycache__") and not first.endswith(".pth"):
            names.add(first)
    return names


def make_core_env(where: Path) -> Path:
    """A venv at ``where`` with the core install only; returns its Python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    purelib = Path(
        subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                       check=True, capture_output=True, text=True).stdout.strip()
    )  # fmt: skip
    here = Path(sysconfig.get_paths()["purelib"])
    for dist in core_distributions():
        base = Path(str(dist.locate_file("")))
        for name in _top_level(dist):
            source = base / name
            if source.exists() and not (purelib / name).exists():
                (purelib / name).symlink_to(source)
    (purelib / "replay-checkout.pth").write_text(f"{ROOT}\n")
    assert here != purelib
    return python


def can_import(python: Path, module: str) -> bool:
    code = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 1)"
    return subprocess.run([str(python), "-c", code]).returncode == 0
