"""A virtual repository per session: files the agent can grep, number, diff and "test" consistently."""

from __future__ import annotations

import random
from dataclasses import dataclass

from workload_gen.data import Project, text, toml
from workload_gen.modules import ModuleGen
from workload_gen.names import camel

FILES: dict[str, str] = toml("repo/files.toml") | {"pyproject": text("repo/pyproject.toml.in")}


@dataclass
class Repo:
    """The files of one made-up project, their test ids, and how they change during the session."""

    files: dict[str, str]
    original: dict[str, str]
    tests: dict[str, list[str]]  # test file -> test ids
    pkg_dir: str
    target: str
    caller_path: str
    test_path: str


def build_repo(rng: random.Random, p: Project) -> Repo:
    """Generate source modules, test modules and the usual top-level files for project ``p``."""
    gen = ModuleGen(rng, p)
    pkg_dir = f"src/{p.name}" if p.layout == "src" else p.name
    files: dict[str, str] = {}
    tests: dict[str, list[str]] = {}
    values = {"name": p.name, "Name": camel(p.name), "NAME": p.name.upper(), "version": p.version, "title": p.title}
    classes = "".join(FILES["error_class"].format_map(values | {"error": e, "kind": e[:-5]}) for e in p.errors)
    files[f"{pkg_dir}/errors.py"] = FILES["errors"].format_map(values | {"classes": classes})
    # target module: the buggy function among generated code
    target = f"{pkg_dir}/{p.module}.py"
    errors = ", ".join(sorted(p.errors))
    text = gen.module(p.module, rng.randint(620, 820), [], [f"from .errors import {errors}"], p.imports)
    text = inject_top(text, p.support, p.buggy, rng)
    files[target] = text
    defs = {p.module: (gen.funcs, gen.classes)}
    # the caller module and the others
    caller_mod = p.others[0]
    for i, mod in enumerate(p.others):
        lines = rng.randint(420, 680) if i < 3 else rng.randint(200, 360)
        local = [f"from .errors import {p.errors[0]}"]
        inject = []
        if mod == caller_mod:
            local.append(f"from .{p.module} import {p.func}")
            inject.append(p.caller)
        files[f"{pkg_dir}/{mod}.py"] = gen.module(mod, lines, inject, local)
        defs[mod] = (gen.funcs, gen.classes)
    quoted = ", ".join(f'"{e}"' for e in p.errors)
    init = {"first_word": p.title.split(" ")[0].lower(), "errors": ", ".join(p.errors), "quoted_errors": quoted}
    files[f"{pkg_dir}/__init__.py"] = FILES["init"].format_map(values | init)
    # tests
    support_names = [line.split()[1].split("(")[0].rstrip(":") for line in p.support.split("\n")
                     if line.startswith(("class ", "def "))]  # fmt: skip
    for mod in (p.module, *p.others):
        funcs, classes = defs[mod]
        if mod == p.module:
            text, ids = gen.test_module(mod, funcs[:6], classes[:3], p.test_imports, [p.func, *support_names])
        else:
            text, ids = gen.test_module(mod, funcs[:5], classes[:2], (), [])
        files[f"tests/test_{mod}.py"] = text
        tests[f"tests/test_{mod}.py"] = ids
    files["tests/conftest.py"] = FILES["conftest"].format_map(values)
    files["pyproject.toml"] = pyproject(p)
    files["README.md"] = FILES["readme"].format_map(values)
    files["CHANGELOG.md"] = FILES["changelog"].format_map(values)
    return Repo(
        files=files,
        original=dict(files),
        tests=tests,
        pkg_dir=pkg_dir,
        target=target,
        caller_path=f"{pkg_dir}/{caller_mod}.py",
        test_path=f"tests/test_{p.module}.py",
    )


def inject_top(text: str, support: str, buggy: str, rng: random.Random) -> str:
    """Add the hand-written helpers and the buggy function to a generated module."""
    marker = "\nlogger = logging.getLogger(__name__)\n"
    head, _, rest = text.partition(marker)
    blocks = rest.split("\n\n\n")
    if support:
        blocks.insert(2, support.rstrip("\n"))
    blocks.insert(rng.randint(3, max(3, len(blocks) - 2)), buggy.rstrip("\n"))
    return head + marker + "\n\n\n".join(blocks)


def pyproject(p: Project) -> str:
    """The project's pyproject.toml; agents read it, so it must agree with the layout and deps."""
    deps = "\n".join(f'    "{d}",' for d in p.deps)
    where = FILES["src_layout"] if p.layout == "src" else ""
    values = {"name": p.name, "version": p.version, "first_word": p.title.split(" ")[0], "deps": deps, "where": where}
    return FILES["pyproject"].format_map(values)
