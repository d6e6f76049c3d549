#!/usr/bin/env python3
"""Generate the default workload: synthetic coding-agent sessions in `replay.trajectory/1` format.

Why synthetic: the recorded trajectories we study cannot be redistributed, yet `replay` needs a default
workload with the shape of a real coding agent: a long system prompt shared by every session, an issue
statement, short outputs (a thought and one shell command), large tool observations (file dumps, test logs)
that make the context grow turn after turn, and the occasional history compaction. Everything here is
produced procedurally from a seeded RNG over hand-written vocabularies and templates, so the output is
reproducible byte for byte:

    python scripts/make_default_workload.py --seed 7 --out trajectories/coding-agent-default.jsonl
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

try:
    from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, Tokenizer, get_tokenizer
except ModuleNotFoundError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, Tokenizer, get_tokenizer

FORMAT = "replay.trajectory/1"
GENERATOR = "scripts/make_default_workload.py"
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "trajectories" / "coding-agent-default.jsonl"
DEFAULT_SEED = 7
SUBMIT_COMMAND = "git add -A && git diff --cached --stat && echo AGENT_TASK_SUBMITTED"

# --------------------------------------------------------------------------------------------------------
# Prompts. Written for this generator; one system prompt shared by all sessions, as a real agent fleet has.
# --------------------------------------------------------------------------------------------------------

SYSTEM_PROMPT = """You are an autonomous software engineering agent. You work inside a disposable Linux container \
that holds a checkout of a Python project, and you solve the task you are given by running shell commands one \
at a time. Nobody watches the session live: there is no one to answer questions, so make reasonable decisions \
on your own and keep going until the task is done.

# How a session works

1. You receive a task, usually an issue report copied from the project's tracker.
2. You reply with a short piece of reasoning followed by exactly one shell command.
3. The command runs in the container and you receive its exit status and its combined output.
4. Repeat until the change is complete, then submit (see "Finishing").

Each command starts in a fresh `bash` subshell whose working directory is the repository root (`/testbed`).
Environment variables, `cd` and shell functions do not persist from one command to the next; chain commands
with `&&` when they depend on each other, for example `cd docs && make html`.

# Response format

Every reply has two parts, in this order:

THOUGHT: one to a few short paragraphs. Say what you learned from the last output, what you believe is going
on, and what the next command is meant to find out or change. Be concrete: name files, functions and line
numbers rather than "the relevant code".

```bash
<exactly one command>
```

Rules for the command block:
- Exactly one fenced block tagged `bash` per reply. Replies with zero or several blocks are rejected and you
  lose the turn.
- One logical command per block. Pipes, `&&`, `||` and here-documents are fine; a block that tries to do five
  unrelated things at once is not, because you cannot react to the first failure.
- Do not put explanations inside the block. Comments are allowed but are usually noise.

# The container

- Python 3.11. The project is usually installed in development mode; if importing the project itself fails
  with `ModuleNotFoundError`, run `pip install -e .` once and carry on.
- Available tools: `bash`, coreutils, `git`, `grep`, `sed`, `awk`, `find`, `diff`, `patch`, `python`, `pip`,
  `pytest` and `ruff`. There is no editor: `vim`, `nano`, `less`, `top` and other interactive programs hang the
  session and are killed by the watchdog after 120 seconds, which wastes a turn.
- The network is restricted to the package index mirror. Do not clone other repositories, download data sets
  or call external services.
- Output longer than 20,000 characters is cut in the middle; the head and the tail are kept and a marker says
  how much was removed. Narrow your commands (`head`, `sed -n`, `grep -m`) instead of printing whole trees.
- A command that runs for more than 300 seconds is stopped. Test suites normally finish well within a minute;
  if a run is slow, select the relevant test module or add `-x` to stop at the first failure.

# Useful command patterns

Reading code:
- `nl -ba path/to/module.py | sed -n '120,220p'` prints lines 120 to 220 with line numbers. Prefer ranges of
  a few hundred lines over `cat` on large files, and remember the line numbers for later edits.
- `grep -rn "name" src tests` finds definitions and call sites; add `--include='*.py'` to skip build
  artefacts and `| head -n 50` to bound the output.
- `git log --oneline -n 20 -- path` and `git blame -L 100,140 path` show how a region evolved and why.

Editing code:
- Small, exact substitutions: `sed -i 's/old text/new text/' path`. Escape `/` and `&`, and check the result
  with `nl -ba path | sed -n 'a,bp'` afterwards, because `sed` reports nothing when it matched nothing.
- Larger changes: a Python here-document that reads the file, replaces one exact block, and fails loudly when
  the block is not found, so a stale assumption never turns into a silent no-op:

  python - <<'PY'
  from pathlib import Path
  path = Path("package/module.py")
  text = path.read_text()
  old = "..."
  new = "..."
  assert text.count(old) == 1, "expected exactly one match"
  path.write_text(text.replace(old, new))
  PY

- New files: `cat <<'EOF' > path` ... `EOF`. Quote the delimiter so that the shell does not expand `$` and
  backticks inside the file. Use `>>` to append to an existing file.

Running code:
- Reproduce a report with a throwaway script, either inline with `python - <<'PY'` ... `PY` or written to
  `/tmp/repro.py` so that you can run it again after the fix.
- Tests: `python -m pytest path/to/test_file.py -q`; `-x` stops at the first failure, `-k expression` selects
  tests by name, `-vv` prints full assertion diffs, `-p no:cacheprovider` avoids writing `.pytest_cache`.
- Linting: `ruff check path` on the files you touched. Fix what your change introduced, nothing else.

# Rules

- Fix the root cause in the library code. Do not special-case the example from the issue, do not silence the
  error with a broad `except`, and do not weaken or delete existing tests to make them pass.
- Keep the change minimal and in the style of the surrounding code: same naming, same error types, same
  docstring conventions. Do not reformat code you did not otherwise change.
- You may add tests. New regression tests go next to the existing tests for the same module and use the
  fixtures and helpers that file already has.
- Do not edit packaging or CI configuration (`pyproject.toml`, `setup.cfg`, `tox.ini`, `.github/`) unless the
  task is about them.
- Never run destructive git commands (`git reset --hard`, `git clean -fdx`, `git checkout .`) and never commit:
  the harness collects your work from the working tree. `git stash` followed by `git stash pop` is allowed to
  compare behaviour with and without your change.
- Do not start background processes or servers that outlive the command.
- If a command fails, read the error before trying again; never repeat the same command unchanged.
- Failures in the test suite that are unrelated to your change are not yours to fix. Confirm that they also
  fail without your change and mention them in your reasoning before you submit.

# Suggested workflow

1. Orient yourself: list the repository, skim the module the issue mentions, find the code path with `grep`.
2. Reproduce the problem with a minimal script and note the exact wrong output or traceback.
3. Read enough of the surrounding code to understand why it happens. State the root cause in your thought
   before you edit anything.
4. Make the fix, then re-run the reproduction: it must now show the expected behaviour.
5. Add or extend a regression test, run the affected test module, then the wider suite.
6. Review `git diff` for leftovers: debug prints, scratch files inside the repository, unrelated edits.

# Finishing

When the change is complete and reviewed, submit with this exact command and nothing else in the block:

```bash
git add -A && git diff --cached --stat && echo AGENT_TASK_SUBMITTED
```

You cannot make further changes after this command, so only run it once you are satisfied. Scratch files under
`/tmp` are not collected; remove scratch files you created inside the repository before submitting.

# Example reply

THOUGHT: The traceback ends in `parse_header` at line 88 of `mailkit/headers.py`, where the value is split on
the first colon. Folded continuation lines start with whitespace and contain no colon, so I want to see how
the caller feeds lines into this function before changing anything.

```bash
nl -ba mailkit/headers.py | sed -n '60,130p'
```
"""

TASK_TEMPLATE = """<issue>
# {title}

{issue}
</issue>

Repository: {org}/{name}, checked out at /testbed (branch `main`, commit {commit}).

Resolve the issue above by changing the library code under /testbed. The maintainers will run their own test
suite against your working tree, including tests you cannot see, so the fix has to address the underlying
cause rather than the single example in the report. Keep the public API unchanged unless the issue asks for
something else, and keep the change focused: reviewers reject patches that mix a fix with refactoring.

Work in the format described in your instructions: a THOUGHT section and one bash command per reply."""


# --------------------------------------------------------------------------------------------------------
# Projects: one made-up library and one bug per session.
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """One failing test as pytest reports it before the fix."""

    test_id: str
    locals: str  # "raw = '-0.004'" lines pytest prints for parametrized arguments, or ""
    marker: str  # substring of the source line pytest marks with ">"
    lines: tuple[str, ...]  # the "E" lines


@dataclass(frozen=True)
class Project:
    """A made-up Python library with one reported bug, plus the text an agent session about it needs."""

    name: str
    org: str
    version: str
    layout: str  # "src" or "flat"
    nouns: tuple[str, ...]
    module: str
    others: tuple[str, ...]
    errors: tuple[str, ...]
    deps: tuple[str, ...]
    slug: str
    title: str
    issue: str
    imports: tuple[str, ...]
    support: str
    func: str
    buggy: str
    fixes: tuple[tuple[str, str], ...]
    caller: str
    repro: str
    repro_bad: str
    repro_good: str
    test_imports: tuple[str, ...]
    test_src: str
    new_ids: tuple[str, ...]
    failures: tuple[Failure, ...]
    cause: str
    fix_note: str
    hunch: str


PROJECTS: tuple[Project, ...] = (
    Project(
        name="ledgerline",
        org="ledgerline-dev",
        version="2.3.1",
        layout="src",
        nouns=("ledger", "entry", "account", "amount", "currency", "posting", "balance", "journal", "period"),
        module="export",
        others=("reports", "accounts", "journal", "currency", "cli"),
        errors=("ExportError", "AccountError"),
        deps=("click>=8.1", "python-dateutil>=2.8"),
        slug="negative-zero-amounts",
        title="CSV export writes -0.00 for tiny negative amounts",
        issue="""When a journal contains small negative adjustments (for example FX rounding differences of \
-0.004 EUR), `ledgerline export --format csv` writes them as `-0.00`. Our bank reconciliation importer rejects \
negative zero, and spreadsheets sort those rows apart from the real zeros, so month-end totals look wrong.

Minimal example:

```python
from decimal import Decimal
from ledgerline.export import format_amount

print(format_amount(Decimal("-0.004")))   # prints -0.00
```

Expected `0.00`: a value that rounds to zero should not carry a sign. Values that round to a non-zero amount \
(`-0.005` -> `-0.01`) are fine and should keep their sign.

ledgerline 2.3.1, Python 3.11.8, Ubuntu 22.04""",
        imports=("from decimal import ROUND_HALF_UP, Decimal",),
        support="",
        func="format_amount",
        buggy='''def format_amount(amount: Decimal, places: int = 2, *, thousands: str = "") -> str:
    """Render ``amount`` with a fixed number of decimal places for CSV output."""
    quantum = Decimal(1).scaleb(-places)
    sign = "-" if amount < 0 else ""
    rounded = abs(amount).quantize(quantum, rounding=ROUND_HALF_UP)
    whole, _, frac = f"{rounded:f}".partition(".")
    if thousands:
        whole = f"{int(whole):,}".replace(",", thousands)
    text = f"{whole}.{frac}" if places else whole
    return sign + text
''',
        fixes=(
            (
                """    sign = "-" if amount < 0 else ""
    rounded = abs(amount).quantize(quantum, rounding=ROUND_HALF_UP)
""",
                """    rounded = abs(amount).quantize(quantum, rounding=ROUND_HALF_UP)
    # A value that rounds to zero has no sign: "-0.00" breaks reconciliation imports.
    sign = "-" if amount < 0 and rounded else ""
""",
            ),
        ),
        caller='''def export_rows(entries: list[Entry], places: int = 2) -> list[list[str]]:
    """Flatten journal entries into CSV rows (date, account, memo, amount)."""
    rows = []
    for entry in entries:
        rows.append([entry.date.isoformat(), entry.account, entry.memo, format_amount(entry.amount, places)])
    return rows
''',
        repro="""from decimal import Decimal
from ledgerline.export import format_amount

for raw in ["-0.004", "-0.005", "0.004", "-12.345"]:
    print(raw, "->", repr(format_amount(Decimal(raw))))""",
        repro_bad="-0.004 -> '-0.00'\n-0.005 -> '-0.01'\n0.004 -> '0.00'\n-12.345 -> '-12.35'",
        repro_good="-0.004 -> '0.00'\n-0.005 -> '-0.01'\n0.004 -> '0.00'\n-12.345 -> '-12.35'",
        test_imports=("from decimal import Decimal",),
        test_src="""

@pytest.mark.parametrize("raw", ["-0.004", "-0.0049", "-0.001"])
def test_format_amount_tiny_negative_is_unsigned_zero(raw):
    assert format_amount(Decimal(raw)) == "0.00"


def test_format_amount_keeps_sign_when_rounding_away_from_zero():
    assert format_amount(Decimal("-0.005")) == "-0.01"
""",
        new_ids=(
            "test_format_amount_tiny_negative_is_unsigned_zero[-0.004]",
            "test_format_amount_tiny_negative_is_unsigned_zero[-0.0049]",
            "test_format_amount_tiny_negative_is_unsigned_zero[-0.001]",
            "test_format_amount_keeps_sign_when_rounding_away_from_zero",
        ),
        failures=tuple(
            Failure(
                f"test_format_amount_tiny_negative_is_unsigned_zero[{raw}]",
                f"raw = '{raw}'",
                "assert format_amount",
                ("AssertionError: assert '-0.00' == '0.00'", "", "  - 0.00", "  + -0.00"),
            )
            for raw in ("-0.004", "-0.0049", "-0.001")
        ),
        cause="the sign is decided from the raw amount before rounding, so anything that rounds to zero "
        "keeps a minus sign",
        fix_note="compute the sign after quantizing and drop it when the rounded value is zero",
        hunch="I suspect the sign is taken from the unrounded amount and then glued onto the rounded "
        "magnitude, which would explain why only values that round to zero are affected",
    ),
    Project(
        name="cronwheel",
        org="cronwheel",
        version="0.9.4",
        layout="flat",
        nouns=("job", "schedule", "trigger", "tick", "interval", "worker", "queue", "deadline", "calendar"),
        module="schedule",
        others=("worker", "jobs", "triggers", "clock", "store"),
        errors=("ScheduleError", "JobError"),
        deps=("tzdata>=2023.3",),
        slug="double-fire-on-boundary",
        title="Interval jobs fire twice when the worker wakes up exactly on a tick",
        issue="""We run cronwheel workers with `IntervalTrigger(minutes=5)`. Every few hours a job runs twice \
within the same second. Logging the scheduler shows that when the worker's sleep ends exactly on a tick \
boundary (which happens a lot with coarse clocks in containers), `next_fire_time` returns the current time \
instead of the following tick, so the job is enqueued again right after it finished.

```python
from datetime import datetime, timedelta, timezone
from cronwheel.schedule import next_fire_time

start = datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)
after = start + timedelta(minutes=15)
print(next_fire_time(start, timedelta(minutes=5), after))  # 12:15, expected 12:20
```

The docstring says "strictly after", which matches what we need. Our jobs are not idempotent (they send \
e-mails), so this is fairly painful.

cronwheel 0.9.4 on Python 3.11 (also seen on 3.10).""",
        imports=("from datetime import datetime, timedelta",),
        support="",
        func="next_fire_time",
        buggy='''def next_fire_time(start: datetime, interval: timedelta, after: datetime) -> datetime:
    """Return the first tick of the schedule strictly after ``after``."""
    if interval <= timedelta(0):
        raise ScheduleError(f"interval must be positive, got {interval!r}")
    if after < start:
        return start
    elapsed = after - start
    ticks = elapsed // interval
    if elapsed % interval:
        ticks += 1
    return start + ticks * interval
''',
        fixes=(
            (
                """    ticks = elapsed // interval
    if elapsed % interval:
        ticks += 1
""",
                """    # "strictly after": a wake-up that lands exactly on a tick must not fire that tick again
    ticks = elapsed // interval + 1
""",
            ),
        ),
        caller='''def due_jobs(jobs: list[Job], now: datetime) -> list[Job]:
    """Jobs whose next run is due at ``now``, updating their ``next_run`` in place."""
    due = []
    for job in jobs:
        if job.next_run <= now:
            due.append(job)
            job.next_run = next_fire_time(job.start, job.interval, now)
    return due
''',
        repro="""from datetime import datetime, timedelta, timezone
from cronwheel.schedule import next_fire_time

start = datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)
for minutes in (14, 15, 16):
    after = start + timedelta(minutes=minutes)
    print(minutes, next_fire_time(start, timedelta(minutes=5), after).time())""",
        repro_bad="14 12:15:00\n15 12:15:00\n16 12:20:00",
        repro_good="14 12:15:00\n15 12:20:00\n16 12:20:00",
        test_imports=("from datetime import datetime, timedelta, timezone",),
        test_src="""

def test_next_fire_time_on_boundary_moves_to_next_tick():
    start = datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)
    after = start + timedelta(minutes=15)
    assert next_fire_time(start, timedelta(minutes=5), after) == start + timedelta(minutes=20)


def test_next_fire_time_before_start_returns_start():
    start = datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)
    assert next_fire_time(start, timedelta(minutes=5), start - timedelta(hours=1)) == start
""",
        new_ids=(
            "test_next_fire_time_on_boundary_moves_to_next_tick",
            "test_next_fire_time_before_start_returns_start",
        ),
        failures=(
            Failure(
                "test_next_fire_time_on_boundary_moves_to_next_tick",
                "",
                "assert next_fire_time",
                (
                    "AssertionError: assert datetime.datetime(2024, 3, 1, 12, 15, tzinfo=datetime.timezone.utc)"
                    " == (datetime.datetime(2024, 3, 1, 12, 0, tzinfo=datetime.timezone.utc)"
                    " + datetime.timedelta(seconds=1200))",
                    " +  where datetime.datetime(2024, 3, 1, 12, 15, tzinfo=datetime.timezone.utc) = "
                    "next_fire_time(datetime.datetime(2024, 3, 1, 12, 0, tzinfo=datetime.timezone.utc), "
                    "datetime.timedelta(seconds=300), datetime.datetime(2024, 3, 1, 12, 15, "
                    "tzinfo=datetime.timezone.utc))",
                ),
            ),
        ),
        cause="when the elapsed time is an exact multiple of the interval the tick count is not "
        "incremented, so the function returns `after` itself instead of the next tick",
        fix_note="always advance to the tick after the last completed one (`elapsed // interval + 1`)",
        hunch="the rounding up with `elapsed % interval` looks like the culprit: on an exact boundary the "
        "remainder is zero and nothing moves the tick forward",
    ),
    Project(
        name="pagesmith",
        org="pagesmith",
        version="1.12.0",
        layout="src",
        nouns=("page", "template", "slug", "heading", "layout", "asset", "section", "anchor", "toc"),
        module="slugs",
        others=("toc", "pages", "render", "frontmatter", "assets"),
        errors=("PageError", "TemplateError"),
        deps=("markdown-it-py>=3.0", "jinja2>=3.1", "pyyaml>=6.0"),
        slug="empty-anchor-non-ascii",
        title="Headings without Latin letters get an empty anchor id",
        issue="""Our documentation is partly in Russian and Japanese. Since upgrading to 1.12 the table of \
contents links for those headings are broken: the generated anchors are `id=""`, `id="-1"`, `id="-2"` and so on, \
so every link in the TOC jumps to the top of the page.

Reproduction:

```python
from pagesmith.slugs import slugify

seen = {}
print(repr(slugify("Установка", seen)))  # ''
print(repr(slugify("配置", seen)))       # '-1'
```

I would expect some non-empty fallback (many generators use `section`, `section-1`, ...). Keeping the existing \
ASCII behaviour for Latin headings matters to us because external sites link to those anchors.

pagesmith 1.12.0, Python 3.11.6, macOS 14.""",
        imports=("import re", "import unicodedata"),
        support="""_SLUG_STRIP = re.compile(r"[^\\w\\s-]", re.ASCII)
_SLUG_DASHES = re.compile(r"[\\s_-]+")
""",
        func="slugify",
        buggy='''def slugify(text: str, seen: dict[str, int] | None = None, *, max_length: int = 64) -> str:
    """Turn a heading into a URL fragment, unique within ``seen``."""
    normalized = unicodedata.normalize("NFKD", text)
    ascii_text = normalized.encode("ascii", "ignore").decode("ascii")
    slug = _SLUG_STRIP.sub("", ascii_text.lower())
    slug = _SLUG_DASHES.sub("-", slug).strip("-")[:max_length]
    if seen is None:
        return slug
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}-{count}"
''',
        fixes=(
            (
                """    slug = _SLUG_DASHES.sub("-", slug).strip("-")[:max_length]
""",
                """    slug = _SLUG_DASHES.sub("-", slug).strip("-")[:max_length]
    if not slug:
        # headings without any ASCII letters (Cyrillic, CJK, emoji) still need a usable anchor
        slug = "section"
""",
            ),
        ),
        caller='''def build_toc(headings: list[Heading]) -> list[TocItem]:
    """Table of contents entries with unique anchors, in document order."""
    seen: dict[str, int] = {}
    return [TocItem(h.level, h.text, slugify(h.text, seen)) for h in headings]
''',
        repro="""from pagesmith.slugs import slugify

seen = {}
for heading in ["Installation", "Установка", "配置", "Installation"]:
    print(repr(heading), "->", repr(slugify(heading, seen)))""",
        repro_bad="'Installation' -> 'installation'\n'Установка' -> ''\n'配置' -> '-1'\n"
        "'Installation' -> 'installation-1'",
        repro_good="'Installation' -> 'installation'\n'Установка' -> 'section'\n'配置' -> 'section-1'\n"
        "'Installation' -> 'installation-1'",
        test_imports=(),
        test_src="""

def test_slugify_non_ascii_heading_gets_fallback_anchor():
    seen = {}
    assert slugify("Установка", seen) == "section"
    assert slugify("配置", seen) == "section-1"


def test_slugify_ascii_heading_unchanged():
    assert slugify("Getting Started!") == "getting-started"
""",
        new_ids=("test_slugify_non_ascii_heading_gets_fallback_anchor", "test_slugify_ascii_heading_unchanged"),
        failures=(
            Failure(
                "test_slugify_non_ascii_heading_gets_fallback_anchor",
                "",
                'assert slugify("Установка", seen)',
                (
                    "AssertionError: assert '' == 'section'",
                    "",
                    "  - section",
                    " +  where '' = slugify('Установка', {})",
                ),
            ),
        ),
        cause="the ASCII transliteration drops every character of a non-Latin heading, and nothing replaces "
        "the resulting empty slug before the duplicate counter is applied",
        fix_note="fall back to the slug `section` when nothing is left after stripping",
        hunch="the `encode('ascii', 'ignore')` step must be throwing away the whole heading when it has no "
        "Latin letters, leaving an empty string that the de-duplication then numbers",
    ),
    Project(
        name="tidepool",
        org="tidepool-io",
        version="3.0.2",
        layout="src",
        nouns=("pool", "connection", "lease", "timeout", "host", "socket", "retry", "backoff", "idle"),
        module="pool",
        others=("connection", "hosts", "retry", "metrics", "config"),
        errors=("PoolError", "PoolTimeout"),
        deps=("anyio>=4.0",),
        slug="zero-timeout-blocks",
        title="Pool.acquire(timeout=0) blocks forever instead of failing fast",
        issue="""The docs for `Pool.acquire` say "`timeout=0` raises `PoolTimeout` immediately when no \
connection is free". In practice, with an exhausted pool, `acquire(timeout=0)` blocks until a connection is \
released, exactly like `timeout=None`. We use the zero timeout in a health check, which now hangs under load.

```python
from tidepool import Pool

pool = Pool("db.internal:5432", max_size=1)
held = pool.acquire()
pool.acquire(timeout=0)   # never returns
```

From a quick look the timeout is converted to a deadline somewhere and 0 seems to be treated as "no timeout". \
Negative timeouts are correctly rejected.

tidepool 3.0.2, CPython 3.11.7, Debian bookworm.""",
        imports=("import time",),
        support="",
        func="compute_deadline",
        buggy='''def compute_deadline(timeout: float | None, now: float | None = None) -> float | None:
    """Translate a user timeout into an absolute deadline on the monotonic clock."""
    if not timeout:
        return None
    if timeout < 0:
        raise PoolError(f"timeout must be >= 0, got {timeout}")
    now = time.monotonic() if now is None else now
    return now + timeout
''',
        fixes=(
            (
                """    if not timeout:
        return None
""",
                """    if timeout is None:
        # None waits forever; 0 is a real deadline ("now") and must not be treated as falsy
        return None
""",
            ),
        ),
        caller='''def wait_for_slot(pool: Pool, timeout: float | None) -> Connection:
    """Block until a connection is free or the deadline passes."""
    deadline = compute_deadline(timeout)
    while not pool.idle:
        if deadline is not None and time.monotonic() >= deadline:
            raise PoolTimeout(f"no connection available after {timeout}s")
        pool.wait_released(0.05)
    return pool.idle.pop()
''',
        repro="""from tidepool.pool import compute_deadline

for timeout in (None, 0, 0.0, 2.5):
    print(repr(timeout), "->", compute_deadline(timeout, now=100.0))""",
        repro_bad="None -> None\n0 -> None\n0.0 -> None\n2.5 -> 102.5",
        repro_good="None -> None\n0 -> 100.0\n0.0 -> 100.0\n2.5 -> 102.5",
        test_imports=(),
        test_src="""

@pytest.mark.parametrize("timeout", [0, 0.0])
def test_zero_timeout_means_deadline_now(timeout):
    assert compute_deadline(timeout, now=100.0) == 100.0


def test_none_timeout_has_no_deadline():
    assert compute_deadline(None, now=100.0) is None
""",
        new_ids=(
            "test_zero_timeout_means_deadline_now[0]",
            "test_zero_timeout_means_deadline_now[0.0]",
            "test_none_timeout_has_no_deadline",
        ),
        failures=tuple(
            Failure(
                f"test_zero_timeout_means_deadline_now[{t}]",
                f"timeout = {t}",
                "assert compute_deadline",
                ("assert None == 100.0", f" +  where None = compute_deadline({t}, now=100.0)"),
            )
            for t in ("0", "0.0")
        ),
        cause="`compute_deadline` tests the timeout for truthiness, so `0` and `0.0` are treated like `None` "
        "and produce no deadline at all",
        fix_note="only `None` means no deadline; zero becomes a deadline of now",
        hunch="a truthiness check such as `if not timeout:` would explain it, since zero is falsy",
    ),
    Project(
        name="quiverdb",
        org="quiverdb",
        version="0.6.0",
        layout="flat",
        nouns=("query", "column", "table", "clause", "join", "alias", "param", "filter", "cursor"),
        module="clauses",
        others=("query", "schema", "dialect", "engine", "cursor"),
        errors=("QueryError", "SchemaError"),
        deps=("typing-extensions>=4.8",),
        slug="empty-in-clause",
        title="where_in() with an empty list produces invalid SQL (`IN ()`)",
        issue="""Filtering on an empty list of ids generates `"id" IN ()`, which SQLite and PostgreSQL both \
reject with a syntax error. This comes up naturally when the list of ids is computed, e.g. "users that belong \
to any of these teams" when the user is in no team.

```python
import sqlite3
from quiverdb import Query

conn = sqlite3.connect(":memory:")
conn.execute("create table users (id integer primary key, name text)")
Query("users").where_in("id", []).fetch_all(conn)
# sqlite3.OperationalError: near ")": syntax error
```

An empty `IN` should simply match nothing (and `NOT IN` with an empty list should match everything), which is \
what SQLAlchemy and Django do. Passing a string instead of a list already raises a clear `QueryError`, which is \
good.

quiverdb 0.6.0, Python 3.11.9, sqlite 3.45.""",
        imports=("from collections.abc import Sequence",),
        support='''def quote_ident(name: str) -> str:
    """Quote an identifier for SQLite and PostgreSQL, doubling embedded quotes."""
    return '"' + name.replace('"', '""') + '"'
''',
        func="render_in",
        buggy='''def render_in(
    column: str, values: Sequence[object], params: list[object], *, negate: bool = False
) -> str:
    """Render ``column IN (...)`` with one placeholder per value, appending the values to ``params``."""
    if isinstance(values, (str, bytes)):
        raise QueryError("IN expects a sequence of values, not a string")
    placeholders = ", ".join("?" for _ in values)
    params.extend(values)
    operator = "NOT IN" if negate else "IN"
    return f"{quote_ident(column)} {operator} ({placeholders})"
''',
        fixes=(
            (
                """    placeholders = ", ".join("?" for _ in values)
""",
                """    if not values:
        # "IN ()" is a syntax error in SQLite and PostgreSQL; an empty set matches nothing
        return "1 = 1" if negate else "1 = 0"
    placeholders = ", ".join("?" for _ in values)
""",
            ),
        ),
        caller='''def where_in(self, column: str, values: Sequence[object], *, negate: bool = False) -> Query:
    """Return a copy of the query restricted to rows whose ``column`` is in ``values``."""
    params: list[object] = []
    clause = render_in(column, list(values), params, negate=negate)
    return self._with_clause(clause, params)
''',
        repro="""import sqlite3
from quiverdb import Query

conn = sqlite3.connect(":memory:")
conn.execute("create table users (id integer primary key, name text)")
conn.execute("insert into users (name) values ('ada'), ('grace')")
query = Query("users").where_in("id", [])
print(query.sql())
print(query.fetch_all(conn))""",
        repro_bad="""SELECT * FROM "users" WHERE "id" IN ()
Traceback (most recent call last):
  File "<stdin>", line 9, in <module>
  File "/testbed/quiverdb/query.py", line 188, in fetch_all
    cursor = conn.execute(sql, params)
             ^^^^^^^^^^^^^^^^^^^^^^^^^
sqlite3.OperationalError: near ")": syntax error""",
        repro_good='SELECT * FROM "users" WHERE 1 = 0\n[]',
        test_imports=(),
        test_src="""

def test_render_in_empty_matches_nothing():
    params = []
    assert render_in("id", [], params) == "1 = 0"
    assert params == []


def test_render_in_empty_negated_matches_everything():
    assert render_in("id", [], [], negate=True) == "1 = 1"
""",
        new_ids=("test_render_in_empty_matches_nothing", "test_render_in_empty_negated_matches_everything"),
        failures=(
            Failure(
                "test_render_in_empty_matches_nothing",
                "",
                'assert render_in("id", [], params)',
                ("assert '\"id\" IN ()' == '1 = 0'", "", "  - 1 = 0", '  + "id" IN ()'),
            ),
            Failure(
                "test_render_in_empty_negated_matches_everything",
                "",
                "assert render_in",
                ("assert '\"id\" NOT IN ()' == '1 = 1'", "", "  - 1 = 1", '  + "id" NOT IN ()'),
            ),
        ),
        cause="`render_in` joins one placeholder per value, so an empty sequence renders as `IN ()`",
        fix_note="render an always-false (`1 = 0`) or, for NOT IN, always-true (`1 = 1`) predicate when "
        "the value list is empty",
        hunch="the placeholders are probably built with a join over the values, which yields an empty "
        "string for an empty list",
    ),
    Project(
        name="gaugehouse",
        org="gaugehouse",
        version="0.14.3",
        layout="src",
        nouns=("metric", "sample", "bucket", "histogram", "label", "series", "window", "quantile", "counter"),
        module="histogram",
        others=("registry", "exposition", "labels", "series", "collector"),
        errors=("MetricError", "LabelError"),
        deps=("prometheus-client>=0.19",),
        slug="bucket-boundary",
        title="Histogram counts observations equal to a bucket bound in the next bucket",
        issue="""Prometheus histogram buckets are cumulative with an inclusive upper bound (`le`). In \
gaugehouse an observation that is exactly equal to a bucket bound is counted in the *next* bucket:

```python
from gaugehouse.histogram import Histogram

h = Histogram("latency_seconds", buckets=[0.1, 0.5, 1.0])
h.observe(0.5)
print(h.cumulative_counts())   # {0.1: 0, 0.5: 0, 1.0: 1, inf: 1}
```

Expected `0.5: 1`. This skews our SLO dashboards, because our latency SLO threshold is itself a bucket bound \
and a lot of requests are reported at exactly that value by the upstream proxy (it rounds to milliseconds).

The exported text format (`/metrics`) shows the same numbers, so it is not a rendering issue.

gaugehouse 0.14.3, Python 3.11.""",
        imports=("import bisect", "import math", "from collections.abc import Sequence"),
        support="",
        func="bucket_index",
        buggy='''def bucket_index(bounds: Sequence[float], value: float) -> int:
    """Index of the first bucket whose upper bound is >= ``value`` (Prometheus ``le`` semantics)."""
    if math.isnan(value):
        raise MetricError("cannot observe NaN")
    index = bisect.bisect_right(bounds, value)
    return min(index, len(bounds))
''',
        fixes=(
            (
                """    index = bisect.bisect_right(bounds, value)
""",
                """    # bounds are inclusive ("le"), so a value equal to a bound belongs to that bucket
    index = bisect.bisect_left(bounds, value)
""",
            ),
        ),
        caller='''def observe_many(histogram: Histogram, values: Sequence[float]) -> None:
    """Record several observations under one lock acquisition."""
    with histogram.lock:
        for value in values:
            histogram.counts[bucket_index(histogram.bounds, value)] += 1
            histogram.total += value
''',
        repro="""from gaugehouse.histogram import Histogram

h = Histogram("latency_seconds", buckets=[0.1, 0.5, 1.0])
for value in (0.05, 0.1, 0.5, 0.7):
    h.observe(value)
print(h.cumulative_counts())""",
        repro_bad="{0.1: 1, 0.5: 2, 1.0: 4, inf: 4}",
        repro_good="{0.1: 2, 0.5: 3, 1.0: 4, inf: 4}",
        test_imports=(),
        test_src="""

@pytest.mark.parametrize(("value", "expected"), [(0.1, 0), (0.5, 1), (1.0, 2), (1.5, 3)])
def test_bucket_index_bound_is_inclusive(value, expected):
    assert bucket_index([0.1, 0.5, 1.0], value) == expected
""",
        new_ids=tuple(
            f"test_bucket_index_bound_is_inclusive[{v}-{e}]"
            for v, e in (("0.1", 0), ("0.5", 1), ("1.0", 2), ("1.5", 3))
        ),
        failures=tuple(
            Failure(
                f"test_bucket_index_bound_is_inclusive[{v}-{e}]",
                f"value = {v}, expected = {e}",
                "assert bucket_index",
                (f"assert {e + 1} == {e}", f" +  where {e + 1} = bucket_index([0.1, 0.5, 1.0], {v})"),
            )
            for v, e in (("0.1", 0), ("0.5", 1), ("1.0", 2))
        ),
        cause="`bucket_index` uses `bisect_right`, which places a value equal to a bound after it, i.e. in "
        "the next bucket",
        fix_note="use `bisect_left` so that a value equal to a bound lands in that bound's bucket",
        hunch="an off-by-one at the boundary smells like `bisect_right` where `bisect_left` is needed",
    ),
    Project(
        name="confetti",
        org="confetti-config",
        version="4.1.0",
        layout="src",
        nouns=("config", "key", "section", "override", "source", "schema", "default", "profile", "setting"),
        module="env",
        others=("loader", "schema", "sources", "merge", "profiles"),
        errors=("ConfigError", "SchemaError"),
        deps=("tomli>=2.0; python_version<'3.11'", "platformdirs>=3.0"),
        slug="false-env-bool",
        title="CONFETTI_DEBUG=false turns debug mode on",
        issue="""Environment overrides for boolean settings are always true as long as the variable is set \
to a non-empty string. With this schema:

```python
class AppConfig(confetti.Schema):
    debug: bool = False
```

running with `CONFETTI_DEBUG=false` (or `0`, or `off`) enables debug mode. Only an empty value disables it, \
which is surprising and not what the documentation promises ("true/false, yes/no, on/off and 1/0 are \
accepted").

```python
from confetti.env import coerce_env_value
print(coerce_env_value("false", bool))   # True
```

An unrecognised value such as `maybe` should probably raise `ConfigError` instead of silently being truthy.

confetti 4.1.0, Python 3.11.5.""",
        imports=(),
        support="",
        func="coerce_env_value",
        buggy='''def coerce_env_value(raw: str, target: type) -> object:
    """Convert an environment variable string to the type declared in the schema."""
    text = raw.strip()
    if target is bool:
        return bool(text)
    if target is int:
        return int(text, 0)
    if target is float:
        return float(text)
    if target is list:
        return [part.strip() for part in text.split(",") if part.strip()]
    return text
''',
        fixes=(
            (
                """    if target is bool:
        return bool(text)
""",
                """    if target is bool:
        # bool("false") is True: map the documented words explicitly and reject anything else
        lowered = text.lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off", ""}:
            return False
        raise ConfigError(f"cannot interpret {raw!r} as a boolean")
""",
            ),
        ),
        caller='''def apply_env_overrides(values: dict[str, object], schema: Schema, environ: dict[str, str]) -> None:
    """Overwrite ``values`` with CONFETTI_* variables, converted to the schema's field types."""
    for name, field_type in schema.fields().items():
        raw = environ.get(ENV_PREFIX + name.upper())
        if raw is not None:
            values[name] = coerce_env_value(raw, field_type)
''',
        repro="""from confetti.env import coerce_env_value

for raw in ("true", "false", "0", "off", "yes"):
    print(f"{raw!r:8} -> {coerce_env_value(raw, bool)!r}")""",
        repro_bad="'true'   -> True\n'false'  -> True\n'0'      -> True\n'off'    -> True\n'yes'    -> True",
        repro_good="'true'   -> True\n'false'  -> False\n'0'      -> False\n'off'    -> False\n'yes'    -> True",
        test_imports=(),
        test_src="""

@pytest.mark.parametrize("raw", ["false", "False", "0", "no", "off", " off "])
def test_coerce_env_value_false_words(raw):
    assert coerce_env_value(raw, bool) is False


def test_coerce_env_value_rejects_unknown_boolean():
    with pytest.raises(ConfigError, match="boolean"):
        coerce_env_value("maybe", bool)
""",
        new_ids=(
            *(f"test_coerce_env_value_false_words[{r}]" for r in ("false", "False", "0", "no", "off", " off ")),
            "test_coerce_env_value_rejects_unknown_boolean",
        ),
        failures=(
            *(
                Failure(
                    f"test_coerce_env_value_false_words[{r}]",
                    f"raw = '{r}'",
                    "assert coerce_env_value",
                    ("assert True is False", f" +  where True = coerce_env_value('{r}', bool)"),
                )
                for r in ("false", "False", "0", "no", "off", " off ")
            ),
            Failure(
                "test_coerce_env_value_rejects_unknown_boolean",
                "",
                "with pytest.raises",
                ("Failed: DID NOT RAISE <class 'confetti.errors.ConfigError'>",),
            ),
        ),
        cause="booleans are converted with `bool(text)`, and every non-empty string is truthy",
        fix_note="map the documented true/false words explicitly and raise `ConfigError` for anything else",
        hunch="my guess is a plain `bool(...)` on the string, which is true for any non-empty value",
    ),
    Project(
        name="geofold",
        org="geofold",
        version="0.8.2",
        layout="flat",
        nouns=("point", "polygon", "bbox", "ring", "tile", "projection", "segment", "vertex", "bounds"),
        module="bbox",
        others=("tiles", "geometry", "projection", "io", "ops"),
        errors=("GeometryError", "ProjectionError"),
        deps=("numpy>=1.26",),
        slug="antimeridian-bbox",
        title="Bounding boxes that cross the antimeridian never contain any point",
        issue="""`BBox` documents that `west > east` describes a box crossing the 180th meridian (Fiji, the \
Aleutians, tiles around the date line). Such boxes are created correctly, but `bbox_contains` returns `False` \
for every point, including points that are clearly inside:

```python
from geofold.bbox import BBox, bbox_contains

fiji = BBox(west=176.0, south=-21.0, east=-178.0, north=-12.0)
print(bbox_contains(fiji, 178.4, -18.1))   # False, Suva is inside
```

Because `tiles_for_bbox` filters candidate tiles with `bbox_contains`, tile requests for the Pacific come back \
empty. Boxes that do not cross the antimeridian work fine.

geofold 0.8.2 (pip), Python 3.11.4.""",
        imports=("from dataclasses import dataclass",),
        support='''@dataclass(frozen=True)
class BBox:
    """Axis-aligned box in degrees; ``west > east`` means it crosses the antimeridian."""

    west: float
    south: float
    east: float
    north: float


def normalize_lon(lon: float) -> float:
    """Wrap a longitude into [-180, 180)."""
    return (lon + 180.0) % 360.0 - 180.0
''',
        func="bbox_contains",
        buggy='''def bbox_contains(bbox: BBox, lon: float, lat: float) -> bool:
    """Return True when the point lies inside ``bbox`` (edges included)."""
    if not -90.0 <= lat <= 90.0:
        raise GeometryError(f"latitude out of range: {lat}")
    lon = normalize_lon(lon)
    if not bbox.south <= lat <= bbox.north:
        return False
    return bbox.west <= lon <= bbox.east
''',
        fixes=(
            (
                """    return bbox.west <= lon <= bbox.east
""",
                """    if bbox.west <= bbox.east:
        return bbox.west <= lon <= bbox.east
    # the box crosses the antimeridian: it is the union of [west, 180) and [-180, east]
    return lon >= bbox.west or lon <= bbox.east
""",
            ),
        ),
        caller='''def tiles_for_bbox(bbox: BBox, zoom: int) -> list[Tile]:
    """Tiles at ``zoom`` whose centre falls inside ``bbox``."""
    candidates = candidate_tiles(bbox, zoom)
    return [tile for tile in candidates if bbox_contains(bbox, *tile.center())]
''',
        repro="""from geofold.bbox import BBox, bbox_contains

fiji = BBox(west=176.0, south=-21.0, east=-178.0, north=-12.0)
for lon, lat in [(178.4, -18.1), (-179.5, -16.0), (10.0, -15.0)]:
    print(lon, lat, bbox_contains(fiji, lon, lat))""",
        repro_bad="178.4 -18.1 False\n-179.5 -16.0 False\n10.0 -15.0 False",
        repro_good="178.4 -18.1 True\n-179.5 -16.0 True\n10.0 -15.0 False",
        test_imports=(),
        test_src="""

def test_bbox_contains_across_antimeridian():
    box = BBox(west=170.0, south=-20.0, east=-170.0, north=20.0)
    assert bbox_contains(box, 179.5, 0.0)
    assert bbox_contains(box, -175.0, 5.0)
    assert not bbox_contains(box, 0.0, 0.0)
""",
        new_ids=("test_bbox_contains_across_antimeridian",),
        failures=(
            Failure(
                "test_bbox_contains_across_antimeridian",
                "",
                "assert bbox_contains(box, 179.5",
                (
                    "assert False",
                    " +  where False = bbox_contains(BBox(west=170.0, south=-20.0, east=-170.0, north=20.0), "
                    "179.5, 0.0)",
                ),
            ),
        ),
        cause="`bbox_contains` always tests `west <= lon <= east`, which is empty when the box crosses the "
        "antimeridian and `west > east`",
        fix_note="treat a box with `west > east` as the union of `[west, 180)` and `[-180, east]`",
        hunch="the longitude test probably assumes `west <= east`, which can never hold for these boxes",
    ),
    Project(
        name="shellac",
        org="shellac-cli",
        version="2.0.0",
        layout="src",
        nouns=("command", "option", "argument", "flag", "parser", "group", "context", "choice", "alias"),
        module="flags",
        others=("parser", "commands", "context", "help", "completion"),
        errors=("UsageError", "BadParameter"),
        deps=("colorama>=0.4; platform_system=='Windows'",),
        slug="cli-flag-vs-env",
        title="--no-color is ignored when SHELLAC_COLOR is set in the environment",
        issue="""The documented precedence for option values is: command line, then environment variable, \
then default. For boolean flags the environment wins instead:

```console
$ export SHELLAC_COLOR=1
$ mytool --no-color status      # output is still coloured
```

Minimal reproduction without a CLI:

```python
from shellac.flags import Option, resolve_flag

color = Option("color", default=True)
print(resolve_flag(color, False, {"SHELLAC_COLOR": "1"}))   # True, expected False
```

Value options (`--level`, `--output`) follow the documented order; only flags seem affected. We set \
`SHELLAC_COLOR=1` globally in CI, so there is currently no way to turn colours off for a single command.

shellac 2.0.0, Python 3.11.8.""",
        imports=("from collections.abc import Mapping", "from dataclasses import dataclass"),
        support='''ENV_PREFIX = "SHELLAC_"
TRUTHY = frozenset({"1", "true", "yes", "on"})


@dataclass
class Option:
    """A declared command-line option."""

    name: str
    default: object = None
    envvar: str | None = None
    help: str = ""
''',
        func="resolve_flag",
        buggy='''def resolve_flag(option: Option, cli_value: bool | None, environ: Mapping[str, str]) -> bool:
    """Effective value of a boolean flag: command line, then environment, then default."""
    env_name = option.envvar or f"{ENV_PREFIX}{option.name.upper()}"
    raw = environ.get(env_name)
    if raw is not None:
        return raw.strip().lower() in TRUTHY
    if cli_value is not None:
        return cli_value
    return bool(option.default)
''',
        fixes=(
            (
                """    env_name = option.envvar or f"{ENV_PREFIX}{option.name.upper()}"
    raw = environ.get(env_name)
    if raw is not None:
        return raw.strip().lower() in TRUTHY
    if cli_value is not None:
        return cli_value
""",
                """    if cli_value is not None:
        # an explicit --flag / --no-flag always wins over the environment
        return cli_value
    env_name = option.envvar or f"{ENV_PREFIX}{option.name.upper()}"
    raw = environ.get(env_name)
    if raw is not None:
        return raw.strip().lower() in TRUTHY
""",
            ),
        ),
        caller='''def resolve_params(
    options: list[Option], parsed: dict[str, object], environ: Mapping[str, str]
) -> dict[str, object]:
    """Final parameter values for a command invocation."""
    values = {}
    for option in options:
        if option.is_flag:
            values[option.name] = resolve_flag(option, parsed.get(option.name), environ)
        else:
            values[option.name] = resolve_value(option, parsed.get(option.name), environ)
    return values
''',
        repro="""from shellac.flags import Option, resolve_flag

color = Option("color", default=True)
print("cli=False env=1 ->", resolve_flag(color, False, {"SHELLAC_COLOR": "1"}))
print("cli=None  env=0 ->", resolve_flag(color, None, {"SHELLAC_COLOR": "0"}))
print("cli=True  no env ->", resolve_flag(color, True, {}))""",
        repro_bad="cli=False env=1 -> True\ncli=None  env=0 -> False\ncli=True  no env -> True",
        repro_good="cli=False env=1 -> False\ncli=None  env=0 -> False\ncli=True  no env -> True",
        test_imports=(),
        test_src="""

def test_cli_flag_overrides_environment():
    option = Option("color", default=True)
    assert resolve_flag(option, False, {"SHELLAC_COLOR": "1"}) is False


def test_environment_used_when_flag_absent():
    option = Option("color", default=True)
    assert resolve_flag(option, None, {"SHELLAC_COLOR": "0"}) is False
""",
        new_ids=("test_cli_flag_overrides_environment", "test_environment_used_when_flag_absent"),
        failures=(
            Failure(
                "test_cli_flag_overrides_environment",
                "",
                "assert resolve_flag",
                (
                    "AssertionError: assert True is False",
                    " +  where True = resolve_flag(Option(name='color', default=True, envvar=None, help=''), "
                    "False, {'SHELLAC_COLOR': '1'})",
                ),
            ),
        ),
        cause="`resolve_flag` consults the environment before the parsed command-line value, the reverse "
        "of the documented precedence",
        fix_note="check the explicit command-line value first, then the environment, then the default",
        hunch="the flag resolution probably looks at the environment first and returns early",
    ),
    Project(
        name="ratchet",
        org="ratchet-rl",
        version="1.4.0",
        layout="flat",
        nouns=("bucket", "token", "rate", "window", "limit", "quota", "burst", "refill", "clock"),
        module="bucket",
        others=("limiter", "store", "middleware", "policy", "clock"),
        errors=("RateLimitError", "StoreError"),
        deps=("redis>=5.0",),
        slug="refill-truncates",
        title="Token bucket never refills when checked more than once per second",
        issue="""With a `TokenBucket(capacity=10, rate=5)` in front of an endpoint that is hit every 100 ms, \
the bucket drains once and then rejects every request forever. It looks like tokens are only added for whole \
seconds that elapsed between two calls, so frequent callers never accumulate anything.

```python
from ratchet.bucket import refill

tokens = 0.0
for _ in range(20):               # 2 seconds in 100 ms steps
    tokens = refill(tokens, capacity=10, rate_per_s=5.0, elapsed_s=0.1)
print(tokens)                     # 0.0, expected 10.0
```

With a single call of `elapsed_s=2.0` the result is 10.0 as expected. This makes the limiter much stricter \
than configured for exactly the clients it is meant for (chatty ones).

ratchet 1.4.0, Python 3.11, Redis store (the in-memory store shows the same).""",
        imports=(),
        support="",
        func="refill",
        buggy='''def refill(tokens: float, capacity: int, rate_per_s: float, elapsed_s: float) -> float:
    """Add the tokens earned during ``elapsed_s`` seconds, capped at ``capacity``."""
    if elapsed_s < 0:
        # the monotonic clock never goes backwards; a negative value means a caller bug
        raise RateLimitError(f"negative elapsed time: {elapsed_s}")
    earned = int(elapsed_s) * rate_per_s
    return min(float(capacity), tokens + earned)
''',
        fixes=(
            (
                """    earned = int(elapsed_s) * rate_per_s
""",
                """    # keep fractional seconds: callers that check every 100 ms must still earn tokens
    earned = elapsed_s * rate_per_s
""",
            ),
        ),
        caller='''def try_acquire(self, key: str, cost: float = 1.0) -> bool:
    """Take ``cost`` tokens for ``key`` if available; never blocks."""
    state = self.store.load(key)
    now = self.clock()
    tokens = refill(state.tokens, self.capacity, self.rate, now - state.updated_at)
    allowed = tokens >= cost
    self.store.save(key, BucketState(tokens - cost if allowed else tokens, now))
    return allowed
''',
        repro="""from ratchet.bucket import refill

tokens = 0.0
for _ in range(20):
    tokens = refill(tokens, capacity=10, rate_per_s=5.0, elapsed_s=0.1)
print(f"tokens after 2s of 100ms ticks: {tokens}")
print("single 2s step:", refill(0.0, capacity=10, rate_per_s=5.0, elapsed_s=2.0))""",
        repro_bad="tokens after 2s of 100ms ticks: 0.0\nsingle 2s step: 10.0",
        repro_good="tokens after 2s of 100ms ticks: 10.0\nsingle 2s step: 10.0",
        test_imports=(),
        test_src="""

def test_refill_accumulates_fractional_seconds():
    tokens = 0.0
    for _ in range(10):
        tokens = refill(tokens, capacity=10, rate_per_s=4.0, elapsed_s=0.25)
    assert tokens == pytest.approx(10.0)
""",
        new_ids=("test_refill_accumulates_fractional_seconds",),
        failures=(
            Failure(
                "test_refill_accumulates_fractional_seconds",
                "",
                "assert tokens ==",
                (
                    "assert 0.0 == 10.0 ± 1.0e-05",
                    "",
                    "  comparison failed",
                    "  Obtained: 0.0",
                    "  Expected: 10.0 ± 1.0e-05",
                ),
            ),
        ),
        cause="`refill` truncates the elapsed time with `int(elapsed_s)`, so any interval shorter than a "
        "second earns zero tokens",
        fix_note="multiply the rate by the exact elapsed time instead of its integer part",
        hunch="something is rounding the elapsed time down to whole seconds, maybe an `int()` or `//`",
    ),
    Project(
        name="inkwell",
        org="inkwell-i18n",
        version="0.21.1",
        layout="src",
        nouns=("message", "locale", "catalog", "plural", "translation", "domain", "fallback", "placeholder"),
        module="plural",
        others=("catalog", "formatting", "locale", "loader", "fallback"),
        errors=("CatalogError", "LocaleError"),
        deps=("babel>=2.14",),
        slug="russian-plural-teens",
        title='Russian plural forms are wrong for 11-14 ("11 файл")',
        issue="""East Slavic plural rules treat 11-14 specially: it is "1 файл", "2 файла", "5 файлов", but \
"11 файлов", "12 файлов", "14 файлов" and "111 файлов". inkwell picks the singular for 11 and the few-form for \
12-14:

```python
from inkwell.plural import plural_index

forms = ["файл", "файла", "файлов"]
for n in (1, 2, 5, 11, 12, 21):
    print(n, forms[plural_index(n, "ru")])
# 11 файл   <- wrong
# 12 файла  <- wrong
```

The CLDR rule for `ru`/`uk`/`be` is: one if n % 10 == 1 and n % 100 != 11; few if n % 10 in 2..4 and n % 100 \
not in 12..14; many otherwise. Our Ukrainian catalogue shows the same problem.

inkwell 0.21.1, Python 3.11.7.""",
        imports=(),
        support="""_ONE_OTHER = frozenset({"en", "de", "nl", "sv", "it", "es", "pt"})
_EAST_SLAVIC = frozenset({"ru", "uk", "be"})
""",
        func="plural_index",
        buggy='''def plural_index(n: int, locale: str) -> int:
    """Index of the plural form to use for ``n`` items in ``locale`` (gettext order)."""
    lang = locale.replace("-", "_").split("_", 1)[0].lower()
    if lang in _ONE_OTHER:
        return 0 if n == 1 else 1
    if lang in _EAST_SLAVIC:
        if n % 10 == 1:
            return 0
        if 2 <= n % 10 <= 4:
            return 1
        return 2
    return 0
''',
        fixes=(
            (
                """        if n % 10 == 1:
            return 0
        if 2 <= n % 10 <= 4:
            return 1
""",
                """        # CLDR: 11-14 (and 111-114, ...) take the "many" form despite their last digit
        if n % 10 == 1 and n % 100 != 11:
            return 0
        if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
            return 1
""",
            ),
        ),
        caller='''def ngettext(self, singular: str, plural: str, n: int) -> str:
    """Translate a message with a count, falling back to English rules for missing entries."""
    forms = self._plural_forms.get(singular)
    if not forms:
        return singular if n == 1 else plural
    return forms[min(plural_index(n, self.locale), len(forms) - 1)]
''',
        repro="""from inkwell.plural import plural_index

forms = ["файл", "файла", "файлов"]
for n in (1, 2, 5, 11, 12, 21, 111):
    print(n, forms[plural_index(n, "ru_RU")])""",
        repro_bad="1 файл\n2 файла\n5 файлов\n11 файл\n12 файла\n21 файл\n111 файл",
        repro_good="1 файл\n2 файла\n5 файлов\n11 файлов\n12 файлов\n21 файл\n111 файлов",
        test_imports=(),
        test_src="""

@pytest.mark.parametrize(("n", "expected"), [(11, 2), (12, 2), (14, 2), (111, 2), (21, 0), (22, 1)])
def test_plural_index_russian_teens(n, expected):
    assert plural_index(n, "ru") == expected
""",
        new_ids=tuple(
            f"test_plural_index_russian_teens[{n}-{e}]"
            for n, e in ((11, 2), (12, 2), (14, 2), (111, 2), (21, 0), (22, 1))
        ),
        failures=tuple(
            Failure(
                f"test_plural_index_russian_teens[{n}-2]",
                f"n = {n}, expected = 2",
                "assert plural_index",
                (f"assert {got} == 2", f" +  where {got} = plural_index({n}, 'ru')"),
            )
            for n, got in ((11, 0), (12, 1), (14, 1), (111, 0))
        ),
        cause="the East Slavic branch only looks at `n % 10`, so 11-14 (and 111-114, ...) are classified by "
        "their last digit instead of taking the many-form",
        fix_note="exclude `n % 100` in 11..14 from the one- and few-forms, as the CLDR rule says",
        hunch="the rule is probably implemented with `n % 10` only, missing the `n % 100` exceptions",
    ),
    Project(
        name="packrat",
        org="packrat-cache",
        version="1.7.5",
        layout="flat",
        nouns=("cache", "key", "entry", "ttl", "serializer", "backend", "namespace", "eviction", "hit"),
        module="lru",
        others=("cache", "backends", "serializers", "keys", "stats"),
        errors=("CacheError", "SerializationError"),
        deps=("msgpack>=1.0",),
        slug="lru-evicts-recent",
        title="LRUCache evicts entries that were just read",
        issue="""`LRUCache` behaves like a FIFO: reading a key does not make it "recently used", so the key \
that was read most recently can be the next one evicted.

```python
from packrat import LRUCache

cache = LRUCache(maxsize=2)
cache.set("a", 1)
cache.set("b", 2)
cache.get("a")          # "a" is now the most recently used key
cache.set("c", 3)       # should evict "b"
print(sorted(cache.keys()))   # ['b', 'c'] - "a" was evicted
```

We noticed because the hit rate of our session cache dropped to ~20% after switching from `functools.lru_cache` \
to packrat for the TTL support. Expired entries are removed correctly on read, it is only the ordering.

packrat 1.7.5, Python 3.11.2.""",
        imports=("from collections import OrderedDict", "from dataclasses import dataclass"),
        support='''@dataclass
class Entry:
    """A cached value and its absolute expiry time on the monotonic clock."""

    value: object
    expires_at: float | None = None
''',
        func="lookup",
        buggy='''def lookup(entries: OrderedDict[str, Entry], key: str, now: float) -> Entry | None:
    """Return the live entry for ``key`` and mark it as the most recently used one."""
    entry = entries.get(key)
    if entry is None:
        return None
    if entry.expires_at is not None and entry.expires_at <= now:
        del entries[key]
        return None
    return entry
''',
        fixes=(
            (
                """        del entries[key]
        return None
    return entry
""",
                """        del entries[key]
        return None
    # a hit makes the key the most recently used one; eviction pops from the front
    entries.move_to_end(key)
    return entry
""",
            ),
        ),
        caller='''def get(self, key: str, default: object = None) -> object:
    """Cached value for ``key``, or ``default`` when missing or expired."""
    with self._lock:
        entry = lookup(self._entries, key, self._clock())
        self.stats.record(hit=entry is not None)
        return default if entry is None else entry.value
''',
        repro="""from packrat import LRUCache

cache = LRUCache(maxsize=2)
cache.set("a", 1)
cache.set("b", 2)
cache.get("a")
cache.set("c", 3)
print(sorted(cache.keys()))""",
        repro_bad="['b', 'c']",
        repro_good="['a', 'c']",
        test_imports=("from collections import OrderedDict",),
        test_src="""

def test_lookup_marks_entry_recently_used():
    entries = OrderedDict(a=Entry(1), b=Entry(2))
    assert lookup(entries, "a", now=0.0).value == 1
    assert list(entries) == ["b", "a"]
""",
        new_ids=("test_lookup_marks_entry_recently_used",),
        failures=(
            Failure(
                "test_lookup_marks_entry_recently_used",
                "",
                "assert list(entries)",
                (
                    "AssertionError: assert ['a', 'b'] == ['b', 'a']",
                    "",
                    "  At index 0 diff: 'a' != 'b'",
                    "  Use -v to get more diff",
                ),
            ),
        ),
        cause="`lookup` returns a hit without moving the key to the end of the `OrderedDict`, so the "
        "eviction order is insertion order (FIFO), not recency",
        fix_note="call `entries.move_to_end(key)` on every hit",
        hunch="the read path probably never reorders the `OrderedDict`, so eviction follows insertion order",
    ),
)


@dataclass(frozen=True)
class Shape:
    """How long a session is and how large its context grows: spread like real agent runs."""

    turns: int
    peak_tokens: int  # context size the session (or its first segment) grows to
    compaction_at: float | None = None  # fraction of the turns after which history is compacted


# One shape per project, in PROJECTS order. Turns 10..40 (median 20.5); 8 of 12 aim at >= 30k tokens. Peaks are
# targets: the planner lands within ~15% (below when a short session runs out of big reads).
SHAPES: tuple[Shape, ...] = (
    Shape(20, 36_000),
    Shape(14, 24_000),
    Shape(25, 46_000),
    Shape(10, 15_500),
    Shape(40, 54_000, compaction_at=0.7),
    Shape(18, 38_000),
    Shape(12, 19_000),
    Shape(22, 38_000),
    Shape(16, 27_000),
    Shape(28, 50_000),
    Shape(33, 47_000, compaction_at=0.62),
    Shape(21, 33_000),
)

# --------------------------------------------------------------------------------------------------------
# Procedural Python source in a project's vocabulary.
# --------------------------------------------------------------------------------------------------------

VERBS = (
    "load", "parse", "resolve", "normalize", "validate", "merge", "split", "render", "encode", "decode",
    "flush", "compute", "apply", "collect", "register", "build", "format", "coerce", "update", "prune",
    "emit", "match", "select", "expand", "group", "refresh", "attach", "release",
)  # fmt: skip
GERUNDS = {"split": "splitting", "emit": "emitting", "attach": "attaching", "format": "formatting"}
ATTRS = ("name", "key", "value", "size", "kind", "path", "label", "offset", "status", "priority", "source")
ATTR_TYPES = {
    "key": ("str", '""'), "value": ("object", "None"), "size": ("int", "0"), "kind": ("str", '"default"'),
    "path": ("str | None", "None"), "label": ("str", '""'), "offset": ("int", "0"), "status": ("str", '"new"'),
    "priority": ("int", "100"), "source": ("str | None", "None"), "tags": ("tuple[str, ...]", "()"),
    "extra": ("dict[str, str]", "field(default_factory=dict)"), "weight": ("float", "1.0"),
}  # fmt: skip
CLASS_SUFFIXES = (
    "Registry", "Manager", "Builder", "Parser", "Store", "Resolver", "Writer", "Reader", "Index", "Spec",
    "Policy", "Handler", "Table", "View", "Loader", "Tracker", "Set", "Config",
)  # fmt: skip
QUALIFIERS = (
    "empty", "defaults", "ordering", "duplicates", "round_trip", "strict_mode", "unknown_name", "limit",
    "none", "nested", "unicode", "large_input", "idempotent", "copy", "repr", "equality", "case_insensitive",
)  # fmt: skip
WORDS = (
    "alpha", "beta", "gamma", "delta", "primary", "fallback", "staging", "internal", "legacy", "default",
    "north", "archive", "shadow", "main", "backup", "sample",
)  # fmt: skip


def import_block(lines: list[str]) -> list[str]:
    """isort-style stdlib imports: plain imports first, then one merged ``from`` line per module."""
    plain = sorted({line for line in lines if line.startswith("import ")})
    names: dict[str, set[str]] = {}
    for line in lines:
        if line.startswith("from "):
            module, _, what = line[5:].partition(" import ")
            names.setdefault(module, set()).update(n.strip() for n in what.split(","))
    froms = [
        f"from {m} import {', '.join(sorted(names[m], key=lambda n: (not n.isupper(), n)))}" for m in sorted(names)
    ]
    return plain + froms


def from_import(module: str, names: list[str], width: int = 100) -> list[str]:
    """``from module import a, b`` wrapped the way ruff/black format long import lines."""
    line = f"from {module} import {', '.join(names)}"
    if len(line) <= width:
        return [line]
    return [f"from {module} import (", *[f"    {n}," for n in names], ")"]


def camel(name: str) -> str:
    """snake_case noun to CamelCase class-name fragment."""
    return "".join(part.capitalize() for part in name.split("_"))


def plural(noun: str) -> str:
    """Good-enough English plural for identifiers."""
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def singular(noun: str) -> str:
    """Inverse of :func:`plural` for the identifiers this generator makes."""
    if noun.endswith("ies"):
        return noun[:-3] + "y"
    if noun.endswith(("sses", "xes", "ches", "shes")):
        return noun[:-2]
    if noun.endswith("s") and not noun.endswith("ss"):
        return noun[:-1]
    return noun


def article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def gerund(verb: str) -> str:
    """English -ing form of a verb from VERBS."""
    if verb in GERUNDS:
        return GERUNDS[verb]
    if verb.endswith("e"):
        return verb[:-1] + "ing"
    return verb + "ing"


@dataclass(frozen=True)
class FuncDef:
    """A generated function, remembered so tests can call it with plausible arguments."""

    name: str
    params: list[tuple[str, str]]
    rtype: str


@dataclass
class ClassDef:
    name: str
    noun: str
    methods: list[FuncDef]


@dataclass
class Env:
    """Names a function body may use, so generated statements refer to things that exist."""

    params: list[tuple[str, str]]  # (name, category: str|int|list|obj|dict|bool|opt)
    method: bool
    noun: str  # the class (or module) noun; methods use self._<plural(noun)>
    obj: str  # a class name values of category "obj" belong to
    locals: list[tuple[str, str]] = field(default_factory=list)

    def names(self, category: str) -> list[str]:
        return [n for n, c in self.params + self.locals if c == category]


class CodeGen:
    """Generates modules and test files that read like a small, well-kept Python library."""

    def __init__(self, rng: random.Random, project: Project) -> None:
        self.rng = rng
        self.p = project
        self.needs: dict[str, None] = {}  # import lines needed by the module being generated
        self.funcs: list[FuncDef] = []  # public module-level functions of the module being generated
        self.classes: list[ClassDef] = []

    # ---- small pieces -------------------------------------------------------------------------------
    def noun(self) -> str:
        return self.rng.choice(self.p.nouns)

    def error(self) -> str:
        return self.p.errors[0] if self.rng.random() < 0.7 else self.p.errors[-1]

    def literal(self, category: str) -> str:
        rng = self.rng
        if category == "int":
            return str(rng.choice((0, 1, 2, 3, 8, 16, 30, 64, 100, 256, 1024)))
        if category == "bool":
            return rng.choice(("True", "False"))
        if category == "list":
            return f'["{rng.choice(WORDS)}", "{rng.choice(WORDS)}"]'
        if category == "dict":
            return f'{{"{rng.choice(ATTRS)}": "{rng.choice(WORDS)}"}}'
        return f'"{rng.choice(WORDS)}"'

    def param(self, used: set[str]) -> tuple[str, str, str]:
        """(name, annotation, category) for a new parameter."""
        rng = self.rng
        for _ in range(20):
            noun = self.noun()
            kind = rng.choice(("obj", "str", "str", "int", "list", "list", "dict"))
            if kind == "obj":
                name, ann = noun, camel(noun)
            elif kind == "str":
                suffix = rng.choice(("name", "key", "id", "path", "label"))
                name, ann = f"{noun}_{suffix}", "str"
            elif kind == "int":
                suffix = rng.choice(("count", "limit", "size", "index"))
                name, ann = f"{noun}_{suffix}", "int"
            elif kind == "list":
                name, ann = plural(noun), f"Iterable[{camel(noun)}]"
                self.needs["from collections.abc import Iterable"] = None
            else:
                name, ann = f"{noun}_map", f"Mapping[str, {camel(noun)}]"
                self.needs["from collections.abc import Mapping"] = None
            if name not in used:
                used.add(name)
                return name, ann, kind
        used.add("value")
        return "value", "object", "obj"

    def docstring(self, name: str, params: list[tuple[str, str]], returns: str, indent: str) -> list[str]:
        rng = self.rng
        verb, _, rest = name.lstrip("_").partition("_")
        one = singular(rest.replace("_", " ") or self.noun())
        many = plural(one)
        first = f"``{params[0][0]}``" if params else f"the {many}"
        verb_c = verb.capitalize()
        if returns == "None":
            options = [f"{verb_c} {first} in place.", f"{verb_c} {first} and record the change in the stats counter."]
        elif returns == "bool":
            options = [f"Whether {first} is an acceptable {one}.", f"Return True when {first} matches a known {one}."]
        elif returns == "int":
            options = [f"Count the enabled {many} in {first}.", f"{verb_c} {first} and return how many {many} changed."]
        elif returns == "str":
            options = [f"Render {first} as {article(one)} {one} string.", f"{verb_c} {first} into its text form."]
        elif returns.startswith("list"):
            options = [f"{verb_c} {first} and return the {many} in input order.",
                       f"{verb_c} every {one} in {first}, keeping their order."]  # fmt: skip
        elif returns.startswith("dict"):
            options = [f"Map the {many} in {first} by key.", f"{verb_c} {first} into a lookup table of {many}."]
        elif returns.endswith("| None"):
            options = [f"Return the {one} for {first}, or ``None`` when there is none."]
        elif returns.startswith("Iterator"):
            options = [f"Yield the {many} from {first} that pass the filter.", f"Iterate over the {many} of {first}."]
        else:
            options = [f"Build {article(one)} {one} from {first}; raises {self.p.errors[0]} when it is malformed.",
                       f"{verb_c} {first} into a new {one}."]  # fmt: skip
        options.append(f"{gerund(verb).capitalize()} helper used by the public API; keeps {first} unchanged.")
        summary = rng.choice(options)
        lines = [f'{indent}"""{summary}']
        roll = rng.random()
        if roll < 0.35 and params:
            lines.append("")
            why = rng.choice(
                (
                    f"This runs on every {self.noun()} lookup, so it avoids copying {first} unless it has to.",
                    f"Kept separate from the class so that the {self.noun()} loader can reuse it.",
                    f"The order matters: callers rely on the first {one} winning over later ones.",
                    f"Older releases accepted a plain string here; that is still supported for {first}.",
                )
            )
            lines.append(f"{indent}{why}")
        if 0.35 <= roll < 0.6 and params:
            lines += ["", f"{indent}Args:"]
            for pname, _ in params[:3]:
                lines.append(f"{indent}    {pname}: the {pname.replace('_', ' ')} to {verb}.")
            if returns != "None":
                what = many if returns.startswith(("list", "dict", "Iterator")) else one
                lines += [
                    "",
                    f"{indent}Returns:",
                    f"{indent}    The {what} {rng.choice(('found', 'built', 'in order'))}.",
                ]
        if len(lines) == 1:
            lines[0] += '"""'
        else:
            lines.append(f'{indent}"""')
        return lines

    # ---- statements -----------------------------------------------------------------------------------
    def blocks(self, env: Env) -> list[str]:
        """A few statements that use the parameters; the shape of ordinary library code."""
        rng = self.rng
        out: list[str] = []
        choices = ["validate", "loop", "log", "normalize", "default", "compute", "dictcomp", "isinstance"]
        if env.method:
            choices += ["lookup", "lock", "lock", "counter"]
        for kind in rng.sample(choices, k=min(len(choices), rng.randint(1, 3))):
            out += self.block(kind, env)
        return out

    def block(self, kind: str, env: Env) -> list[str]:
        rng = self.rng
        strs, ints, lists = env.names("str"), env.names("int"), env.names("list")
        noun = env.noun
        store = f"self._{plural(noun)}"
        if kind == "validate" and (strs or ints):
            if strs and (not ints or rng.random() < 0.5):
                p = rng.choice(strs)
                msg = rng.choice((f'"{p} must not be empty"', f'f"invalid {noun}: {{{p}!r}}"'))
                return [f"if not {p}:", f"    raise {self.error()}({msg})"]
            p = rng.choice(ints)
            return [f"if {p} < 0:", f'    raise {self.error()}(f"{p} must be >= 0, got {{{p}}}")']
        if kind == "loop" and lists:
            src = rng.choice(lists)
            item, acc = noun if noun != src else "item", f"{rng.choice(('selected', 'kept', 'pending', 'ready'))}"
            attr = rng.choice(ATTRS)
            cond = rng.choice((f"{item}.{attr} is None", f"not {item}.enabled", f"{item}.{attr} in seen"))
            lines = [f"{acc} = []"]
            if "seen" in cond:
                lines = ["seen: set[str] = set()", *lines]
            lines += [f"for {item} in {src}:", f"    if {cond}:", "        continue"]
            if "seen" in cond:
                lines.append(f"    seen.add({item}.{attr})")
            lines.append(f"    {acc}.append({item})")
            env.locals.append((acc, "list"))
            return lines
        if kind == "log":
            self.needs["import logging"] = None
            args = [n for n, _ in env.params + env.locals][:2]
            if not args:
                return [f'logger.debug("{gerund(rng.choice(VERBS))} {plural(noun)}")']
            fmt = " ".join(f"{a}=%r" for a in args)
            return [f'logger.debug("{gerund(rng.choice(VERBS))} {noun}: {fmt}", {", ".join(args)})']
        if kind == "normalize" and strs:
            p = rng.choice(strs)
            expr = rng.choice((f'{p}.strip().lower().replace("-", "_")', f"{p}.strip()", f'{p}.rstrip("/")'))
            return [f"{p} = {expr}"]
        if kind == "default":
            opts = [n for n, c in env.params if c == "opt"]
            if opts:
                p = opts[0]
                dflt = f"self.{p}" if env.method else f"DEFAULT_{p.upper()}"
                return [f"if {p} is None:", f"    {p} = {dflt}"]
            return []
        if kind == "compute" and ints:
            p = rng.choice(ints)
            v = rng.choice(("bounded", "effective", "capped"))
            env.locals.append((v, "int"))
            limit = "self._limit" if env.method else f"MAX_{noun.upper()}_{rng.choice(('COUNT', 'SIZE'))}"
            return [f"{v} = max(0, min({p}, {limit}))"]
        if kind == "dictcomp" and lists:
            src = rng.choice(lists)
            attr = rng.choice(ATTRS)
            v = f"by_{attr}"
            env.locals.append((v, "dict"))
            return [f"{v} = {{item.{attr}: item for item in {src}}}"]
        if kind == "isinstance" and lists:
            p = rng.choice(lists)
            return [f"if isinstance({p}, str):", f"    {p} = [{p}]"]
        if kind == "lookup" and strs:
            p = rng.choice(strs)
            v = f"existing_{noun}" if rng.random() < 0.5 else "current"
            env.locals.append((v, "obj"))
            return [
                "try:",
                f"    {v} = {store}[{p}]",
                "except KeyError:",
                f'    raise {self.error()}(f"unknown {noun}: {{{p}!r}}") from None',
            ]
        if kind == "lock" and (strs or env.names("obj")):
            key = rng.choice(strs) if strs else f"{rng.choice(env.names('obj'))}.name"
            value = rng.choice([n for n, _ in env.params])
            return ["with self._lock:", f"    {store}[{key}] = {value}", "    self._version += 1"]
        if kind == "counter":
            return [f'self._stats["{rng.choice(VERBS)}"] += 1']
        return []

    def returns(self, env: Env, rtype: str) -> list[str]:
        rng = self.rng
        noun, store = env.noun, f"self._{plural(env.noun)}" if env.method else f"_{plural(env.noun).upper()}"
        strs, lists, dicts = env.names("str"), env.names("list"), env.names("dict")
        objs = env.names("obj")
        if rtype == "None":
            return [] if rng.random() < 0.5 else ["self._dirty = True"] if env.method else []
        if rtype == "bool":
            if strs:
                return [f"return {rng.choice(strs)} in {store}"]
            if objs:
                o = rng.choice(objs)
                return [f"return {o}.{rng.choice(ATTRS)} is not None and {o}.enabled"]
            return [f"return bool({store})"]
        if rtype == "int":
            if lists:
                return [f"return sum(1 for item in {rng.choice(lists)} if item.enabled)"]
            return [f"return len({store})"]
        if rtype == "str":
            if strs:
                a = rng.choice(strs)
                return [
                    rng.choice(
                        (
                            f'return f"{{{a}}}:{{self.{noun}_prefix}}"' if env.method else f"return {a}",
                            f'return "/".join(part for part in {a}.split("/") if part)',
                        )
                    )
                ]
            return [f'return f"<{camel(noun)} {{len({store})}} items>"']
        if rtype.startswith("list"):
            if lists:
                src = rng.choice(lists)
                return [
                    rng.choice(
                        (f"return sorted({src}, key=lambda item: item.{rng.choice(ATTRS)})", f"return list({src})")
                    )
                ]
            return [f"return list({store}.values())"]
        if rtype.startswith("dict"):
            if dicts:
                return [f"return {rng.choice(dicts)}"]
            return [f"return dict({store})"]
        if rtype.endswith("| None"):
            key = rng.choice(strs) if strs else "key"
            if key == "key" and not strs:
                return [f"return next(iter({store}.values()), None)"]
            return [f"return {store}.get({key})"]
        if rtype.startswith("Iterator"):
            src = rng.choice(lists) if lists else f"{store}.values()"
            return [f"for item in {src}:", f"    if item.{rng.choice(ATTRS)}:", "        yield item"]
        args = ", ".join(f"{a}={n}" for a, (n, _) in zip(ATTRS, env.params, strict=False))
        return [f"return {rtype}({args})"]

    def function(self, name: str, *, method: bool, noun: str, indent: str = "") -> list[str]:
        """One function (or method) with signature, docstring and body."""
        rng = self.rng
        used: set[str] = set()
        params: list[tuple[str, str, str]] = [self.param(used) for _ in range(rng.randint(1, 3))]
        kw: list[str] = []
        opt_name = None
        if rng.random() < 0.45:
            kw.append(f"strict: bool = {rng.choice(('False', 'True'))}")
        if rng.random() < 0.3:
            opt_name = f"{noun}_limit"
            if opt_name not in used:
                kw.append(f"{opt_name}: int | None = None")
            else:
                opt_name = None
        obj = camel(noun)
        rtype = rng.choice(
            ("None", "bool", "int", "str", f"list[{obj}]", f"dict[str, {obj}]", f"{obj} | None", obj,
             f"Iterator[{obj}]")
        )  # fmt: skip
        if rtype.startswith("Iterator"):
            self.needs["from collections.abc import Iterator"] = None
        plist = (["self"] if method else []) + [f"{n}: {a}" for n, a, _ in params]
        if kw:
            plist += ["*", *kw]
        sig = f"{indent}def {name}({', '.join(plist)}) -> {rtype}:"
        if len(sig) > 108:
            sig_lines = [f"{indent}def {name}("] + [f"{indent}    {p}," for p in plist] + [f"{indent}) -> {rtype}:"]
        else:
            sig_lines = [sig]
        env = Env([(n, c) for n, _, c in params], method, noun, obj)
        if opt_name:
            env.params.append((opt_name, "opt"))
        body = self.blocks(env) + self.returns(env, rtype)
        if not body:
            body = ["pass"] if rng.random() < 0.2 else [f"self._{plural(noun)}.clear()" if method else "return None"]
        inner = indent + "    "
        doc = self.docstring(name, [(n, a) for n, a, _ in params], rtype, inner)
        if not name.startswith("_"):
            record = FuncDef(name, [(n, c) for n, _, c in params], rtype)
            if method:
                self.classes[-1].methods.append(record)
            else:
                self.funcs.append(record)
        return sig_lines + doc + [inner + line if line else "" for line in body]

    # ---- modules --------------------------------------------------------------------------------------
    def klass(self, noun: str, name: str) -> list[str]:
        """A stateful class with a lock and a few methods: the bulk of a typical library module."""
        rng = self.rng
        store = plural(noun)
        self.needs["import threading"] = None
        self.classes.append(ClassDef(name, noun, []))
        lines = [
            f"class {name}:",
            f'    """{rng.choice(("Keeps", "Tracks", "Owns", "Caches"))} {store} by key; safe to share between '
            'threads."""',
            "",
            f'    def __init__(self, {noun}_prefix: str = "", *, limit: int = {rng.choice((64, 128, 256, 1024))}) '
            "-> None:",
            f"        self.{noun}_prefix = {noun}_prefix",
            f"        self._{store}: dict[str, {camel(noun)}] = {{}}",
            "        self._limit = limit",
            "        self._lock = threading.RLock()",
            "        self._version = 0",
            "        self._dirty = False",
            "        self._stats: collections.Counter[str] = collections.Counter()",
            "",
            "    def __len__(self) -> int:",
            f"        return len(self._{store})",
            "",
            "    def __repr__(self) -> str:",
            f'        return f"{name}(prefix={{self.{noun}_prefix!r}}, size={{len(self)}}, limit={{self._limit}})"',
        ]
        self.needs["import collections"] = None
        names: list[str] = []
        for _ in range(rng.randint(3, 7)):
            verb = rng.choice(VERBS)
            target = rng.choice((noun, self.noun(), plural(noun)))
            mname = ("_" if rng.random() < 0.25 else "") + f"{verb}_{target}"
            if mname in names:
                continue
            names.append(mname)
            lines.append("")
            if rng.random() < 0.12 and f"{noun}_count" not in names:
                names.append(f"{noun}_count")
                lines.append("    @property")
                lines += self.count_property(f"{noun}_count", noun)
                continue
            lines += self.function(mname, method=True, noun=noun, indent="    ")
        return lines

    def count_property(self, name: str, noun: str) -> list[str]:
        """A cheap read-only property, the kind real classes grow over time."""
        return [
            f"    def {name}(self) -> int:",
            f'        """Number of {plural(noun)} currently held (cheap; no copy)."""',
            f"        return len(self._{plural(noun)})",
        ]

    def dataclass_block(self, noun: str) -> list[str]:
        """A small record type; gives dumps the mix of data and behaviour real modules have."""
        rng = self.rng
        self.needs["from dataclasses import dataclass, field"] = None
        lines = [
            f"@dataclass({rng.choice(('frozen=True', 'slots=True', 'frozen=True, slots=True'))})",
            f"class {camel(noun)}:",
            f'    """One {noun.replace("_", " ")} as stored in the {self.noun()} table."""',
            "",
            "    name: str",
        ]
        attrs = rng.sample(sorted(ATTR_TYPES), k=rng.randint(2, 5))
        for attr in attrs:
            ann, default = ATTR_TYPES[attr]
            lines.append(f"    {attr}: {ann} = {default}")
        lines.append("    enabled: bool = True")
        ident = next((a for a in attrs if a in ("kind", "label", "status", "offset", "priority")), "enabled")
        lines += [
            "",
            "    def identity(self) -> str:",
            f'        """Key used for de-duplication and as the {self.noun()} index key."""',
            f'        return f"{{self.name}}:{{self.{ident}}}"',
        ]
        if rng.random() < 0.5:
            lines += [
                "",
                "    def to_dict(self) -> dict[str, object]:",
                '        """Plain-data form for JSON export; drops fields that still have their default."""',
                '        data: dict[str, object] = {"name": self.name}',
            ]
            for attr in attrs[:3]:
                default = ATTR_TYPES[attr][1]
                if default == "None":
                    test = f"self.{attr} is not None"
                elif default in ("()", "field(default_factory=dict)"):
                    test = f"self.{attr}"
                else:
                    test = f"self.{attr} != {default}"
                lines += [f"        if {test}:", f'            data["{attr}"] = self.{attr}']
            lines.append("        return data")
        return lines

    def module(
        self,
        mod: str,
        target_lines: int,
        injected: list[str],
        local_imports: list[str],
        extra_imports: tuple[str, ...] = (),
    ) -> str:
        """A whole module of roughly ``target_lines`` lines, with ``injected`` blocks placed among the rest."""
        rng = self.rng
        self.needs = {"import logging": None}
        self.funcs, self.classes = [], []
        main_noun = self.noun()
        items: list[list[str]] = []
        consts = [
            f"DEFAULT_{main_noun.upper()}_LIMIT = {rng.choice((32, 100, 128, 500))}",
            f"MAX_{main_noun.upper()}_COUNT = {rng.choice((1_000, 4096, 10_000))}",
            f"MAX_{self.noun().upper()}_SIZE = {rng.choice((64, 255, 1024))}",
            f"_{plural(main_noun).upper()}: dict[str, {camel(main_noun)}] = {{}}",
        ]
        if rng.random() < 0.5:
            self.needs["import re"] = None
            consts.append(f'_{self.noun().upper()}_PATTERN = re.compile(r"^[a-z][a-z0-9_.-]*$")')
        items.append(consts)
        items.append(self.dataclass_block(main_noun))
        size = sum(len(i) + 2 for i in items)
        used = {camel(main_noun)}
        while size < target_lines:
            roll, noun = rng.random(), self.noun()
            if roll < 0.1 and camel(noun) not in used:
                used.add(camel(noun))
                block = self.dataclass_block(noun)
            elif roll < 0.5:
                name = camel(noun) + rng.choice(CLASS_SUFFIXES)
                if name in used:
                    continue
                used.add(name)
                block = self.klass(noun, name)
            else:
                name = f"{rng.choice(VERBS)}_{rng.choice((noun, plural(noun)))}"
                if name in used:
                    continue
                used.add(name)
                block = self.function(name, method=False, noun=self.noun())
            items.append(block)
            size += len(block) + 2
        for block in injected:
            items.insert(rng.randint(2, max(2, len(items) - 1)), block.rstrip("\n").split("\n"))
        head = [f'"""{camel(mod)} support for {self.p.name}: {self.module_blurb(mod)}', ""]
        head += [self.module_para(mod), '"""', "", "from __future__ import annotations", ""]
        head += [*import_block([*self.needs, *extra_imports]), ""]
        head += [*sorted(local_imports), "", "logger = logging.getLogger(__name__)"]
        body = "\n\n\n".join("\n".join(item) for item in items)
        text = "\n".join(head) + "\n\n\n" + body + "\n"
        return text.replace("\n\n\n\n", "\n\n\n")

    def module_blurb(self, mod: str) -> str:
        nouns = self.p.nouns
        return self.rng.choice(
            (
                f"{plural(self.noun())} and the helpers around them.",
                f"turning {plural(nouns[0])} into {plural(self.noun())}.",
                f"the {mod} layer between {plural(self.noun())} and the public API.",
            )
        )

    def module_para(self, mod: str) -> str:
        return self.rng.choice(
            (
                f"Nothing in here does I/O; the {self.noun()} backends call into it, which keeps it easy to test.",
                f"The functions are pure where possible. Classes hold state that must survive between "
                f"{self.noun()} calls\nand guard it with a re-entrant lock.",
                f"See docs/{mod}.md for the user-facing description. Public names are re-exported from\n"
                f"``{self.p.name}.__init__``; everything prefixed with an underscore may change without notice.",
            )
        )

    def arg(self, category: str) -> str:
        """A test-side literal for a parameter of ``category``, so generated tests call with plausible values."""
        rng = self.rng
        word = rng.choice(WORDS)
        if category == "list":
            other = rng.choice(WORDS)
            return rng.choice((f'[make_item("{word}"), make_item("{other}", enabled=False)]', "[]",
                               f'[make_item("{word}")]'))  # fmt: skip
        if category == "obj":
            return f'make_item("{word}")'
        if category == "dict":
            return f'{{"{word}": make_item("{word}")}}'
        if category == "int":
            return str(rng.choice((0, 1, 3, 10, 64)))
        return f'"{word}"'

    def test_body(self, call: str, rtype: str) -> list[str]:
        """Act-and-assert lines whose assertion matches the return type of the call."""
        rng = self.rng
        if rng.random() < 0.2:
            return [f'with pytest.raises({self.p.errors[0]}, match="{rng.choice(("empty", "invalid", "unknown"))}"):',
                    f"    {call}"]  # fmt: skip
        lines = [f"result = {call}"]
        if rtype.startswith(("list", "Iterator")):
            names = rng.sample(WORDS, k=rng.randint(0, 2))
            lines.append(f"assert [item.name for item in result] == {names!r}".replace("'", '"'))
        elif rtype.startswith("dict"):
            lines.append(f"assert sorted(result) == {sorted(rng.sample(WORDS, k=2))!r}".replace("'", '"'))
        elif rtype == "bool":
            lines.append(f"assert result is {rng.choice(('True', 'False'))}")
        elif rtype == "int":
            lines.append(f"assert result == {rng.choice((0, 1, 2, 3))}")
        elif rtype == "str":
            lines.append(f'assert result == "{rng.choice(WORDS)}"')
        elif rtype.endswith("| None"):
            lines.append("assert result is None")
        elif rtype == "None":
            lines = [call]
        else:
            lines.append(f'assert result.name == "{rng.choice(WORDS)}"')
        return lines

    def test_module(
        self,
        mod: str,
        funcs: list[FuncDef],
        classes: list[ClassDef],
        extra_imports: tuple[str, ...],
        also_import: list[str],
    ) -> tuple[str, list[str]]:
        """A pytest module exercising ``funcs`` and ``classes``; returns the text and its test ids."""
        rng = self.rng
        pkg = self.p.name
        imported = sorted({f.name for f in funcs} | {c.name for c in classes} | set(also_import))
        lines = [f'"""Tests for {pkg}.{mod}."""', "", "from __future__ import annotations", ""]
        lines += [*import_block(["from types import SimpleNamespace", *extra_imports]), ""]
        lines += ["import pytest", ""]
        local = {f"{pkg}.errors": from_import(f"{pkg}.errors", [self.p.errors[0]])}
        if imported:
            local[f"{pkg}.{mod}"] = from_import(f"{pkg}.{mod}", imported)
        for module in sorted(local):
            lines += local[module]
        lines += ["", "", "def make_item(name, **fields):",
                  '    """Duck-typed stand-in for the model objects; only the attributes the code reads."""',
                  '    fields.setdefault("enabled", True)', '    fields.setdefault("key", name)',
                  "    return SimpleNamespace(name=name, **fields)"]  # fmt: skip
        ids: list[str] = []
        for func in funcs:
            for _ in range(rng.randint(3, 7)):
                tname = f"test_{func.name.lstrip('_')}_{rng.choice(QUALIFIERS)}"
                if any(i == tname or i.startswith(tname + "[") for i in ids):
                    continue
                lines += ["", ""]
                args = [self.arg(c) for _, c in func.params]
                if rng.random() < 0.3 and func.params and func.params[0][1] == "str":
                    cases = rng.sample(WORDS, k=rng.randint(2, 4))
                    lines.append(f'@pytest.mark.parametrize("raw", {cases!r})'.replace("'", '"'))
                    lines.append(f"def {tname}(raw):")
                    call = f"{func.name}({', '.join(['raw', *args[1:]])})"
                    lines += ["    " + x for x in self.test_body(call, func.rtype)]
                    ids += [f"{tname}[{c}]" for c in cases]
                    continue
                lines.append(f"def {tname}():")
                lines += ["    " + x for x in self.test_body(f"{func.name}({', '.join(args)})", func.rtype)]
                ids.append(tname)
        for cls in classes:
            var = cls.noun
            snake = "".join("_" + c.lower() if c.isupper() else c for c in cls.name).lstrip("_")
            for method in cls.methods[: rng.randint(2, 5)]:
                tname = f"test_{snake}_{method.name}_{rng.choice(QUALIFIERS)}"
                if tname in ids:
                    continue
                lines += ["", "", f"def {tname}():", f"    {var} = {cls.name}(limit={rng.choice((2, 4, 16))})"]
                call = f"{var}.{method.name}({', '.join(self.arg(c) for _, c in method.params)})"
                lines += ["    " + x for x in self.test_body(call, method.rtype)]
                ids.append(tname)
            lines += ["", "", f"def test_{snake}_repr_mentions_limit():", f"    {var} = {cls.name}(limit=7)",
                      f'    assert "limit=7" in repr({var})']  # fmt: skip
            ids.append(f"test_{snake}_repr_mentions_limit")
        return "\n".join(lines) + "\n", ids


# --------------------------------------------------------------------------------------------------------
# A virtual repository per session: files we can grep, number, diff and "test" consistently.
# --------------------------------------------------------------------------------------------------------


@dataclass
class Repo:
    """The files of one made-up project, their test ids, and how they change during the session."""

    files: dict[str, str]
    original: dict[str, str]
    tests: dict[str, list[str]]  # test file -> test ids
    pkg_dir: str
    target: str
    caller_path: str
    test_path: str


def build_repo(rng: random.Random, p: Project) -> Repo:
    """Generate source modules, test modules and the usual top-level files for project ``p``."""
    gen = CodeGen(rng, p)
    pkg_dir = f"src/{p.name}" if p.layout == "src" else p.name
    files: dict[str, str] = {}
    tests: dict[str, list[str]] = {}
    err_lines = [f'"""Exceptions raised by {p.name}."""', "", "", f"class {camel(p.name)}Error(Exception):"]
    err_lines += [f'    """Base class for every error {p.name} raises on purpose."""']
    for err in p.errors:
        err_lines += ["", "", f"class {err}({camel(p.name)}Error):", f'    """{err[:-5]} problem."""']
    files[f"{pkg_dir}/errors.py"] = "\n".join(err_lines) + "\n"
    # target module: the buggy function among generated code
    target = f"{pkg_dir}/{p.module}.py"
    errors = ", ".join(sorted(p.errors))
    text = gen.module(p.module, rng.randint(620, 820), [], [f"from .errors import {errors}"], p.imports)
    text = inject_top(text, p.support, p.buggy, rng)
    files[target] = text
    defs = {p.module: (gen.funcs, gen.classes)}
    # the caller module and the others
    caller_mod = p.others[0]
    for i, mod in enumerate(p.others):
        lines = rng.randint(420, 680) if i < 3 else rng.randint(200, 360)
        local = [f"from .errors import {p.errors[0]}"]
        inject = []
        if mod == caller_mod:
            local.append(f"from .{p.module} import {p.func}")
            inject.append(p.caller)
        files[f"{pkg_dir}/{mod}.py"] = gen.module(mod, lines, inject, local)
        defs[mod] = (gen.funcs, gen.classes)
    files[f"{pkg_dir}/__init__.py"] = (
        f'"""{p.name}: {p.title.split(" ")[0].lower()} and friends."""\n\n'
        f"from .errors import {camel(p.name)}Error, {', '.join(p.errors)}\n\n"
        f'__all__ = ["{camel(p.name)}Error", {", ".join(repr(e).replace(chr(39), chr(34)) for e in p.errors)}]\n'
        f'__version__ = "{p.version}"\n'
    )
    # tests
    support_names = [line.split()[1].split("(")[0].rstrip(":") for line in p.support.split("\n")
                     if line.startswith(("class ", "def "))]  # fmt: skip
    for mod in (p.module, *p.others):
        funcs, classes = defs[mod]
        if mod == p.module:
            text, ids = gen.test_module(mod, funcs[:6], classes[:3], p.test_imports, [p.func, *support_names])
        else:
            text, ids = gen.test_module(mod, funcs[:5], classes[:2], (), [])
        files[f"tests/test_{mod}.py"] = text
        tests[f"tests/test_{mod}.py"] = ids
    files["tests/conftest.py"] = (
        f'"""Shared fixtures: every test gets an isolated {p.name} home directory."""\n\nimport pytest\n\n\n'
        f"@pytest.fixture(autouse=True)\ndef _isolated_home(tmp_path, monkeypatch):\n"
        f'    monkeypatch.setenv("{p.name.upper()}_HOME", str(tmp_path))\n'
    )
    files["pyproject.toml"] = pyproject(p)
    files["README.md"] = f"# {p.name}\n\n{p.title}\n"
    files["CHANGELOG.md"] = f"# Changelog\n\n## {p.version}\n"
    return Repo(
        files=files,
        original=dict(files),
        tests=tests,
        pkg_dir=pkg_dir,
        target=target,
        caller_path=f"{pkg_dir}/{caller_mod}.py",
        test_path=f"tests/test_{p.module}.py",
    )


def inject_top(text: str, support: str, buggy: str, rng: random.Random) -> str:
    """Add the hand-written helpers and the buggy function to a generated module."""
    marker = "\nlogger = logging.getLogger(__name__)\n"
    head, _, rest = text.partition(marker)
    blocks = rest.split("\n\n\n")
    if support:
        blocks.insert(2, support.rstrip("\n"))
    blocks.insert(rng.randint(3, max(3, len(blocks) - 2)), buggy.rstrip("\n"))
    return head + marker + "\n\n\n".join(blocks)


def pyproject(p: Project) -> str:
    """The project's pyproject.toml; agents read it, so it must agree with the layout and deps."""
    deps = "\n".join(f'    "{d}",' for d in p.deps)
    where = '\n[tool.setuptools.packages.find]\nwhere = ["src"]\n' if p.layout == "src" else ""
    return f"""[build-system]
requires = ["setuptools>=68", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "{p.name}"
version = "{p.version}"
description = "{p.title.split(" ")[0]} and related utilities"
readme = "README.md"
requires-python = ">=3.9"
license = {{ text = "MIT" }}
dependencies = [
{deps}
]

[project.optional-dependencies]
test = ["pytest>=7.4", "pytest-cov>=4.1", "hypothesis>=6.90"]
docs = ["sphinx>=7.2", "furo>=2023.9.10"]
{where}
[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = "-ra --strict-markers"
filterwarnings = ["error::DeprecationWarning:{p.name}.*"]

[tool.ruff]
line-length = 100
target-version = "py39"

[tool.ruff.lint]
select = ["E", "F", "I", "UP", "B"]

[tool.coverage.run]
source = ["{p.name}"]
branch = true
"""


# --------------------------------------------------------------------------------------------------------
# Tool output renderers.
# --------------------------------------------------------------------------------------------------------


def banner(text: str, ch: str = "=", width: int = 80) -> str:
    """A pytest section title centred in a line of ``ch``."""
    if not text:
        return ch * width
    inner = f" {text} "
    left = max(2, (width - len(inner)) // 2)
    right = max(2, width - len(inner) - left)
    return ch * left + inner + ch * right


def fake_sha(rng: random.Random, n: int = 40) -> str:
    """Hex digits drawn from the session RNG (commit ids, wheel hashes), so reruns are identical."""
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def observation(text: str, rc: int = 0) -> str:
    """The tool message the agent sees: return code and output, as the system prompt describes."""
    text = text.rstrip("\n")
    body = f"\n{text}\n" if text else "\n"
    return f"<returncode>{rc}</returncode>\n<output>{body}</output>"


def code_block(thought: str, command: str) -> str:
    """The assistant reply in the format the system prompt demands: THOUGHT, then one bash block."""
    return f"THOUGHT: {thought}\n\n```bash\n{command}\n```"


# --------------------------------------------------------------------------------------------------------
# Sessions.
# --------------------------------------------------------------------------------------------------------

# Observation kinds whose size is chosen to make the context grow as planned: (weight, min, max tokens).
FLEX: dict[str, tuple[float, int, int]] = {
    "dump_target": (1.0, 900, 4200),
    "dump_target_more": (0.9, 700, 4000),
    "dump_other": (0.85, 600, 3900),
    "dump_test": (0.7, 500, 3400),
    "dump_target_after": (0.5, 300, 2200),
    "pytest_full": (0.8, 500, 3800),
    "pytest_full_unrelated": (0.7, 600, 3600),
    "pytest_verbose": (0.6, 500, 3000),
    "pytest_fail": (0.5, 400, 2600),
    "pytest_pass": (0.4, 100, 2000),
    "grep_callers": (0.35, 150, 2200),
    "grep_misc": (0.35, 150, 2200),
}
# Typical sizes of the other observations, for planning only (measured on generated sessions).
FIXED_EST: dict[str, int] = {
    "ls_root": 470, "cat_pyproject": 330, "ls_pkg": 250, "wc": 260, "git_log": 250, "grep_def": 250,
    "repro": 60, "repro_import_error": 50, "pip_install": 560, "add_test": 15, "patch": 25, "patch_miss": 40,
    "dump_func": 220, "git_diff": 420, "git_status": 90, "lint": 15, "edge_cases": 70, "stash_check": 420,
    "reorient": 450, "repro_after": 60, "submit": 0, "ls_tests": 60,
}  # fmt: skip
QUICK = {"ls_root", "cat_pyproject", "ls_pkg", "wc", "git_log", "grep_def", "grep_callers", "grep_misc",
         "dump_target", "dump_target_more", "dump_other", "dump_test", "dump_func", "dump_target_after",
         "git_diff", "git_status", "reorient", "ls_tests"}  # fmt: skip
EDITS = {"add_test", "patch", "patch_miss"}
PY_RUNS = {"repro", "repro_import_error", "repro_after", "edge_cases", "lint"}
TEST_RUNS = {"pytest_fail", "pytest_pass", "pytest_full", "pytest_verbose", "pytest_full_unrelated", "stash_check"}

# What a flexible step can realistically contribute (file lengths and test counts bound it), for planning.
CAPACITY = {
    "dump_target": 4000, "dump_target_more": 3000, "dump_other": 3700, "dump_test": 2000, "dump_target_after": 2000,
    "pytest_full": 3000, "pytest_full_unrelated": 3000, "pytest_verbose": 2500, "pytest_fail": 1200,
    "pytest_pass": 1500, "grep_callers": 1500, "grep_misc": 1500,
}  # fmt: skip
CHEAP = {"ls_tests", "wc", "git_log", "ls_pkg", "cat_pyproject", "lint", "git_status", "repro_after", "edge_cases",
         "grep_misc"}  # fmt: skip

# Optional steps per phase: (kind, weight, how many times at most).
EXPLORE_EXTRAS = (
    ("dump_other", 5.0, 4), ("dump_target_more", 4.0, 1), ("dump_test", 2.5, 1), ("grep_callers", 1.2, 1),
    ("grep_misc", 1.0, 2), ("cat_pyproject", 0.8, 1), ("ls_pkg", 0.8, 1), ("git_log", 0.6, 1), ("wc", 0.5, 1),
    ("ls_tests", 0.5, 1),
)  # fmt: skip
VERIFY_EXTRAS = (
    ("pytest_full", 2.0, 1), ("dump_target_after", 1.5, 1), ("pytest_verbose", 1.5, 1), ("edge_cases", 1.0, 1),
    ("git_status", 1.0, 1), ("lint", 1.0, 1), ("repro_after", 1.0, 1), ("grep_callers", 0.8, 1),
    ("dump_other", 1.0, 2),
)  # fmt: skip


def pick_weighted(rng: random.Random, pool: dict[str, list[float]]) -> str | None:
    """Draw a kind by weight from ``pool`` ({kind: [weight, remaining]}), decrementing its count."""
    kinds = [k for k, (w, left) in pool.items() if left > 0 and w > 0]
    if not kinds:
        return None
    kind = rng.choices(kinds, weights=[pool[k][0] for k in kinds])[0]
    pool[kind][1] -= 1
    return kind


def make_plan(rng: random.Random, shape: Shape) -> list[str]:
    """Step kinds in a plausible order: explore, reproduce, test-first fix, verify, submit."""
    n = shape.turns - (1 if shape.compaction_at else 0)  # the compaction turn adds a "reorient" step
    explore = ["ls_root", "grep_def", "dump_target"]
    reproduce = ["repro"]
    fix = ["add_test", "pytest_fail", "patch"]
    verify = ["pytest_pass", "git_diff"]
    extra = n - 10
    if extra >= 2 and rng.random() < 0.6:
        reproduce = ["repro_import_error", "pip_install", *reproduce]
        extra -= 2
    if extra >= 5:
        fix = [*fix[:2], "patch_miss", "dump_func", *fix[2:]]
        extra -= 2
    unrelated = extra >= 7
    if unrelated:
        extra -= 2
    explore_pool = {k: [w, m] for k, w, m in EXPLORE_EXTRAS}
    verify_pool = {k: [w, m] for k, w, m in VERIFY_EXTRAS}
    if unrelated:  # that session's full-suite run is the one with the unrelated failure
        verify_pool["pytest_full"][1] = 0
    chosen_explore: list[str] = []
    chosen_verify: list[str] = []
    for _ in range(extra):
        first, second = (explore_pool, verify_pool) if rng.random() < 0.6 else (verify_pool, explore_pool)
        kind = pick_weighted(rng, first)
        pool = first
        if kind is None:
            kind, pool = pick_weighted(rng, second), second
        if kind is None:
            kind, pool = rng.choice(("dump_other", "grep_misc")), explore_pool
        (chosen_explore if pool is explore_pool else chosen_verify).append(kind)
    # exploration: the project file first, definition search before the first dump, continuation after it
    for early in ("cat_pyproject", "ls_pkg"):
        if early in chosen_explore:
            chosen_explore.remove(early)
            explore.insert(1, early)
    if "dump_target_more" in chosen_explore:
        chosen_explore.remove("dump_target_more")
        explore.append("dump_target_more")
    rng.shuffle(chosen_explore)
    explore += chosen_explore
    rng.shuffle(chosen_verify)
    tail = [k for k in chosen_verify if k != "pytest_full"]
    if "dump_target_after" in tail:  # look at the patched code before the other checks
        tail.remove("dump_target_after")
        tail.insert(0, "dump_target_after")
    verify = [verify[0], *tail, verify[1]]
    if unrelated:
        verify += ["pytest_full_unrelated", "stash_check"]
    elif "pytest_full" in chosen_verify:
        verify.append("pytest_full")
    plan = explore + reproduce + fix + verify + ["submit"]
    at = max(4, min(len(plan) - 3, round(shape.turns * shape.compaction_at))) if shape.compaction_at else len(plan)
    # Swap cheap steps for file reads until the steps before the peak can plausibly reach it.
    need = 1.1 * (shape.peak_tokens - 2200 - 135 * at)
    cheap = [j for j in range(at - 1) if plan[j] in CHEAP]
    first_read = plan.index("dump_target")
    for j in [j for j in cheap if j > first_read] + [j for j in reversed(cheap) if j < first_read]:
        if sum(CAPACITY.get(k, FIXED_EST.get(k, 300)) for k in plan[: at - 1]) >= need:
            break
        if j > first_read:
            plan[j] = "dump_other"
        else:  # an orientation step before the first read: drop it and read one more file after that read
            del plan[j]
            plan.insert(plan.index("dump_target") + 1, "dump_other")
    if shape.compaction_at:
        plan.insert(at, "reorient")
    assert len(plan) == shape.turns, (len(plan), shape.turns)
    return plan


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


class Session:
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
    def run(self) -> tuple[dict[str, object], list[Turn]]:
        """Play the plan turn by turn, tracking the exact context size so each observation can be sized."""
        p = self.p
        task = TASK_TEMPLATE.format(title=p.title, issue=p.issue, org=p.org, name=p.name, commit=self.commit)
        context: list[int] = []  # per-message tokens including framing
        pending = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task}]
        turns: list[Turn] = []
        n = len(self.plan)
        comp = self.plan.index("reorient") if "reorient" in self.plan else None
        note = ""
        for i, kind in enumerate(self.plan):
            truncate = None
            if kind == "reorient":
                truncate = 2
                context = context[:2]
                pending = [{"role": "user", "content": self.summary()}]
                note = ""
            context += [self.count(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in pending]
            prompt = sum(context) + REPLY_PRIMING_TOKENS
            seg_end = comp - 1 if comp is not None and i < comp else n - 1
            target = self.shape.peak_tokens if comp is None or i < comp else int(self.shape.peak_tokens * 0.5)
            budget = self.budget(i, seg_end, prompt, target)
            step = getattr(self, f"step_{kind}")(budget)
            thought = step.thought if step.reacts or not note else f"{note} {step.thought}"
            thought = self.maybe_plan_sentence(thought, kind)
            content = code_block(thought, step.command)
            out_tokens = max(1, self.count(content))
            turns.append(Turn(pending, content, out_tokens, 0.0, truncate, prompt))
            context.append(out_tokens + MESSAGE_OVERHEAD_TOKENS)
            pending = [{"role": "user", "content": observation(step.output, step.rc)}]
            note = step.note
        self.assign_tool_times(turns)
        header = {
            "format": FORMAT,
            "id": f"default/{p.name}-{p.slug}",
            "model": "synthetic",
            "source": {"generator": GENERATOR, "seed": self.seed},
        }
        return header, turns

    def budget(self, i: int, seg_end: int, prompt: int, target: int) -> int:
        """Tokens for this step's observation so that the segment ends near ``target`` tokens."""
        kind = self.plan[i]
        if kind not in FLEX or i >= seg_end:
            return FIXED_EST.get(kind, 300)
        rest = self.plan[i:seg_end]  # observations still to come in this segment
        fixed = sum(FIXED_EST.get(k, 300) for k in rest if k not in FLEX)
        room = target - prompt - 135 * (seg_end + 1 - i) - fixed
        flex = [FLEX[k] for k in rest if k in FLEX]
        # water-filling: find the level at which the capped shares of the remaining flexible steps fill the room
        low, high = 0.0, 100_000.0
        for _ in range(40):
            level = (low + high) / 2
            if sum(max(lo, min(hi, w * level)) for w, lo, hi in flex) > room:
                high = level
            else:
                low = level
        weight, lo, hi = FLEX[kind]
        return max(lo, min(hi, int(weight * low * self.rng.uniform(0.9, 1.1))))

    def assign_tool_times(self, turns: list[Turn]) -> None:
        """Realistic per-command durations, with test runs scaled so a session totals 20-60 s."""
        rng = self.rng
        times: list[float] = []
        for kind in self.plan:
            if kind == "submit":
                times.append(0.0)
            elif kind in QUICK:
                times.append(min(1.5, max(0.05, rng.lognormvariate(-1.5, 0.6))))
            elif kind in EDITS:
                times.append(rng.uniform(0.1, 0.5))
            elif kind in PY_RUNS:
                times.append(rng.uniform(0.3, 1.4))
            elif kind == "pip_install":
                times.append(rng.uniform(5.0, 20.0))
            elif kind in ("pytest_full", "pytest_full_unrelated"):
                times.append(rng.uniform(9.0, 22.0))
            else:
                times.append(rng.uniform(3.0, 9.0))
        goal = rng.uniform(22.0, 55.0)
        heavy = [j for j, k in enumerate(self.plan) if k in TEST_RUNS]
        light = sum(t for j, t in enumerate(times) if j not in heavy)
        heavy_sum = sum(times[j] for j in heavy)
        if heavy and heavy_sum:
            scale = max(0.3, (goal - light) / heavy_sum)
            for j in heavy:
                t = times[j] * scale
                # clamp into the range real test runs take, without piling values up on the bounds
                times[j] = rng.uniform(3.0, 4.5) if t < 3.0 else rng.uniform(21.0, 25.0) if t > 25.0 else t
        for turn, t in zip(turns, times, strict=True):
            turn.tool_time_s = round(t, 3)

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


# --------------------------------------------------------------------------------------------------------
# Output.
# --------------------------------------------------------------------------------------------------------


@dataclass
class Summary:
    """Per-session figures for the printed table and the README."""

    id: str
    turns: int
    first: int
    peak: int
    final: int
    tool_time: float
    compactions: int
    median_output: float


def generate(seed: int, sessions: int) -> tuple[list[str], list[Summary]]:
    """All JSONL lines and the per-session figures."""
    tok = get_tokenizer()
    lines: list[str] = []
    summaries: list[Summary] = []
    for project, shape in list(zip(PROJECTS, SHAPES, strict=True))[:sessions]:
        session = Session(project, shape, seed, tok)
        header, turns = session.run()
        lines.append(json.dumps(header, ensure_ascii=False))
        lines += [json.dumps(t.to_json(), ensure_ascii=False) for t in turns]
        summaries.append(
            Summary(
                id=str(header["id"]),
                turns=len(turns),
                first=turns[0].prompt_tokens,
                peak=max(t.prompt_tokens for t in turns),
                final=turns[-1].prompt_tokens,
                tool_time=sum(t.tool_time_s for t in turns),
                compactions=sum(1 for t in turns if t.truncate_to is not None),
                median_output=statistics.median(t.output_tokens for t in turns),
            )
        )
    return lines, summaries


def table(rows: list[Summary]) -> str:
    """Markdown table of the per-session figures (prompt tokens: content + 4/message + 3/request)."""
    out = [
        "| session | turns | first ctx | peak ctx | final ctx | tool time s | compactions | median output |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r.id} | {r.turns} | {r.first:,} | {r.peak:,} | {r.final:,} | {r.tool_time:.1f} | "
            f"{r.compactions} | {r.median_output:.0f} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Write the workload and print the summary table (the README quotes it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output JSONL file")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="RNG seed (default 7)")
    parser.add_argument("--sessions", type=int, default=len(PROJECTS), help=f"number of sessions, 1..{len(PROJECTS)}")
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= len(PROJECTS):
        parser.error(f"--sessions must be between 1 and {len(PROJECTS)}")
    started = time.perf_counter()
    lines, rows = generate(args.seed, args.sessions)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    data = ("\n".join(lines) + "\n").encode("utf-8")
    args.out.write_bytes(data)
    elapsed = time.perf_counter() - started
    print(table(rows))
    shown = args.out.resolve()
    shown = shown.relative_to(Path.cwd()) if shown.is_relative_to(Path.cwd()) else shown
    print(f"\nwrote {shown} ({len(data):,} bytes, {sum(r.turns for r in rows)} turns) in {elapsed:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
