"""Test runs: pytest output rendered from the virtual repository, failures included."""

from __future__ import annotations

from workload_gen.codegen import WORDS
from workload_gen.data import Failure
from workload_gen.outputs import banner, fake_sha
from workload_gen.session_base import SessionBase, Step


class TestSteps(SessionBase):
    # ---- tests ----------------------------------------------------------------------------------------
    def pytest_header(self, n: int, verbose: bool) -> list[str]:
        return [
            banner("test session starts"),
            f"platform linux -- Python {self.pyver}, pytest-{self.pytest_ver}, pluggy-1.5.0"
            + (" -- /usr/local/bin/python" if verbose else ""),
            *(["cachedir: .pytest_cache"] if verbose else []),
            "rootdir: /testbed",
            "configfile: pyproject.toml",
            f"plugins: {self.plugins}",
            f"collected {n} items",
            "",
        ]

    def progress(self, path: str, ids: list[str], failing: set[str], done: int, total: int) -> list[str]:
        marks = "".join("F" if i in failing else "." for i in ids)
        out = []
        prefix = f"{path} "
        while marks:
            room = 80 - len(prefix) - 7
            chunk, marks = marks[:room], marks[room:]
            done += len(chunk)
            out.append(f"{prefix}{chunk}".ljust(73) + f"[{int(100 * done / total):3d}%]")
            prefix = ""
        return out

    def failure_block(self, f: Failure) -> list[str]:
        path = self.repo.test_path
        src = self.lines(path)
        name = f.test_id.split("[")[0]
        start = next(i for i, line in enumerate(src) if line.startswith(f"def {name}("))
        first = start
        while first > 0 and src[first - 1].startswith("@"):
            first -= 1
        mark = next(i for i in range(start, len(src)) if f.marker in src[i])
        out = [banner(f.test_id, "_"), ""]
        if f.locals:
            out += [line.strip() for line in f.locals.split(",")] + [""]
        for i in range(first, mark + 1):
            out.append((("> " if i == mark else "  ") + "  " + src[i]).rstrip())
        pad = " " * (len(src[mark]) - len(src[mark].lstrip()))
        out += [f"E   {pad}{line}".rstrip() for line in f.lines]
        kind = "Failed" if "DID NOT RAISE" in f.lines[0] else "AssertionError"
        return [*out, "", f"{path}:{mark + 1}: {kind}"]

    def unrelated_failure(self, test: str) -> list[str]:
        path, name = test.split("::")
        return [
            banner(name, "_"),
            "",
            f"    def {name}():",
            ">       import yaml",
            "E       ModuleNotFoundError: No module named 'yaml'",
            "",
            f"{path}:{self.unrelated_line}: ModuleNotFoundError",
        ]

    def warnings_section(self, files: list[str], count: int) -> list[str]:
        """A pytest warnings summary: third-party deprecations and resource warnings, as real suites have."""
        if count <= 0:
            return []
        rng = self.rng
        out = ["", banner("warnings summary")]
        for k in range(count):
            path = files[k % len(files)]
            ids = self.repo.tests[path]
            for tid in rng.sample(ids, k=min(len(ids), rng.randint(1, 3))):
                out.append(f"{path}::{tid}")
            mod = rng.choice(self.p.others)
            line = rng.randint(20, 400)
            out += rng.choice(
                (
                    [f"  /testbed/{self.repo.pkg_dir}/{mod}.py:{line}: PendingDeprecationWarning: passing "
                     f"`strict` positionally is deprecated and will stop working in {self.p.name} "
                     f"{int(self.p.version.split('.')[0]) + 1}.0; use strict=...",
                     "    warnings.warn("],
                    ["  /usr/local/lib/python3.11/site-packages/_pytest/python.py:194: ResourceWarning: unclosed file "
                     f"<_io.TextIOWrapper name='/tmp/pytest-of-root/pytest-0/{tid[:40]}0/{rng.choice(WORDS)}.json' "
                     "mode='r' encoding='UTF-8'>", "    result = testfunction(**testargs)"],
                    ["  /usr/local/lib/python3.11/site-packages/dateutil/tz/tz.py:37: DeprecationWarning: "
                     "datetime.datetime.utcfromtimestamp() is deprecated and scheduled for removal in a future "
                     "version. Use timezone-aware objects to represent datetimes in UTC: "
                     "datetime.datetime.fromtimestamp(timestamp, datetime.UTC).",
                     "    EPOCH = datetime.datetime.utcfromtimestamp(0)"],
                )
            )  # fmt: skip
            out.append("")
        out.append("-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html")
        return out

    def run_tests(
        self,
        files: list[str],
        verbose: bool,
        failing: set[str],
        extra_fail: str | None = None,
        warnings: int = 0,
    ) -> str:
        total = sum(len(self.repo.tests[f]) for f in files)
        out = self.pytest_header(total, verbose)
        done = 0
        extra_id = extra_fail.split("::", 1)[1] if extra_fail else ""
        for path in files:
            ids = self.repo.tests[path]
            fails = set(failing) if path == self.repo.test_path else set()
            if extra_fail and extra_fail.startswith(path + "::"):
                fails.add(extra_id)
            if verbose:
                for tid in ids:
                    done += 1
                    res = "FAILED" if tid in fails else "PASSED"
                    out.append(f"{path}::{tid} {res}".ljust(73) + f"[{int(100 * done / total):3d}%]")
            else:
                out += self.progress(path, ids, fails, done, total)
                done += len(ids)
        nfail = len(failing) + (1 if extra_fail else 0)
        if nfail:
            out += ["", banner("FAILURES")]
            for f in self.p.failures:
                if f.test_id in failing:
                    out += self.failure_block(f)
            if extra_fail:
                out += self.unrelated_failure(extra_fail)
        out += self.warnings_section(files, warnings)
        if nfail:
            out.append(banner("short test summary info"))
            for f in self.p.failures:
                if f.test_id in failing:
                    out.append(f"FAILED {self.repo.test_path}::{f.test_id} - {f.lines[0]}"[:200])
            if extra_fail:
                out.append(f"FAILED {extra_fail} - ModuleNotFoundError: No module named 'yaml'")
        secs = self.rng.uniform(0.3, 3.0) * (1 + total / 150)
        parts = [f"{nfail} failed"] if nfail else []
        parts.append(f"{total - nfail} passed")
        if warnings:
            parts.append(f"{warnings * 2} warnings")
        out.append(banner(f"{', '.join(parts)} in {secs:.2f}s"))
        return "\n".join(out)

    def step_pytest_fail(self, budget: int) -> Step:
        p = self.p
        failing = {f.test_id for f in p.failures}
        path = self.repo.test_path
        base = f"python -m pytest {path}"
        candidates = [
            (f"{base} -q -p no:cacheprovider", self.run_tests([path], False, failing)),
            (f"{base} -v -p no:cacheprovider", self.run_tests([path], True, failing)),
        ]
        cmd, out = self.closest(candidates, budget)
        thought = self.say(
            "Now I'll run the test module to confirm the new tests fail on the current code, and for the reason "
            "described in the issue rather than because of a mistake in the test. An import error or a typo in "
            "the test would also fail, and I want to rule that out before touching the library.",
            f"Let me run `{path}` and check that exactly the new regression tests fail, with assertion errors that "
            "match the wrong values from the reproduction. Existing tests in the module should still pass, which "
            "also tells me the file still imports cleanly after my append.",
        )
        self.last_tests = f"{len(failing)} failed (the new tests), the rest passed"
        first = p.failures[0].lines[0]
        first = first if len(first) <= 100 else first[:90].rstrip() + " ..."
        n_old = len(self.repo.tests[path]) - len(p.new_ids)
        fails = "1 test fails, the new one," if len(failing) == 1 else f"{len(failing)} tests fail, all of them new,"
        note = f"{fails} with `{first}`; the {n_old} existing tests pass."
        return Step(thought, cmd, out, rc=1, note=note)

    def step_pytest_pass(self, budget: int) -> Step:
        path = self.repo.test_path
        neighbour = f"tests/test_{self.p.others[0]}.py"
        both = f"{path} {neighbour}"
        candidates = [
            (f"python -m pytest {path} -q -p no:cacheprovider", self.run_tests([path], False, set())),
            (f"python -m pytest {path} -v -p no:cacheprovider", self.run_tests([path], True, set())),
            (f"python -m pytest {both} -q -p no:cacheprovider", self.run_tests([path, neighbour], False, set())),
            (f"python -m pytest {both} -v -p no:cacheprovider", self.run_tests([path, neighbour], True, set())),
        ]  # fmt: skip
        cmd, out = self.closest(candidates, budget)
        ran = [f for f in cmd.split() if f.startswith("tests/")]
        n = sum(len(self.repo.tests[f]) for f in ran)
        self.last_tests = f"{n} passed in {' and '.join(f'`{f}`' for f in ran)}"
        thought = self.say(
            "With the fix applied, let me rerun the tests; the new ones should pass and the existing ones should "
            f"be unaffected. If an existing test breaks, it means some caller relied on the old behaviour of "
            f"`{self.p.func}`, and I need to understand that before going further.",
            f"Let me run the tests again to see whether the regression tests pass now, together with the tests of "
            f"`{self.p.others[0]}`, which calls `{self.p.func}`. Those are the tests most likely to notice a "
            "change in the function's output.",
        )
        return Step(thought, cmd, out, note=f"All {n} tests pass, including the new regression tests.")

    def step_pytest_verbose(self, budget: int) -> Step:
        files = [self.repo.test_path]
        others = [f for f in sorted(self.repo.tests) if f != self.repo.test_path]
        while sum(len(self.repo.tests[f]) for f in files) * 22 < budget and others:
            files.append(others.pop(0))
        out = self.run_tests(files, True, set())
        n = sum(len(self.repo.tests[f]) for f in files)
        thought = self.say(
            "Let me run the tests of the affected module together with its neighbours in verbose mode, so I can "
            "see every test name and confirm that nothing was skipped silently.",
            "I'll run the related test modules with -v to see each test result individually.",
        )
        cmd = f"python -m pytest {' '.join(files)} -v -p no:cacheprovider"
        return Step(thought, cmd, out, note=f"All {n} tests in {len(files)} modules pass; nothing was skipped.")

    def full_candidates(self, extra_fail: str | None) -> list[tuple[str, str]]:
        files = sorted(self.repo.tests)
        cands = []
        for w in (0, 2, 4, 7, 10):
            cands.append(("python -m pytest -p no:cacheprovider", self.run_tests(files, False, set(), extra_fail, w)))
        cands.append(("python -m pytest -v -p no:cacheprovider", self.run_tests(files, True, set(), extra_fail, 0)))
        return cands

    def step_pytest_full(self, budget: int) -> Step:
        cmd, out = self.closest(self.full_candidates(None), budget)
        n = sum(len(v) for v in self.repo.tests.values())
        self.last_tests = f"full suite: {n} passed"
        thought = self.say(
            "Finally, let me run the whole test suite to make sure the change does not break anything elsewhere in "
            "the package.",
            "The targeted tests pass. I'll run the complete suite as a last check before submitting.",
        )
        warn = " The warnings are all pre-existing and unrelated." if "warnings summary" in out else ""
        return Step(thought, cmd, out, note=f"The full suite passes ({n} tests).{warn}")

    def step_pytest_full_unrelated(self, budget: int) -> Step:
        files = sorted(self.repo.tests)
        victim = next(f for f in files if f != self.repo.test_path)
        name = f"test_{self.rng.choice(self.p.nouns)}_docs_examples"
        self.repo.tests[victim] = [*self.repo.tests[victim], name]
        self.unrelated = f"{victim}::{name}"
        self.unrelated_line = len(self.lines(victim)) + 3
        cmd, out = self.closest(self.full_candidates(self.unrelated), budget)
        thought = self.say(
            "Now the whole suite, to check that nothing else depends on the old behaviour.",
            "Let me run the full test suite to catch any indirect breakage from my change.",
        )
        return Step(thought, cmd, out, rc=1)

    def step_stash_check(self, budget: int) -> Step:
        test = self.unrelated
        saved = dict(self.repo.files)
        self.repo.files = dict(self.repo.original)
        res = [
            f"Saved working directory and index state WIP on main: {self.commit[:7]} Merge pull request "
            f"#{self.rng.randint(300, 999)} from {self.p.org}/release-{self.p.version}",
            *self.run_tests([test.split("::")[0]], False, set(), extra_fail=test).split("\n"),
        ]
        self.repo.files = saved
        res += [
            "On branch main",
            "Changes not staged for commit:",
            '  (use "git add <file>..." to update what will be committed)',
            '  (use "git restore <file>..." to discard changes in working directory)',
            *[f"\tmodified:   {p}" for p in sorted(saved) if saved[p] != self.repo.original.get(p)],
            "",
            'no changes added to commit (use "git add" and/or "git commit -a")',
            f"Dropped refs/stash@{{0}} ({fake_sha(self.rng)})",
        ]
        thought = (
            f"Only `{test}` fails, with `ModuleNotFoundError: No module named 'yaml'`. That test imports an optional "
            "dependency that is not installed here and has nothing to do with my change. To be sure, I'll stash my "
            "changes, run that test module on the pristine checkout, and restore my work."
        )
        cmd = f"git stash && python -m pytest {test.split('::')[0]} -q -p no:cacheprovider; git stash pop"
        note = (
            f"With my change stashed, `{test}` fails in the same way, so it is a pre-existing environment problem "
            "(PyYAML is not installed), not a regression; my changes are restored."
        )
        self.last_tests = f"full suite green except the pre-existing failure {test}"
        return Step(thought, cmd, "\n".join(res), note=note, reacts=True)
