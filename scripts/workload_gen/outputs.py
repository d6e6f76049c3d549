"""The shapes of what the agent writes and reads: pytest banners, tool messages, replies, fake hashes."""

from __future__ import annotations

import random

from workload_gen.data import toml

OUT = toml("outputs.toml")  # the fixed text of tool outputs

SUBMIT_COMMAND = "git add -A && git diff --cached --stat && echo AGENT_TASK_SUBMITTED"


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
