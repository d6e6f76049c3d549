"""What every step of a session shares: the state of the session, the token and file helpers, its voice.

``Turn`` is one model call as written to the file; ``Step`` what the agent thought and ran and what came
back. ``SessionBase`` holds the virtual repository, the plan and what has been said; the step mixins
(``steps_*.py``) and ``session.Session`` build on it.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from replay.workload.tokens import Tokenizer
from workload_gen.data import Project, Shape
from workload_gen.outputs import fake_sha
from workload_gen.plan import make_plan
from workload_gen.repo import build_repo


@dataclass
class Turn:
    """One model call as it is written to the file, plus the figures the summary table needs."""

    append: list[dict[str, str]]
    output: str
    output_tokens: int
    tool_time_s: float
    truncate_to: int | None = None
    prompt_tokens: int = 0

    def to_json(self) -> dict[str, object]:
        obj: dict[str, object] = {}
        if self.truncate_to is not None:
            obj["truncate_to"] = self.truncate_to
        obj["append"] = self.append
        obj["output"] = {"content": self.output}
        obj["output_tokens"] = self.output_tokens
        obj["tool_time_s"] = self.tool_time_s
        return obj


@dataclass
class Step:
    """What the agent thought and ran, what came back, and a note on it for the next thought."""

    thought: str
    command: str
    output: str
    rc: int = 0
    note: str = ""  # one sentence about this step's output, opening the next step's thought
    reacts: bool = False  # the thought already discusses the previous output: no note prefix


class SessionBase:
    """Plays one agent session against a virtual repository, sizing observations to a context budget."""

    def __init__(self, project: Project, shape: Shape, seed: int, tok: Tokenizer) -> None:
        # str seeds hash with SHA-512 in CPython, so this does not depend on PYTHONHASHSEED
        self.rng = random.Random(f"{seed}:{project.name}")
        self.seed = seed
        self.p = project
        self.shape = shape
        self.tok = tok
        self.repo = build_repo(self.rng, project)
        self.plan = make_plan(self.rng, shape)
        self.read: dict[str, int] = {}  # path -> last line shown
        self.seen_files: list[str] = []
        self.test_added = False
        self.reproduced = False
        self.patched = False
        self.last_tests = ""
        self.unrelated = ""
        self.unrelated_line = 0
        self.pyver = f"3.11.{self.rng.randint(4, 9)}"
        self.pytest_ver = self.rng.choice(("7.4.4", "8.0.2", "8.1.1", "8.2.2", "8.3.3"))
        self.plugins = self.rng.choice(("cov-5.0.0, hypothesis-6.98.3", "cov-4.1.0", "xdist-3.5.0, cov-5.0.0"))
        self.commit = fake_sha(self.rng, 12)
        self.said: set[str] = set()
        self._line_tokens: dict[tuple[str, str], list[int]] = {}

    # ---- token and file helpers -------------------------------------------------------------------------
    def count(self, text: str) -> int:
        """cl100k tokens of ``text``: the same counter the loader uses."""
        return len(self.tok.encode(text)) if text else 0

    def lines(self, path: str) -> list[str]:
        return self.repo.files[path].rstrip("\n").split("\n")

    def nl_tokens(self, path: str) -> list[int]:
        text = self.repo.files[path]
        key = (path, hashlib.sha1(text.encode()).hexdigest())
        if key not in self._line_tokens:
            self._line_tokens[key] = [self.count(f"{i:6d}\t{line}\n") for i, line in enumerate(self.lines(path), 1)]
        return self._line_tokens[key]

    def nl(self, path: str, start: int, end: int) -> str:
        lines = self.lines(path)
        return "\n".join(f"{i:6d}\t{lines[i - 1]}" for i in range(max(1, start), min(end, len(lines)) + 1))

    def span_for(self, path: str, start: int, budget: int) -> tuple[int, int]:
        """A human-looking line range from ``start`` whose numbered dump is about ``budget`` tokens."""
        toks = self.nl_tokens(path)
        total, end = 0, start
        for i in range(start - 1, len(toks)):
            total += toks[i]
            end = i + 1
            if total >= budget:
                break
        end = max(start + 20, ((end + 19) // 20) * 20)
        return start, end

    def func_span(self, path: str, name: str) -> tuple[int, int]:
        lines = self.lines(path)
        start = next(i for i, line in enumerate(lines, 1) if line.startswith(f"def {name}("))
        end = start
        while end < len(lines) and (lines[end].startswith((" ", ")")) or lines[end] == ""):
            end += 1
        while lines[end - 1] == "":
            end -= 1
        return start, end

    def closest(self, candidates: list[tuple[str, str]], budget: int) -> tuple[str, str]:
        """The (command, output) pair whose output size is nearest to ``budget`` tokens (e.g. ``-q`` vs ``-v``)."""
        return min(candidates, key=lambda c: abs(self.count(c[1]) - budget))

    # ---- the loop -------------------------------------------------------------------------------------
    # ---- thoughts -------------------------------------------------------------------------------------
    def say(self, *options: str) -> str:
        """One of ``options``, preferring those not used yet in this session (agents rarely repeat verbatim)."""
        fresh = [o for o in options if o not in self.said] or list(options)
        choice = self.rng.choice(fresh)
        self.said.add(choice)
        return choice

    def maybe_plan_sentence(self, thought: str, kind: str) -> str:
        """Usually add a reasoning or look-ahead sentence, never the same one twice in a session."""
        p, rng = self.p, self.rng
        if kind in ("submit", "reorient", "stash_check", "dump_func") or rng.random() > 0.92:
            return thought
        good = next(g for g, b in zip(p.repro_good.split("\n"), p.repro_bad.split("\n"), strict=False) if g != b)
        level = 3 if self.test_added else 2 if self.reproduced else 1 if self.seen_files else 0
        caller = self.repo.caller_path
        module = self.repo.target
        if not self.patched or kind == "patch":
            # (earliest phase, sentence): 0 = nothing read yet, 1 = code read, 2 = reproduced, 3 = test written
            staged = [
                (0, f"Whatever the fix is, the public signature of `{p.func}` should not change, since `{caller}` "
                    "and library users call it directly."),
                (0, "The issue shows a single example, so I'll also keep an eye on neighbouring inputs that work "
                    "today and must keep working."),
                (0, "Reading a bit more context now is cheaper than a fix that has to be redone because I missed an "
                    "invariant."),
                (0, f"The fix will need a regression test in `{self.repo.test_path}`; I'll write it before touching "
                    f"`{module}`."),
                (0, f"I'm keeping in mind what the docstring of `{p.func}` promises, because the fix has to honour "
                    "it."),
                (1, f"If that matches my theory, the fix should stay local to `{p.func}`."),
                (1, f"I also want to know whether `{caller}` compensates for the current behaviour somewhere, "
                    "because then fixing the function alone would change its output twice."),
                (1, f"The report is specific about the inputs that fail, which points to a boundary condition in "
                    f"`{p.func}` rather than to the way `{caller}` calls it."),
                (1, f"So far nothing contradicts the idea that the bug is local to `{p.func}`; the callers pass "
                    "their values straight through."),
                (1, f"I want the data flow end to end: where the values come from in `{caller}`, how `{p.func}` "
                    "transforms them, and what the result is used for."),
                (1, f"It is also worth knowing how `{module}` reports invalid input, so that any new error path "
                    "looks like the existing ones."),
                (1, "Line numbers matter here, because I'll edit with an exact-match replacement later."),
                (1, f"I'm not going to touch `{caller}` unless it turns out to depend on the broken behaviour."),
                (1, f"Since `{p.func}` is short, the fix itself should be a few lines; most of the work is making "
                    "sure they are the right few lines."),
                (1, f"My working theory stays the same: {p.hunch}."),
                (1, f"Once this is fixed, the reproduction should print `{good}` on the line that is wrong today."),
                (2, "I'll keep /tmp/repro.py around so that I can compare the behaviour before and after the "
                    "change."),
                (3, "At this point I'm fairly confident about the cause, and the failing test will confirm it."),
                (3, "Having a failing test first means I will know for certain when the fix works."),
            ]  # fmt: skip
            options = [text for stage, text in staged if stage <= level]
        else:
            options = [
                "Nothing so far suggests a second code path with the same problem, but I'll keep checking as I verify.",
                f"After that I'll look at the whole diff once more; it should only touch `{module}` and "
                f"`{self.repo.test_path}`.",
                "If anything unrelated fails I'll check it against the unmodified checkout before drawing conclusions.",
                "The fix changes behaviour only for the inputs described in the issue; everything else goes "
                "through the same code path as before.",
                "I'm deliberately not refactoring the surrounding code: a reviewer should be able to verify the "
                "change at a glance.",
                "If a test elsewhere encoded the old behaviour it would show up now, and I'd have to decide whether "
                "that test or my fix is wrong.",
                "The comment I added says why the special case exists, so that nobody removes it later as a "
                "simplification.",
                "CI runs the same commands, so a clean local run is a good predictor of a green pipeline.",
                f"The reproduction should keep printing `{good}` as its first line from now on.",
                f"To recap the change: I {p.fix_note.split(',')[0]}, and nothing else in `{module}` was touched.",
                "Edge cases next to the reported one matter as much as the example itself, because that is where "
                "a too-narrow fix would show.",
                f"The regression tests now encode the behaviour from the issue, so a future refactoring of "
                f"`{p.func}` cannot silently bring the bug back.",
                "I'm not adding a changelog entry: this project assembles the changelog from pull request titles.",
                f"None of the callers in `{caller}` needs an adjustment, because they only pass the values through.",
            ]
        fresh = [o for o in options if o not in self.said and not (p.cause in o and p.cause in thought)]
        if not fresh:
            return thought
        choice = rng.choice(fresh)
        self.said.add(choice)
        fresh.remove(choice)
        if fresh and rng.random() < 0.5:
            second = rng.choice(fresh)
            self.said.add(second)
            choice = f"{choice} {second}"
        return f"{thought} {choice}"

    def describe(self, path: str, start: int, end: int) -> str:
        """A note on a dumped range: which top-level names it showed, and a convention worth keeping."""
        lines = self.lines(path)
        end = min(end, len(lines))
        chunk = lines[start - 1 : end]
        classes = [ln.split()[1].split("(")[0].rstrip(":") for ln in chunk if ln.startswith("class ")]
        funcs = [ln[4:].split("(")[0] for ln in chunk if ln.startswith("def ")]
        parts = []
        if classes:
            parts.append("the class" + ("es " if len(classes) > 1 else " ") + ", ".join(f"`{c}`" for c in classes[:4]))
        if funcs:
            parts.append("the function" + ("s " if len(funcs) > 1 else " ") + ", ".join(f"`{f}`" for f in funcs[:4]))
        what = " and ".join(parts) if parts else "method bodies of the classes defined above"
        note = f"Lines {start}-{end} of `{path}` show {what}."
        if path == self.repo.target:
            fs, fe = self.func_span(path, self.p.func)
            if start <= fs <= end:
                note += f" `{self.p.func}` itself is at lines {fs}-{fe}."
        text = "\n".join(chunk)
        conventions = []
        if "raise " in text and "Error(f" in text:
            conventions.append("errors are raised as the package's own exception classes with f-string messages")
        if "self._lock" in text:
            conventions.append("shared state is guarded by an `RLock`")
        if "@dataclass" in text:
            conventions.append("plain data lives in dataclasses")
        if "Args:" in text:
            conventions.append("longer docstrings use Google-style `Args:`/`Returns:` sections")
        if conventions and self.rng.random() < 0.7:
            note += f" Worth keeping in mind: {self.rng.choice(conventions)}."
        return note
