"""Reproduce the bug, install the package, add the regression test and patch the code."""

from __future__ import annotations

from workload_gen.outputs import OUT, fake_sha
from workload_gen.session_base import SessionBase, Step


class FixSteps(SessionBase):
    # ---- reproduce and fix --------------------------------------------------------------------------------
    def step_repro_import_error(self, budget: int) -> Step:
        p = self.p
        line = next(i for i, text in enumerate(p.repro.split("\n"), 1) if p.name in text)
        out = OUT["tracebacks"]["import_error"].format(line=line, name=p.name)
        thought = self.pick("repro_import_error.thought")
        note = self.words("repro_import_error.note")
        return Step(thought, f"python - <<'PY'\n{p.repro}\nPY", out, rc=1, note=note)

    def step_pip_install(self, budget: int) -> Step:
        p, rng = self.p, self.rng
        pip = OUT["pip_install"]
        lines = list(pip["head"])
        for dep in p.deps:
            dep_version = f"{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
            lines.append(
                pip["requirement"].format_map(self.ctx | {"dep": dep.split(";")[0], "dep_version": dep_version})
            )
        digest = fake_sha(rng, 64)
        size, cache = rng.randint(3000, 9000), fake_sha(rng, 8)
        wheel = {"size": size, "digest": digest, "cache": cache, "digest_a": digest[:2], "digest_b": digest[2:4]}
        lines += [t.format_map(self.ctx | wheel | {"digest_c": digest[4:60]}) for t in pip["tail"]]
        thought = self.pick("pip_install.thought")
        note = self.words("pip_install.note", ver=p.version)
        return Step(thought, "pip install -e .", "\n".join(lines), note=note)

    def step_repro(self, budget: int) -> Step:
        p = self.p
        rc = 1 if "Traceback" in p.repro_bad else 0
        thought = self.pick("repro.thought")
        bad = p.repro_bad.split("\n")
        shown = bad[-1] if rc else "; ".join(bad[:3])
        note = self.words("repro.note", shown=shown)
        cmd = f"cat <<'EOF' > /tmp/repro.py\n{p.repro}\nEOF\npython /tmp/repro.py"
        self.reproduced = True
        return Step(thought, cmd, p.repro_bad, rc=rc, note=note)

    def step_repro_after(self, budget: int) -> Step:
        thought = self.pick("repro_after.thought")
        good = "; ".join(self.p.repro_good.split("\n")[:3])
        return Step(thought, "python /tmp/repro.py", self.p.repro_good, note=self.words("repro_after.note", good=good))

    def step_add_test(self, budget: int) -> Step:
        p = self.p
        path = self.repo.test_path
        self.repo.files[path] += p.test_src[1:]  # the newline right after the here-doc marker is not content
        self.repo.tests[path] = self.repo.tests[path] + list(p.new_ids)
        self.test_added = True
        thought = self.pick("add_test.thought", path=path)
        return Step(thought, f"cat <<'EOF' >> {path}{p.test_src}EOF", "", note=self.words("add_test.note"))

    def patch_command(self, exact: bool) -> str:
        path = self.repo.target
        parts = ["python - <<'PY'", "from pathlib import Path", "", f'path = Path("{path}")', "text = path.read_text()"]
        for n, (old, new) in enumerate(self.p.fixes):
            old_text = old if exact else old.replace("    ", "  ", 1)
            parts += [f"old{n} = '''{old_text}'''", f"new{n} = '''{new}'''"]
            parts += [f'assert text.count(old{n}) == 1, "pattern not found"', f"text = text.replace(old{n}, new{n})"]
        parts += ["path.write_text(text)", 'print("patched", path)', "PY"]
        return "\n".join(parts)

    def step_patch_miss(self, budget: int) -> Step:
        thought = self.pick("patch_miss.thought")
        out = OUT["tracebacks"]["pattern_not_found"]
        return Step(thought, self.patch_command(exact=False), out, rc=1)

    def step_patch(self, budget: int) -> Step:
        p = self.p
        path = self.repo.target
        text = self.repo.files[path]
        for old, new in p.fixes:
            assert text.count(old) == 1, (p.name, old)
            text = text.replace(old, new)
        self.repo.files[path] = text
        self.patched = True
        if "patch_miss" in self.plan[: self.plan.index("patch")]:
            start, end = self.func_span(path, p.func)
            thought = self.pick("patch.after_miss", start=start, end=end)
            return Step(
                thought,
                self.patch_command(exact=True),
                f"patched {path}",
                reacts=True,
                note=self.words("patch.note_after_miss"),
            )
        thought = self.pick("patch.thought")
        alt = self.pick("patch.alternative")
        thought = f"{thought} {alt}".rstrip()
        return Step(thought, self.patch_command(exact=True), f"patched {path}", note=self.words("patch.note"))
