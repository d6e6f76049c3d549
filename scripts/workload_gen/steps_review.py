"""Review and finish: the diff, status, lint, the compaction summary, the submit."""

from __future__ import annotations

import difflib
import hashlib

from workload_gen.outputs import SUBMIT_COMMAND
from workload_gen.session_base import SessionBase, Step


class ReviewSteps(SessionBase):
    # ---- review ---------------------------------------------------------------------------------------
    def git_diff(self) -> str:
        out = []
        for path in sorted(self.repo.files):
            before, after = self.repo.original.get(path, ""), self.repo.files[path]
            if before == after:
                continue
            a, b = before.splitlines(), after.splitlines()
            idx_a = hashlib.sha1(before.encode()).hexdigest()[:7]
            idx_b = hashlib.sha1(after.encode()).hexdigest()[:7]
            out += [f"diff --git a/{path} b/{path}", f"index {idx_a}..{idx_b} 100644"]
            for line in difflib.unified_diff(a, b, f"a/{path}", f"b/{path}", lineterm="", n=3):
                if line.startswith("@@"):
                    start = int(line.split()[1].split(",")[0][1:])
                    ctx = next((x for x in reversed(a[: max(0, start - 1)]) if x[:1].isalpha() or x[:1] == "_"), "")
                    line = f"{line} {ctx}".rstrip()
                out.append(line)
        return "\n".join(out)

    def step_git_diff(self, budget: int) -> Step:
        thought = self.say(
            "Let me review the complete diff to make sure it only contains the fix and the new tests, with no "
            "debugging leftovers. I also want to re-read the comment I added and the test names, since those are "
            "what a reviewer sees first.",
            "I'll look at the full diff of the working tree and check that it reads like a focused change a "
            "reviewer would accept: no stray whitespace changes, no leftover prints, and tests that describe the "
            "behaviour rather than the implementation.",
        )
        diff = self.git_diff()
        changed = sum(1 for line in diff.split("\n") if line[:1] in "+-" and line[:3] not in ("+++", "---"))
        note = (
            f"The diff touches only `{self.repo.target}` and `{self.repo.test_path}` ({changed} changed lines), "
            "with no leftovers."
        )
        return Step(thought, "git diff", diff, note=note)

    def step_dump_target_after(self, budget: int) -> Step:
        path = self.repo.target
        fs, fe = self.func_span(path, self.p.func)
        toks = self.nl_tokens(path)
        start, end, size = fs, fe, sum(toks[fs - 1 : fe])
        while size < budget and (start > 1 or end < len(toks)):
            if start > 1:
                start -= 1
                size += toks[start - 1]
            if end < len(toks):
                end += 1
                size += toks[end - 1]
        start, end = max(1, (start // 10) * 10), ((end + 9) // 10) * 10
        thought = self.say(
            f"Let me look at the patched `{self.p.func}` in context once more, including the code around it, to "
            "make sure the change reads naturally and nothing nearby depends on the old behaviour.",
            f"I'll print the region around `{self.p.func}` after the edit; reading it in the file, not in my "
            "script, is the best check that the indentation and the comment came out right.",
        )
        note = f"The patched function (lines {fs}-{fe}) reads cleanly and the surrounding code is unaffected."
        return Step(thought, f"nl -ba {path} | sed -n '{start},{end}p'", self.nl(path, start, end), note=note)

    def step_git_status(self, budget: int) -> Step:
        lines = ["On branch main", "Changes not staged for commit:",
                 '  (use "git add <file>..." to update what will be committed)',
                 '  (use "git restore <file>..." to discard changes in working directory)']  # fmt: skip
        for path in sorted(self.repo.files):
            if self.repo.files[path] != self.repo.original.get(path):
                lines.append(f"\tmodified:   {path}")
        lines += ["", 'no changes added to commit (use "git add" and/or "git commit -a")']
        thought = self.say(
            "Let me check git status to make sure I did not leave scratch files inside the repository; the "
            "reproduction script lives in /tmp so it should not show up. Anything untracked would end up in the "
            "submission, because the harness runs `git add -A`.",
            "Quick check of the working tree state: only the module and its tests should be modified. Editable "
            "installs sometimes leave an `egg-info` directory behind, which I would not want to submit.",
        )
        return Step(thought, "git status", "\n".join(lines), note="Only the two expected files are modified.")

    def step_lint(self, budget: int) -> Step:
        paths = f"{self.repo.target} {self.repo.test_path}"
        thought = self.say(
            "The project uses ruff; let me lint the two files I touched so that the change passes CI. The "
            "configuration in pyproject.toml selects the pyflakes and import-order rules, which are the ones a "
            "hand edit most easily breaks.",
            "Let me run ruff on the modified files to catch style issues my edit may have introduced, such as an "
            "unused import in the test module or a line that is too long.",
        )
        return Step(thought, f"ruff check {paths}", "All checks passed!", note="ruff is happy with both files.")

    def step_edge_cases(self, budget: int) -> Step:
        p = self.p
        thought = self.say(
            "I'd like to probe the edges once more by rerunning the issue's example plus the neighbouring inputs, "
            f"to be sure the fix ({p.fix_note}) does not change the normal cases.",
            "Besides the tests, let me run the reproduction script again and read its full output; the neighbouring "
            "inputs in it check that unaffected values keep their previous behaviour.",
        )
        good = "; ".join(p.repro_good.split("\n")[:3])
        note = f"The reproduction now shows the expected behaviour (`{good}`), and the other inputs are unchanged."
        cmd = "python /tmp/repro.py && echo '--- exit status:' $?"
        return Step(thought, cmd, p.repro_good + "\n--- exit status: 0", note=note)

    def summary(self) -> str:
        """The user message a compacting agent writes in place of the history it drops."""
        p, repo = self.p, self.repo
        seen = ", ".join(f"`{s}`" for s in self.seen_files) or f"`{repo.target}`"
        start, end = self.func_span(repo.target, p.func)
        done = []
        if self.test_added:
            done.append(f"- Added regression tests to `{repo.test_path}` ({', '.join(p.new_ids[:2])}, ...).")
        if self.patched:
            done.append(f"- Patched `{p.func}` in `{repo.target}` (now lines {start}-{end}): {p.fix_note}.")
        if not done:
            done.append("- No files changed yet.")
        nxt = (
            ["- Re-check the diff, run the neighbouring test modules and the full suite.", "- Submit."]
            if self.patched
            else [f"- Add the regression test and fix `{p.func}`.", "- Run the tests, review the diff, submit."]
        )
        return "\n".join(
            [
                "Summary of the session so far (older messages were removed to free context; the task statement "
                "above is unchanged):",
                "",
                f"Task: {p.title} ({p.org}/{p.name}).",
                "",
                "Investigation:",
                f"- Read {seen}.",
                f"- `{p.func}` lives in `{repo.target}`; it is called from `{repo.caller_path}`.",
                f"- Root cause: {p.cause}.",
                "- /tmp/repro.py reproduces the report. Output before the fix:",
                *[f"    {line}" for line in p.repro_bad.split("\n")[:6]],
                "",
                "Changes so far:",
                *done,
                "",
                f"Last test status: {self.last_tests or 'not run yet'}.",
                "",
                "Next steps:",
                *nxt,
            ]
        )

    def step_reorient(self, budget: int) -> Step:
        thought = self.say(
            "Picking up from the summary. Before anything else I'll confirm that the working tree matches what the "
            "summary describes, by looking at the status and the full diff. The earlier outputs are gone, so I "
            "would rather re-read the current state than rely on the summary alone.",
            "Continuing after the context was condensed. Let me re-check the current state of the working tree so "
            "that my next steps build on facts rather than on memory; the diff is short, so this is cheap.",
        )
        diff = self.git_diff()
        status = "\n".join(
            f" M {path}" for path in sorted(self.repo.files) if self.repo.files[path] != self.repo.original.get(path)
        )
        note = "The working tree matches the summary." if diff else "As the summary says, nothing is modified yet."
        return Step(thought, "git status --short && git diff", status + ("\n" + diff if diff else ""), note=note)

    def step_submit(self, budget: int) -> Step:
        p = self.p
        thought = self.say(
            f"Everything is in place: the fix ({p.fix_note}) with regression tests in `{self.repo.test_path}`, and "
            "the test runs are green apart from anything already explained. Submitting.",
            f"The fix addresses the root cause ({p.cause}) and is covered by tests. I'm done and will submit.",
        )
        cases = "1 new test case" if len(p.new_ids) == 1 else f"{len(p.new_ids)} new test cases"
        recap = (
            f"For the record: {cases} in `{self.repo.test_path}`, one focused change in "
            f"`{self.repo.target}`, and no scratch files inside the repository (the reproduction lives in /tmp)."
        )
        return Step(f"{thought} {recap}", SUBMIT_COMMAND, "")
