"""Review and finish: the diff, status, lint, the compaction summary, the submit."""

from __future__ import annotations

import difflib
import hashlib

from workload_gen.data import text
from workload_gen.outputs import SUBMIT_COMMAND
from workload_gen.session_base import SessionBase, Step

SUMMARY = text("summary.md").removesuffix("\n")


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
        thought = self.pick("git_diff.thought")
        diff = self.git_diff()
        changed = sum(1 for line in diff.split("\n") if line[:1] in "+-" and line[:3] not in ("+++", "---"))
        note = self.words("git_diff.note", changed=changed)
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
        thought = self.pick("dump_target_after.thought")
        note = self.words("dump_target_after.note", fs=fs, fe=fe)
        return Step(thought, f"nl -ba {path} | sed -n '{start},{end}p'", self.nl(path, start, end), note=note)

    def step_git_status(self, budget: int) -> Step:
        lines = self.git_status(self.repo.files)
        thought = self.pick("git_status.thought")
        return Step(thought, "git status", "\n".join(lines), note=self.words("git_status.note"))

    def step_lint(self, budget: int) -> Step:
        paths = f"{self.repo.target} {self.repo.test_path}"
        thought = self.pick("lint.thought")
        return Step(thought, f"ruff check {paths}", "All checks passed!", note=self.words("lint.note"))

    def step_edge_cases(self, budget: int) -> Step:
        p = self.p
        thought = self.pick("edge_cases.thought")
        good = "; ".join(p.repro_good.split("\n")[:3])
        note = self.words("edge_cases.note", good=good)
        cmd = "python /tmp/repro.py && echo '--- exit status:' $?"
        return Step(thought, cmd, p.repro_good + "\n--- exit status: 0", note=note)

    def summary(self) -> str:
        """The user message a compacting agent writes in place of the history it drops (summary.md)."""
        p, repo = self.p, self.repo
        seen = ", ".join(f"`{s}`" for s in self.seen_files) or f"`{repo.target}`"
        start, end = self.func_span(repo.target, p.func)
        done = []
        if self.test_added:
            done.append(self.words("summary.tests_added", first_ids=", ".join(p.new_ids[:2])))
        if self.patched:
            done.append(self.words("summary.patched", start=start, end=end))
        if not done:
            done.append(self.words("summary.nothing_changed"))
        values = {
            "seen": seen,
            "repro_bad": "\n".join(f"    {line}" for line in p.repro_bad.split("\n")[:6]),
            "done": "\n".join(done),
            "last_tests": self.last_tests or self.words("summary.not_run"),
            "next": self.words("summary.next_after_fix" if self.patched else "summary.next_before_fix"),
        }
        return SUMMARY.format_map(self.ctx | values)

    def step_reorient(self, budget: int) -> Step:
        thought = self.pick("reorient.thought")
        diff = self.git_diff()
        status = "\n".join(
            f" M {path}" for path in sorted(self.repo.files) if self.repo.files[path] != self.repo.original.get(path)
        )
        note = self.words("reorient.note") if diff else self.words("reorient.note_unchanged")
        return Step(thought, "git status --short && git diff", status + ("\n" + diff if diff else ""), note=note)

    def step_submit(self, budget: int) -> Step:
        p = self.p
        thought = self.pick("submit.thought")
        cases = self.words("submit.one_case") if len(p.new_ids) == 1 else self.words("submit.cases", n=len(p.new_ids))
        recap = self.words("submit.recap", cases=cases)
        return Step(f"{thought} {recap}", SUBMIT_COMMAND, "")
