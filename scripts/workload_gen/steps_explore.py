"""Exploration steps: orient in the repository, search, read files."""

from __future__ import annotations

from workload_gen.codegen import VERBS
from workload_gen.names import plural
from workload_gen.outputs import fake_sha
from workload_gen.session_base import SessionBase, Step


class ExploreSteps(SessionBase):
    # ---- exploration steps ------------------------------------------------------------------------------
    def step_ls_root(self, budget: int) -> Step:
        p, rng = self.p, self.rng
        entries = [
            ("d", ".", 4096), ("d", "..", 4096), ("f", ".editorconfig", 311), ("d", ".git", 4096),
            ("d", ".github", 4096), ("f", ".gitignore", rng.randint(300, 900)),
            ("f", ".pre-commit-config.yaml", rng.randint(600, 1400)),
            ("f", "CHANGELOG.md", rng.randint(8000, 60000)), ("f", "CONTRIBUTING.md", rng.randint(1500, 5000)),
            ("f", "LICENSE", 1069), ("f", "Makefile", 742), ("f", "README.md", rng.randint(3000, 12000)),
            ("d", "docs", 4096), ("f", "pyproject.toml", len(self.repo.files["pyproject.toml"])),
            ("d", "scripts", 4096), ("d", "tests", 4096), ("f", "tox.ini", rng.randint(500, 1500)),
        ]  # fmt: skip
        if p.layout == "src":
            entries.append(("d", "src", 4096))
        else:
            entries += [("d", p.name, 4096), ("d", f"{p.name}.egg-info", 4096)]
        entries.sort(key=lambda e: e[1].lower().lstrip("."))
        month = rng.choice(("Jan", "Feb", "Mar", "Apr", "May", "Jun"))
        out = [f"total {rng.randint(80, 220)}"]
        for kind, name, size in entries:
            perm = "drwxr-xr-x" if kind == "d" else "-rw-r--r--"
            links = rng.randint(2, 9) if kind == "d" else 1
            stamp = f"{month} {rng.randint(10, 28)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
            out.append(f"{perm} {links:2d} root root {size:5d} {stamp} {name}")
        thought = self.say(
            f'I need to fix "{p.title}". First I\'ll look at the repository layout to see where the {p.name} '
            "package lives, how the tests are organised and which tooling the project uses.",
            f"Let me start by getting an overview of the repository: the package layout, the test directory and "
            f"the configuration files. The issue is about `{p.func}`, which I'll look for right after this.",
            f"The report points at `{p.func}` in {p.name}. Before reading code I want to see the top-level "
            "structure of the checkout, so that I know where the sources and the tests are.",
        )
        thought += " " + self.say(
            "The issue includes a reproduction, which I'll turn into a script once I know how the package is laid out.",
            "I'll also check how the tests are run here, because I want a failing regression test before the fix.",
            "The report reads like a small, local bug, but I want to confirm that before I change anything.",
        )
        layout = "a `src/` layout" if p.layout == "src" else "a flat layout"
        note = (
            f"The repository uses {layout} with the package in `{self.repo.pkg_dir}` and tests in `tests/`; it is "
            "configured through `pyproject.toml`, with a `tox.ini` and a pre-commit config next to it."
        )
        return Step(thought, "ls -la", "\n".join(out), note=note)

    def step_cat_pyproject(self, budget: int) -> Step:
        p = self.p
        thought = self.say(
            "I'll read pyproject.toml to learn the supported Python versions, the dependencies and how pytest is "
            "configured (addopts, warning filters) before running anything.",
            "Before touching the code I want to know how the tests are configured, since warnings might be "
            "turned into errors and the package layout matters for imports. Let me read pyproject.toml.",
        )
        deps = ", ".join(f"`{d.split('>')[0]}`" for d in p.deps)
        what = "runtime dependencies" if len(p.deps) > 1 else "its only runtime dependency"
        note = (
            f"pyproject.toml lists {deps} as {what}, and pytest runs with `-ra --strict-markers`; "
            f"DeprecationWarnings raised from {p.name} are errors, so my change must not introduce any."
        )
        return Step(thought, "cat pyproject.toml", self.repo.files["pyproject.toml"], note=note)

    def step_ls_pkg(self, budget: int) -> Step:
        rng = self.rng
        d = self.repo.pkg_dir
        names = sorted(path.rsplit("/", 1)[1] for path in self.repo.files if path.startswith(d + "/"))
        out = [f"total {rng.randint(60, 200)}"]
        for name in [".", "..", "__pycache__", *names, "py.typed"]:
            is_dir = name in (".", "..", "__pycache__")
            size = 4096 if is_dir else len(self.repo.files.get(f"{d}/{name}", ""))
            perm = "drwxr-xr-x" if is_dir else "-rw-r--r--"
            stamp = f"Mar {rng.randint(10, 28)} 09:{rng.randint(10, 59)}"
            out.append(f"{perm} {2 if is_dir else 1:2d} root root {size:6d} {stamp} {name}")
        thought = self.say(
            f"The sources are under `{d}`. Let me list the package to see which modules exist besides "
            f"`{self.p.module}.py`, so I know where related logic might live.",
            f"I'd like to see all modules of the package in `{d}` with their sizes; that helps me judge how much "
            f"code surrounds `{self.p.func}` and which modules could be callers.",
        )
        size = len(self.repo.files[self.repo.target])
        note = f"The package has {len(names)} modules; `{self.p.module}.py` is one of the larger ones ({size:,} bytes)."
        return Step(thought, f"ls -la {d}", "\n".join(out), note=note)

    def step_wc(self, budget: int) -> Step:
        rows = sorted((len(self.lines(path)), path) for path in self.repo.files if path.endswith(".py"))
        total = sum(r for r, _ in rows)
        out = [f"{n:6d} ./{path}" for n, path in rows] + [f"{total:6d} total"]
        thought = self.say(
            "To plan my reading I'll check how large the Python files are; if the target module is long I'd "
            "rather read it in ranges than dump it at once.",
            "Let me get a sense of the code size per module, so that I can read the relevant parts in reasonable "
            "chunks.",
        )
        size = len(self.lines(self.repo.target))
        note = f"`{self.repo.target}` has {size} lines; the whole code base is about {total:,}."
        cmd = "find . -name '*.py' -not -path './.git/*' | xargs wc -l | sort -n"
        return Step(thought, cmd, "\n".join(out), note=note)

    def step_git_log(self, budget: int) -> Step:
        rng = self.rng
        msgs = []
        for _ in range(rng.randint(8, 15)):
            verb = rng.choice(("Fix", "Add", "Refactor", "Document", "Speed up", "Deprecate", "Test", "Tidy"))
            noun = rng.choice(self.p.nouns)
            tail = rng.choice(("handling", "support", "edge cases", "validation", "typing", "docs", "caching"))
            msgs.append(f"{fake_sha(rng, 7)} {verb} {noun} {tail} (#{rng.randint(120, 980)})")
        thought = self.say(
            f"Let me check the recent history of `{self.repo.target}`; if `{self.p.func}` changed recently the "
            "commit message may explain the intent of the current behaviour.",
            "Before changing anything I want to know whether this code was touched recently, in case the bug is a "
            "regression with an obvious culprit commit.",
        )
        note = (
            f"The history of `{self.repo.target}` is a series of small fixes and refactors; none of the "
            f"{len(msgs)} commits obviously introduced the bug."
        )
        return Step(thought, f"git log --oneline -n 15 -- {self.repo.target}", "\n".join(msgs), note=note)

    def step_ls_tests(self, budget: int) -> Step:
        names = sorted(path[6:] for path in self.repo.files if path.startswith("tests/"))
        thought = self.say(
            f"Let me see which test modules exist, so that I know where a regression test for `{self.p.func}` "
            "would belong.",
            f"I'll list the tests directory to find the tests that cover `{self.p.module}`.",
        )
        note = f"Tests are split per module, so `{self.repo.test_path}` is where tests for `{self.p.module}` go."
        return Step(thought, "ls tests", "\n".join(["__init__.py", *names]), note=note)

    def grep_hits(self, needle: str, under: tuple[str, ...]) -> list[str]:
        hits = []
        for path in sorted(self.repo.files):
            if not path.endswith(".py") or not path.startswith(under):
                continue
            for n, line in enumerate(self.lines(path), 1):
                if needle in line:
                    hits.append(f"{path}:{n}:{line}")
        return hits

    def grep_note(self, needle: str, hits: list[str]) -> str:
        if not hits:
            return f"The search for `{needle}` found nothing relevant."
        files: dict[str, int] = {}
        for h in hits:
            path = h.split(":", 1)[0].removeprefix("./")
            files[path] = files.get(path, 0) + 1
        top = max(files, key=lambda f: (files[f], f))
        return f"`{needle}` appears {len(hits)} times in {len(files)} files, most often in `{top}`."

    def step_grep_def(self, budget: int) -> Step:
        p = self.p
        hits = self.grep_hits(p.func, (self.repo.pkg_dir, "tests"))
        thought = self.say(
            f"The issue mentions `{p.func}`. Let me find where it is defined and where it is used across the "
            "package and the tests.",
            f"I'll search for `{p.func}` to locate its definition and its callers; that tells me which module to "
            "read first.",
            f"First I need to locate `{p.func}`. A grep over the sources and tests should show the definition and "
            "the call sites.",
        )
        line = self.func_span(self.repo.target, p.func)[0]
        callers = [h for h in hits if h.startswith(self.repo.caller_path) and "import" not in h]
        cline = callers[0].split(":")[1] if callers else "?"
        note = (
            f"`{p.func}` is defined at `{self.repo.target}:{line}` and called from `{self.repo.caller_path}:{cline}`."
        )
        return Step(thought, f'grep -rn "{p.func}" {self.repo.pkg_dir} tests', "\n".join(hits), note=note)

    def grep_pick(
        self, needles: list[str], under: tuple[str, ...], budget: int, dot: bool
    ) -> tuple[str, int, list[str]]:
        """The needle and ``head -n`` limit whose output is closest to ``budget`` tokens."""
        best: tuple[int, str, int, list[str]] | None = None
        for needle in needles:
            hits = [("./" if dot else "") + h for h in self.grep_hits(needle, under)]
            for limit in (30, 50, 80, 120):
                size = self.count("\n".join(hits[:limit]))
                if best is None or abs(size - budget) < best[0]:
                    best = (abs(size - budget), needle, limit, hits[:limit])
                if len(hits) <= limit:
                    break
        assert best is not None
        return best[1], best[2], best[3]

    def step_grep_callers(self, budget: int) -> Step:
        p = self.p
        needles = [p.errors[0], p.module, p.errors[-1]]
        needle, limit, hits = self.grep_pick(needles, (self.repo.pkg_dir, "tests"), budget, dot=True)
        thought = self.say(
            f"I want to know how `{needle}` is used across the code base, to make sure a change in `{p.func}` "
            "stays consistent with how the other modules signal and handle errors.",
            f"Let me check the other places that reference `{needle}`; if several call paths depend on the current "
            "behaviour I need to keep them in mind when fixing it.",
            f"A wider search for `{needle}` should show how the rest of the package interacts with this part of the "
            "code, including tests that might pin down the current behaviour.",
        )
        cmd = f'grep -rn "{needle}" --include="*.py" . | head -n {limit}'
        return Step(thought, cmd, "\n".join(hits), note=self.grep_note(needle, hits))

    def step_grep_misc(self, budget: int) -> Step:
        rng = self.rng
        words = rng.sample(self.p.nouns, k=3)
        needles = [
            *words,
            f"self._{plural(words[0])}",
            "raise ",
            "logger.debug",
            "isinstance(",
            f"def {rng.choice(VERBS)}_",
        ]
        needle, limit, hits = self.grep_pick(needles, (self.repo.pkg_dir,), budget, dot=False)
        thought = self.say(
            f"To see the conventions of this package I'll grep for `{needle}` across the sources. Knowing the "
            "existing patterns should keep my fix idiomatic for this code base.",
            f"Let me look at how `{needle}` is used in the package; I want to see whether other code paths make the "
            f"same assumption as `{self.p.func}`.",
            f"I'll search the package for `{needle}`. If similar logic exists elsewhere it may have the same bug, or "
            "it may show how the authors handled this case before.",
        )
        cmd = f'grep -rn "{needle}" {self.repo.pkg_dir} | head -n {limit}'
        return Step(thought, cmd, "\n".join(hits), note=self.grep_note(needle, hits))

    def dump(self, path: str, budget: int, thought: str, start: int | None = None) -> Step:
        total_lines = len(self.lines(path))
        if start is None:
            start = self.read.get(path, 0) + 1
            if start > total_lines - 20:
                start = 1
        start, end = self.span_for(path, start, budget)
        self.read[path] = min(end, total_lines)
        if path not in self.seen_files:
            self.seen_files.append(path)
        step = Step(thought, f"nl -ba {path} | sed -n '{start},{end}p'", self.nl(path, start, end))
        step.note = self.describe(path, start, end)
        return step

    def step_dump_target(self, budget: int) -> Step:
        p, path = self.p, self.repo.target
        hunch = p.hunch[0].upper() + p.hunch[1:]
        thought = self.say(
            f"I'll read `{path}` from the top: the imports, constants and helpers `{p.func}` relies on, and how "
            f"the module raises errors. {hunch}.",
            f"Let me read the module from the beginning, including the function itself, so that I understand the "
            f"surrounding conventions before settling on a theory. {hunch}.",
        )
        return self.dump(path, budget, thought, start=1)

    def step_dump_target_more(self, budget: int) -> Step:
        p, path = self.p, self.repo.target
        thought = self.say(
            f"I'll continue with the next range of `{path}` to see the rest of the module, in particular any code "
            f"that builds on `{p.func}` or duplicates its logic.",
            f"I have not seen everything in the module that interacts with `{p.func}` yet. Let me read further "
            "down the file.",
        )
        return self.dump(path, budget, thought)

    def step_dump_other(self, budget: int) -> Step:
        p = self.p
        candidates = [self.repo.caller_path] + [f"{self.repo.pkg_dir}/{m}.py" for m in p.others[1:]]
        unseen = [c for c in candidates if c not in self.seen_files]
        path = unseen[0] if unseen else self.rng.choice(candidates)
        if path == self.repo.caller_path:
            thought = self.say(
                f"`{path}` calls `{p.func}`. Reading the caller tells me what it expects, and whether a fix in the "
                "function itself is safe or the caller compensates for the current behaviour somewhere.",
                f"Let me read the caller in `{path}`; if it already works around the bug, fixing `{p.func}` could "
                "double-correct the result.",
            )
        elif self.patched:
            thought = self.say(
                f"Let me double-check `{path}`, which shares data types with `{p.module}`, to be sure nothing there "
                "relied on the old behaviour.",
                f"One more consistency check: `{path}` works with the same objects, and I want to confirm it does "
                f"not duplicate the logic I just changed in `{p.func}`.",
            )
        else:
            thought = self.say(
                f"I'd like to look at `{path}` as well. It does not call `{p.func}` directly, but it shares the "
                "same data types, and I want to be sure no other path produces the same wrong result.",
                f"To understand the data model used around `{p.func}` I'll read `{path}`, which defines related "
                "classes.",
            )
        noun = self.rng.choice(p.nouns)
        focus = self.say(
            f"In particular I'm looking for code that builds {plural(noun)} or catches `{p.errors[0]}`.",
            f"I'll pay attention to how {plural(noun)} flow through it and to any validation done before "
            f"`{p.func}` is reached.",
            "I mostly care about the public entry points and what they assume about the values they pass on.",
            f"If this module has its own copy of the logic in `{p.func}`, it would need the same fix.",
            "Skimming it now also tells me which tests are likely to be affected by a behaviour change.",
        )
        return self.dump(path, budget, f"{thought} {focus}")

    def step_dump_test(self, budget: int) -> Step:
        path = self.repo.test_path
        thought = self.say(
            f"Let me read the existing tests in `{path}` to see how this module is tested today and which helpers "
            "I can reuse for a regression test.",
            f"Before writing a test I want to follow the style of `{path}`: naming, parametrisation and imports.",
        )
        step = self.dump(path, budget, thought, start=1)
        step.note = (
            f"The tests in `{path}` are plain functions with a `make_item` helper and `pytest.mark.parametrize`; "
            f"there is no test for `{self.p.func}` yet."
        )
        return step

    def step_dump_func(self, budget: int) -> Step:
        path = self.repo.target
        start, end = self.func_span(path, self.p.func)
        thought = self.say(
            "The replacement did not match: `pattern not found`. My copy of the old block must differ from the "
            f"file, probably in indentation. Let me print the exact lines of `{self.p.func}` again, with a line of "
            "context on each side, and copy the block from there.",
            "The guarded replacement refused to run because the pattern was not found, so I got the existing text "
            f"wrong. I'll look at the exact current source of `{self.p.func}` before trying again.",
        )
        cmd = f"nl -ba {path} | sed -n '{start - 2},{end + 2}p'"
        return Step(thought, cmd, self.nl(path, start - 2, end + 2), reacts=True)
