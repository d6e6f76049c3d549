"""Test runs: pytest output rendered from the virtual repository, failures included."""

from __future__ import annotations

from workload_gen.codegen import WORDS
from workload_gen.data import Failure
from workload_gen.outputs import OUT, banner, fake_sha
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
        values = {"banner": banner(name, "_"), "test": name, "path": path, "line": self.unrelated_line}
        return [t.format_map(values) for t in OUT["pytest"]["unrelated_failure"]]

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
            values = self.ctx | {"module": rng.choice(self.p.others), "line": rng.randint(20, 400)}
            values |= {"next_major": int(self.p.version.split(".")[0]) + 1, "test": tid[:40], "word": rng.choice(WORDS)}
            variants = [[t.format_map(values) for t in lines] for lines in OUT["pytest"]["warnings"]]
            out += rng.choice(variants)
            out.append("")
        out.append(OUT["pytest"]["warnings_docs"])
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
                out.append(OUT["pytest"]["unrelated_summary"].format(test=extra_fail))
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
        thought = self.pick("pytest_fail.thought", path=path)
        self.last_tests = self.words("pytest_fail.status", n=len(failing))
        first = p.failures[0].lines[0]
        first = first if len(first) <= 100 else first[:90].rstrip() + " ..."
        n_old = len(self.repo.tests[path]) - len(p.new_ids)
        fails = (
            self.words("pytest_fail.one_fails")
            if len(failing) == 1
            else self.words("pytest_fail.some_fail", n=len(failing))
        )
        note = self.words("pytest_fail.note", fails=fails, first=first, n_old=n_old)
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
        self.last_tests = self.words("pytest_pass.status", n=n, files=" and ".join(f"`{f}`" for f in ran))
        thought = self.pick("pytest_pass.thought")
        return Step(thought, cmd, out, note=self.words("pytest_pass.note", n=n))

    def step_pytest_verbose(self, budget: int) -> Step:
        files = [self.repo.test_path]
        others = [f for f in sorted(self.repo.tests) if f != self.repo.test_path]
        while sum(len(self.repo.tests[f]) for f in files) * 22 < budget and others:
            files.append(others.pop(0))
        out = self.run_tests(files, True, set())
        n = sum(len(self.repo.tests[f]) for f in files)
        thought = self.pick("pytest_verbose.thought")
        cmd = f"python -m pytest {' '.join(files)} -v -p no:cacheprovider"
        return Step(thought, cmd, out, note=self.words("pytest_verbose.note", n=n, files=len(files)))

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
        self.last_tests = self.words("pytest_full.status", n=n)
        thought = self.pick("pytest_full.thought")
        warn = self.words("pytest_full.warnings") if "warnings summary" in out else ""
        return Step(thought, cmd, out, note=self.words("pytest_full.note", n=n, warn=warn))

    def step_pytest_full_unrelated(self, budget: int) -> Step:
        files = sorted(self.repo.tests)
        victim = next(f for f in files if f != self.repo.test_path)
        name = f"test_{self.rng.choice(self.p.nouns)}_docs_examples"
        self.repo.tests[victim] = [*self.repo.tests[victim], name]
        self.unrelated = f"{victim}::{name}"
        self.unrelated_line = len(self.lines(victim)) + 3
        cmd, out = self.closest(self.full_candidates(self.unrelated), budget)
        thought = self.pick("pytest_full_unrelated.thought")
        return Step(thought, cmd, out, rc=1)

    def step_stash_check(self, budget: int) -> Step:
        test = self.unrelated
        saved = dict(self.repo.files)
        self.repo.files = dict(self.repo.original)
        stash = OUT["stash"]
        res = [
            stash["saved"].format_map(self.ctx | {"commit": self.commit[:7], "pr": self.rng.randint(300, 999)}),
            *self.run_tests([test.split("::")[0]], False, set(), extra_fail=test).split("\n"),
        ]
        self.repo.files = saved
        res += [*self.git_status(saved), stash["dropped"].format(sha=fake_sha(self.rng))]
        thought = self.words("stash_check.thought", test=test)
        cmd = f"git stash && python -m pytest {test.split('::')[0]} -q -p no:cacheprovider; git stash pop"
        note = self.words("stash_check.note", test=test)
        self.last_tests = self.words("stash_check.status", test=test)
        return Step(thought, cmd, "\n".join(res), note=note, reacts=True)
