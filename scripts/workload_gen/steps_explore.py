"""Exploration steps: orient in the repository, search, read files."""

from __future__ import annotations

from workload_gen.codegen import VERBS
from workload_gen.names import plural
from workload_gen.outputs import OUT, fake_sha
from workload_gen.session_base import SessionBase, Step


class ExploreSteps(SessionBase):
    # ---- exploration steps ------------------------------------------------------------------------------
    def step_ls_root(self, budget: int) -> Step:
        p, rng = self.p, self.rng
        entries = [(kind, name, self.size_of(size)) for kind, name, size in OUT["ls_root"]["entries"]]
        if p.layout == "src":
            entries.append(("d", "src", 4096))
        else:
            entries += [("d", p.name, 4096), ("d", f"{p.name}.egg-info", 4096)]
        entries.sort(key=lambda e: e[1].lower().lstrip("."))
        month = rng.choice(OUT["ls_root"]["months"])
        out = [f"total {rng.randint(80, 220)}"]
        for kind, name, size in entries:
            perm = "drwxr-xr-x" if kind == "d" else "-rw-r--r--"
            links = rng.randint(2, 9) if kind == "d" else 1
            stamp = f"{month} {rng.randint(10, 28)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
            out.append(f"{perm} {links:2d} root root {size:5d} {stamp} {name}")
        thought = self.pick("ls_root.thought")
        thought += " " + self.pick("ls_root.aside")
        layout = self.words("ls_root.src_layout" if p.layout == "src" else "ls_root.flat_layout")
        note = self.words("ls_root.note", layout=layout)
        return Step(thought, "ls -la", "\n".join(out), note=note)

    def size_of(self, size: int | list[int] | str) -> int:
        """A listed file's size: as given, drawn from [lo, hi], or the length of the generated pyproject.toml."""
        if isinstance(size, list):
            return self.rng.randint(*size)
        return len(self.repo.files["pyproject.toml"]) if size == "pyproject" else size

    def step_cat_pyproject(self, budget: int) -> Step:
        p = self.p
        thought = self.pick("cat_pyproject.thought")
        deps = ", ".join(f"`{d.split('>')[0]}`" for d in p.deps)
        what = self.words("cat_pyproject.some_deps" if len(p.deps) > 1 else "cat_pyproject.one_dep")
        note = self.words("cat_pyproject.note", deps=deps, what=what)
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
        thought = self.pick("ls_pkg.thought")
        size = len(self.repo.files[self.repo.target])
        note = self.words("ls_pkg.note", modules=len(names), size=size)
        return Step(thought, f"ls -la {d}", "\n".join(out), note=note)

    def step_wc(self, budget: int) -> Step:
        rows = sorted((len(self.lines(path)), path) for path in self.repo.files if path.endswith(".py"))
        total = sum(r for r, _ in rows)
        out = [f"{n:6d} ./{path}" for n, path in rows] + [f"{total:6d} total"]
        thought = self.pick("wc.thought")
        size = len(self.lines(self.repo.target))
        note = self.words("wc.note", size=size, total=total)
        cmd = "find . -name '*.py' -not -path './.git/*' | xargs wc -l | sort -n"
        return Step(thought, cmd, "\n".join(out), note=note)

    def step_git_log(self, budget: int) -> Step:
        rng = self.rng
        msgs = []
        for _ in range(rng.randint(8, 15)):
            verb = rng.choice(OUT["git_log"]["verbs"])
            noun = rng.choice(self.p.nouns)
            tail = rng.choice(OUT["git_log"]["tails"])
            msgs.append(f"{fake_sha(rng, 7)} {verb} {noun} {tail} (#{rng.randint(120, 980)})")
        thought = self.pick("git_log.thought")
        note = self.words("git_log.note", commits=len(msgs))
        return Step(thought, f"git log --oneline -n 15 -- {self.repo.target}", "\n".join(msgs), note=note)

    def step_ls_tests(self, budget: int) -> Step:
        names = sorted(path[6:] for path in self.repo.files if path.startswith("tests/"))
        thought = self.pick("ls_tests.thought")
        note = self.words("ls_tests.note")
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
        thought = self.pick("grep_def.thought")
        line = self.func_span(self.repo.target, p.func)[0]
        callers = [h for h in hits if h.startswith(self.repo.caller_path) and "import" not in h]
        cline = callers[0].split(":")[1] if callers else "?"
        note = self.words("grep_def.note", line=line, cline=cline)
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
        thought = self.pick("grep_callers.thought", needle=needle)
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
        thought = self.pick("grep_misc.thought", needle=needle)
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
        path = self.repo.target
        thought = self.pick("dump_target.thought", path=path)
        return self.dump(path, budget, thought, start=1)

    def step_dump_target_more(self, budget: int) -> Step:
        path = self.repo.target
        thought = self.pick("dump_target_more.thought", path=path)
        return self.dump(path, budget, thought)

    def step_dump_other(self, budget: int) -> Step:
        p = self.p
        candidates = [self.repo.caller_path] + [f"{self.repo.pkg_dir}/{m}.py" for m in p.others[1:]]
        unseen = [c for c in candidates if c not in self.seen_files]
        path = unseen[0] if unseen else self.rng.choice(candidates)
        if path == self.repo.caller_path:
            thought = self.pick("dump_other.thought_caller", path=path)
        elif self.patched:
            thought = self.pick("dump_other.thought_patched", path=path)
        else:
            thought = self.pick("dump_other.thought_unrelated", path=path)
        noun = self.rng.choice(p.nouns)
        focus = self.pick("dump_other.focus", nouns=plural(noun))
        return self.dump(path, budget, f"{thought} {focus}")

    def step_dump_test(self, budget: int) -> Step:
        path = self.repo.test_path
        thought = self.pick("dump_test.thought", path=path)
        step = self.dump(path, budget, thought, start=1)
        step.note = self.words("dump_test.note", path=path)
        return step

    def step_dump_func(self, budget: int) -> Step:
        path = self.repo.target
        start, end = self.func_span(path, self.p.func)
        thought = self.pick("dump_func.thought")
        cmd = f"nl -ba {path} | sed -n '{start - 2},{end + 2}p'"
        return Step(thought, cmd, self.nl(path, start - 2, end + 2), reacts=True)
