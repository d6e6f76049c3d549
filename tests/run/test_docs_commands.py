"""The docs are true to the command line (issue 24): every `replay ...` command quoted in README.md and docs/*.md
names a command that exists and options it takes, every command's --help works, every option quoted on its own is
one replay (or a script of scripts/ the docs quote) takes, and the cheap examples run as written. A removed or
renamed option, or a doc that says a command does not exist, fails here.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from replay.cli import main
from tests.support.paths import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Options of other tools the docs quote (engines, Ray, pip, AIPerf): not replay's, said where they are quoted.
FOREIGN = {
    "--enable-cache-report": "SGLang", "--enable-prompt-tokens-details": "vLLM", "--enable-metrics": "SGLang",
    "--metrics": "llama-server", "--no-ui": "llama-server", "--cache-ram": "llama-server",
    "--gpu-memory-utilization": "vLLM", "--kv-cache-dtype": "vLLM", "--head": "ray start", "--address": "ray start",
    "--num-cpus": "ray start", "--no-deps": "pip", "--keep-build": "pip (llama-cpp-python's build)",
    "--burst-phase-starts": "agentx-harness", "--ignore-trace-delays": "agentx-harness",
    "--unsafe-override": "agentx-harness",
    "--dist": "pytest-xdist", "--enable-prefix-caching": "vLLM", "--allow-auto-truncate": "vLLM",
    "--enable-auto-tool-choice": "vLLM", "--tool-call-parser": "vLLM", "--jinja": "llama-server",
    "--no-jinja": "llama-server", "--native": "py-spy",
    "--unique": "scripts/sweep.py's, named as history (when figures of docs/simulated-host.md were made)",
}  # fmt: skip


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _blocks(text: str) -> list[str]:
    return [b.replace("\\\n", " ") for b in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)]


def _spans(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))


def _invocations(prefix: str) -> list[tuple[str, str]]:
    """(file, line) of every command line starting with ``prefix`` in a code block or an inline code span."""
    found = []
    for path in DOCS:
        text = _text(path)
        lines = [line.strip() for block in _blocks(text) for line in block.splitlines()] + _spans(text)
        found += [(path.name, line) for line in lines if line.startswith(prefix)]
    return found


def _tokens(line: str) -> list[str]:
    line = re.sub(r"\s#\s.*$", "", line)  # a trailing comment
    line = line.replace("[", " ").replace("]", " ")  # optional parts: [--json] [--html F]
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def _command(tokens: list[str]) -> tuple[list[str], click.Command]:
    """The command path (``claims verify``) of ``replay TOKENS...`` and its click command."""
    cmd: click.Command = main
    path: list[str] = []
    for tok in tokens:
        if not isinstance(cmd, click.Group) or tok.startswith("-"):
            break
        sub = cmd.commands.get(tok)
        if sub is None:
            break
        cmd, path = sub, [*path, tok]
    return path, cmd


def _options(cmd: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for p in cmd.params:
        if isinstance(p, click.Option):
            names |= set(p.opts) | set(p.secondary_opts)
    return names


def _asked(tokens: list[str]) -> list[str]:
    return [t.split("=", 1)[0] for t in tokens if re.fullmatch(r"--?[a-zA-Z][\w-]*(=.*)?", t)]


REPLAY = _invocations("replay ")


def test_the_docs_quote_replay_commands():
    assert len(REPLAY) > 150 and {f for f, _ in REPLAY} >= {"README.md", "studies.md", "nightly.md"}


@pytest.mark.parametrize(("doc", "line"), REPLAY, ids=[f"{f}: {line[:60]}" for f, line in REPLAY])
def test_every_quoted_replay_command_and_option_exists(doc, line):
    tokens = _tokens(line)[1:]
    path, cmd = _command(tokens)
    assert path, f"{doc}: `{line}` names no replay command"
    unknown = [opt for opt in _asked(tokens[len(path) :]) if opt not in _options(cmd)]
    assert not unknown, f"{doc}: `{line}`: replay {' '.join(path)} has no {', '.join(unknown)}"


@pytest.mark.parametrize("path", sorted({" ".join(_command(_tokens(line)[1:])[0]) for _, line in REPLAY} - {""}))
def test_every_quoted_command_has_help(path):
    res = CliRunner().invoke(main, [*path.split(), "--help"])
    assert res.exit_code == 0 and "Usage:" in res.output, res.output


@cache
def _script_help(script: str) -> str:
    done = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{script} --help: {done.stderr[-400:]}"
    return done.stdout


SCRIPTS = _invocations("python scripts/")


@pytest.mark.parametrize(("doc", "line"), SCRIPTS, ids=[f"{f}: {line[:60]}" for f, line in SCRIPTS])
def test_every_quoted_script_and_its_options_exist(doc, line):
    tokens = _tokens(line)
    script = tokens[1]
    assert (ROOT / script).is_file(), f"{doc}: `{line}`: no {script}"
    text = _script_help(script)
    unknown = [opt for opt in _asked(tokens[2:]) if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", text)]
    assert not unknown, f"{doc}: `{line}`: {script} has no {', '.join(unknown)}"


def test_every_option_quoted_on_its_own_is_replays_or_a_quoted_scripts():
    known = set()
    for cmd in _all_commands(main):
        known |= _options(cmd)
    scripts = "".join(_script_help(s) for s in sorted({_tokens(line)[1] for _, line in SCRIPTS}))
    bad = []
    for path in DOCS:
        for span in _spans(_text(path)):
            for opt in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", span):
                if opt not in known and opt not in FOREIGN and not re.search(rf"(?<![\w-]){opt}(?![\w-])", scripts):
                    bad.append(f"{path.name}: {opt} (in `{span}`)")
    assert not bad, bad


def _all_commands(cmd: click.Command) -> list[click.Command]:
    subs = list(cmd.commands.values()) if isinstance(cmd, click.Group) else []
    return [cmd, *(c for s in subs for c in _all_commands(s))]


def test_no_doc_says_a_command_of_replay_does_not_exist():
    """docs/recipes.md said "`replay capacity` does not exist yet" long after it did."""
    for path in DOCS:
        for name in re.findall(r"`replay (\w+)` does not exist", _text(path)):
            assert name not in main.commands, f"{path.name} says replay {name} does not exist; it does"


# Examples run as written (the cheap ones: seconds each), from a directory holding the docs they name.
EXAMPLES = [
    ("simulated-host.md", "replay sim --list-profiles"),
    ("synth.md", "replay synth --profile coding-agent -n 100 --seed 0 -o synth.jsonl"),
    ("synth.md", "replay inspect synth.jsonl"),
    ("studies.md", "replay claims verify docs/claims-example.toml --host sim:moe-8gpu --virtual"),
]


@pytest.mark.timeout(300)
def test_the_cheap_examples_run_as_written(tmp_path):
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for doc, example in EXAMPLES:
        assert any(line.startswith(example) for f, line in REPLAY if f == doc), f"{doc} no longer quotes `{example}`"
        done = subprocess.run([sys.executable, "-m", "replay", *shlex.split(example)[1:]], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=240)  # fmt: skip
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"`{example}`: {done.stderr[-600:]}"
