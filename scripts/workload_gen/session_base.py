"""What every step of a session shares: the state of the session, the token and file helpers, its voice.

``Turn`` is one model call as written to the file; ``Step`` what the agent thought and ran and what came
back. ``SessionBase`` holds the virtual repository, the plan and what has been said; the step mixins
(``steps_*.py``) and ``session.Session`` build on it.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

from replay.workload.tokens import Tokenizer
from workload_gen.data import DATA, Project, Shape, fill, toml
from workload_gen.outputs import OUT, fake_sha
from workload_gen.plan import make_plan
from workload_gen.repo import build_repo

VOICE = toml("voice.toml")


def _entry(key: str) -> Any:
    section, _, name = key.partition(".")
    try:
        return VOICE[section][name]
    except KeyError:
        raise SystemExit(f"{DATA / 'voice.toml'}: [{section}] has no {name!r}") from None


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
        p, repo = project, self.repo
        self.ctx = {  # the names voice.toml may use in every sentence
            "func": p.func, "name": p.name, "title": p.title, "module": p.module, "org": p.org,
            "version": p.version, "error": p.errors[0], "cause": p.cause, "fix_note": p.fix_note,
            "fix_gist": p.fix_note.split(",")[0], "hunch": p.hunch, "Hunch": p.hunch[0].upper() + p.hunch[1:],
            "target": repo.target, "caller": repo.caller_path, "caller_module": p.others[0],
            "test_path": repo.test_path, "pkg_dir": repo.pkg_dir,
        }  # fmt: skip

    def git_status(self, files: dict[str, str]) -> list[str]:
        """`git status` of the working tree ``files`` against the checkout."""
        status = OUT["git_status"]
        modified = [status["modified"].format(path=p) for p in sorted(files) if files[p] != self.repo.original.get(p)]
        return [*status["head"], *modified, *status["tail"]]

    def pick(self, key: str, **values: object) -> str:
        """One of the alternatives under ``key`` (see :meth:`say`)."""
        return self.say(*self.voice(key, **values))

    def voice(self, key: str, **values: object) -> list[str]:
        """The alternatives ``voice.toml`` lists under ``section.key``, filled in with the session's values."""
        return [fill(t, self.ctx | values, f"voice.toml {key}") for t in _entry(key)]

    def words(self, key: str, **values: object) -> str:
        """The one sentence ``voice.toml`` has under ``section.key``, filled in."""
        return fill(_entry(key), self.ctx | values, f"voice.toml {key}")

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
        if not self.patched or kind == "patch":  # the sentences of every phase reached so far, in order
            phases = ("read_nothing_yet", "read_code", "reproduced", "test_written")[: level + 1]
            options = [t for phase in phases for t in self.voice(f"plan_sentence.{phase}", good=good)]
        else:
            options = self.voice("plan_sentence.after_fix", good=good)
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
        what = " and ".join(parts) if parts else self.words("describe.nothing_new")
        note = self.words("describe.note", start=start, end=end, path=path, what=what)
        if path == self.repo.target:
            fs, fe = self.func_span(path, self.p.func)
            if start <= fs <= end:
                note += self.words("describe.func_at", fs=fs, fe=fe)
        text = "\n".join(chunk)
        conventions = []
        if "raise " in text and "Error(f" in text:
            conventions.append(self.words("describe.errors"))
        if "self._lock" in text:
            conventions.append(self.words("describe.lock"))
        if "@dataclass" in text:
            conventions.append(self.words("describe.dataclass"))
        if "Args:" in text:
            conventions.append(self.words("describe.docstrings"))
        if conventions and self.rng.random() < 0.7:
            note += self.words("describe.keep", convention=self.rng.choice(conventions))
        return note
