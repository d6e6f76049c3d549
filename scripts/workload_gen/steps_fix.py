"""Reproduce the bug, install the package, add the regression test and patch the code."""

from __future__ import annotations

from workload_gen.outputs import fake_sha
from workload_gen.session_base import SessionBase, Step


class FixSteps(SessionBase):
    # ---- reproduce and fix --------------------------------------------------------------------------------
    def step_repro_import_error(self, budget: int) -> Step:
        p = self.p
        line = next(i for i, text in enumerate(p.repro.split("\n"), 1) if p.name in text)
        out = (
            "Traceback (most recent call last):\n"
            f'  File "<stdin>", line {line}, in <module>\n'
            f"ModuleNotFoundError: No module named '{p.name}'"
        )
        thought = self.say(
            "Now let me reproduce the problem with the example from the issue, extended with a few nearby values so "
            "I can see the pattern.",
            "I'll run a small reproduction script based on the issue to confirm the behaviour.",
        )
        note = f"The import fails: `{p.name}` is not installed in this environment."
        return Step(thought, f"python - <<'PY'\n{p.repro}\nPY", out, rc=1, note=note)

    def step_pip_install(self, budget: int) -> Step:
        p, rng = self.p, self.rng
        ver = p.version
        lines = [
            "Obtaining file:///testbed",
            "  Installing build dependencies: started",
            "  Installing build dependencies: finished with status 'done'",
            "  Checking if build backend supports build_editable: started",
            "  Checking if build backend supports build_editable: finished with status 'done'",
            "  Getting requirements to build editable: started",
            "  Getting requirements to build editable: finished with status 'done'",
            "  Preparing editable metadata (pyproject.toml): started",
            "  Preparing editable metadata (pyproject.toml): finished with status 'done'",
        ]
        for dep in p.deps:
            lines.append(
                f"Requirement already satisfied: {dep.split(';')[0]} in /usr/local/lib/python3.11/site-packages "
                f"(from {p.name}=={ver}) ({rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)})"
            )
        digest = fake_sha(rng, 64)
        lines += [
            f"Building wheels for collected packages: {p.name}",
            f"  Building editable for {p.name} (pyproject.toml): started",
            f"  Building editable for {p.name} (pyproject.toml): finished with status 'done'",
            f"  Created wheel for {p.name}: filename={p.name}-{ver}-0.editable-py3-none-any.whl "
            f"size={rng.randint(3000, 9000)} sha256={digest}",
            f"  Stored in directory: /tmp/pip-ephem-wheel-cache-{fake_sha(rng, 8)}/wheels/{digest[:2]}/"
            f"{digest[2:4]}/{digest[4:60]}",
            f"Successfully built {p.name}",
            f"Installing collected packages: {p.name}",
            f"Successfully installed {p.name}-{ver}",
            "WARNING: Running pip as the 'root' user can result in broken permissions and conflicting behaviour "
            "with the system package manager. It is recommended to use a virtual environment instead.",
        ]
        thought = self.say(
            "The package is not installed, so as the instructions say I'll install it in development mode once "
            "and then rerun the reproduction. An editable install means my later edits take effect without "
            "reinstalling.",
            f"Let me do an editable install of `{p.name}` so that the tests and my scripts import the checkout. "
            "The dependencies should already be present, so this ought to be quick.",
        )
        note = f"The editable install worked (`{p.name}-{ver}`)."
        return Step(thought, "pip install -e .", "\n".join(lines), note=note)

    def step_repro(self, budget: int) -> Step:
        p = self.p
        rc = 1 if "Traceback" in p.repro_bad else 0
        hunch = p.hunch[0].upper() + p.hunch[1:]
        thought = self.say(
            "Let me reproduce the report. I'll write the example from the issue to /tmp/repro.py with a few "
            f"neighbouring inputs, so I can rerun it after the fix and compare. {hunch}.",
            "Now I want to see the failure myself. A small script based on the issue, saved under /tmp so that it "
            "stays out of the repository, will also serve as a quick check after the fix.",
        )
        bad = p.repro_bad.split("\n")
        shown = bad[-1] if rc else "; ".join(bad[:3])
        note = f"The script reproduces the report (`{shown}`)."
        cmd = f"cat <<'EOF' > /tmp/repro.py\n{p.repro}\nEOF\npython /tmp/repro.py"
        self.reproduced = True
        return Step(thought, cmd, p.repro_bad, rc=rc, note=note)

    def step_repro_after(self, budget: int) -> Step:
        thought = self.say(
            "Let me also rerun the original reproduction script to confirm that the user-visible behaviour from "
            "the issue is fixed, not just the unit-level function.",
            "Let me rerun /tmp/repro.py, which reproduced the bug before the change.",
        )
        good = "; ".join(self.p.repro_good.split("\n")[:3])
        return Step(thought, "python /tmp/repro.py", self.p.repro_good, note=f"The script now prints `{good}`.")

    def step_add_test(self, budget: int) -> Step:
        p = self.p
        path = self.repo.test_path
        self.repo.files[path] += p.test_src[1:]  # the newline right after the here-doc marker is not content
        self.repo.tests[path] = self.repo.tests[path] + list(p.new_ids)
        self.test_added = True
        thought = self.say(
            f"I understand the cause now: {p.cause}. Before fixing it I'll add regression tests to `{path}` that "
            "describe the expected behaviour, so I can watch them fail and then pass.",
            f"The cause is clear: {p.cause}. I'll write the regression tests first, next to the existing tests for "
            f"`{p.module}`, and check that they fail for the right reason.",
        )
        return Step(thought, f"cat <<'EOF' >> {path}{p.test_src}EOF", "", note="The tests are appended.")

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
        p = self.p
        thought = self.say(
            f"The tests fail as expected. Root cause: {p.cause}. The fix is to {p.fix_note}. I'll apply it with a "
            "small Python script that replaces the exact block and fails loudly if the block is not found.",
            f"Failure and cause are both clear: {p.cause}. I'm going to {p.fix_note}, editing `{self.repo.target}` "
            "with a guarded replacement.",
        )
        out = 'Traceback (most recent call last):\n  File "<stdin>", line 14, in <module>\n'
        out += "AssertionError: pattern not found"
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
            thought = self.say(
                f"Lines {start}-{end} show the function indented with four spaces throughout, which my previous "
                f"replacement got wrong. Here is the same change with the block copied exactly from the file. The "
                f"intent is unchanged: {p.fix_note}.",
                "I see it now: the old block in my script had the wrong indentation on its first line. Retrying "
                f"with the exact text; the change itself is to {p.fix_note}.",
            )
            return Step(
                thought, self.patch_command(exact=True), f"patched {path}", reacts=True, note="The patch applied."
            )
        thought = self.say(
            f"The new tests fail for the expected reason. Root cause: {p.cause}. I'll {p.fix_note}, keeping the "
            "rest of the function untouched and adding a short comment that explains why.",
            f"Confirmed: {p.cause}. The minimal fix is to {p.fix_note}. I'll apply it with a guarded replacement "
            "so that a mismatch cannot go unnoticed.",
        )
        alt = self.say(
            f"I considered handling this in `{self.repo.caller_path}` instead, but other callers of `{p.func}` "
            "would keep the bug, so the function itself is the right place.",
            "A broader rewrite of the function is tempting, but the issue is narrow and a small diff is easier to "
            "review and backport.",
            "",
        )
        thought = f"{thought} {alt}".rstrip()
        return Step(thought, self.patch_command(exact=True), f"patched {path}", note="The patch applied cleanly.")
