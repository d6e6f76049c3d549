"""Deterministic text for hashed token blocks (Mooncake and Weka traces keep ids, not text).

Every block id maps to a fixed sequence of words drawn from a list of ~700 neutral English words, each a
single cl100k token when preceded by a space (``" word"``). cl100k's pre-tokeniser splits text before
every space followed by letters, so a sequence of such words is exactly one token per word, also when
blocks are concatenated: a block of N words is exactly N cl100k tokens, anywhere in a prompt. The words of block
``h`` are drawn by a PRNG seeded with ``(salt, h)`` only, so equal ids give byte-identical text (a host's
prefix cache sees the reuse the trace encodes) and different ids give different text. A partial block of
``n`` tokens is the first ``n`` words of its id's full block.

A trace's calls are then laid out as messages (:func:`block_calls`): the block list of each call is cut
into messages at every position where some later call of the conversation stops sharing the previous
call's blocks (and at the end of the warm tool/system prefix), so the message-level common prefix the
loader measures equals the block-level common prefix of the trace. Each call ends with a filler message
unique to it (the trace's partial tail block) whose length also absorbs the loader's per-message framing
(4 tokens per message + 3), so ``prompt_tokens_est`` equals the trace's input length whenever that tail
has room (5 tokens or more); otherwise the estimate exceeds it by at most ``4 × messages + 3`` (never below).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from replay.workload.filler_words import vocabulary
from replay.workload.importers._delta import Call, common_prefix
from replay.workload.importers._messages import make_output
from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS


class BlockText:
    """Text of block ids and of unique fillers, exactly one cl100k token per word."""

    def __init__(self, salt: str = "") -> None:
        self.salt = salt
        self.words = vocabulary()
        self._cache: dict[Any, list[str]] = {}

    def _draw(self, key: str, n: int) -> list[str]:
        return random.Random(f"{self.salt}\x00{key}").choices(self.words, k=n)

    def block(self, hash_id: Any, ntokens: int, block_size: int, scope: str = "") -> str:
        key = (scope, hash_id)
        words = self._cache.get(key)
        if words is None:
            words = self._cache[key] = self._draw(f"block\x00{scope}\x00{hash_id}", block_size)
        return "".join(words[:ntokens])

    def filler(self, key: str, ntokens: int) -> str:
        return "".join(self._draw(f"filler\x00{key}", ntokens)) if ntokens > 0 else ""


@dataclass
class BlockRequest:
    """One call of a block trace: its block ids, sizes in tokens, and what was recorded about it."""

    blocks: list[tuple[Any, int]]  # (hash id, tokens)
    input_tokens: int
    output_tokens: int
    tool_time_s: float | None = None
    recorded: dict[str, Any] = field(default_factory=dict)
    spawn: list[str] = field(default_factory=list)


def block_calls(
    requests: list[BlockRequest],
    texts: BlockText,
    *,
    key: str,
    block_size: int,
    warm_blocks: int = 0,
    scope: str = "",
) -> tuple[list[Call], int]:
    """Calls whose inputs reproduce the trace's block sharing; also returns the largest estimate overshoot."""
    cuts = {warm_blocks} if warm_blocks > 0 else set()
    for prev, cur in itertools.pairwise(requests):
        cuts.add(common_prefix(prev.blocks, cur.blocks))
    cuts.discard(0)
    segments: dict[tuple[int, int, tuple[Any, ...]], dict[str, str]] = {}
    calls: list[Call] = []
    worst = 0
    for k, req in enumerate(requests):
        n = len(req.blocks)
        bounds = [c for c in sorted(cuts) if c < n] + [n] if n else []
        messages: list[dict[str, str]] = []
        start = 0
        for end in bounds:
            if end <= start:
                continue
            seg = req.blocks[start:end]
            sk = (start, end, tuple(seg))
            msg = segments.get(sk)
            if msg is None:
                role = "system" if start == 0 and end == warm_blocks else "user"
                text = "".join(texts.block(h, t, block_size, scope) for h, t in seg)
                msg = segments[sk] = {"role": role, "content": text}
            messages.append(msg)
            start = end
        est = sum(t for _, t in req.blocks) + MESSAGE_OVERHEAD_TOKENS * len(messages) + REPLY_PRIMING_TOKENS
        room = req.input_tokens - est - MESSAGE_OVERHEAD_TOKENS
        if req.input_tokens > est or not messages:  # never below the trace: a 1-word tail at least
            messages.append({"role": "user", "content": texts.filler(f"{key}\x00{k}\x00tail", max(1, room))})
            est += MESSAGE_OVERHEAD_TOKENS + max(1, room)
        worst = max(worst, est - req.input_tokens)
        out_n = max(1, req.output_tokens)
        output = make_output(texts.filler(f"{key}\x00{k}\x00out", out_n))
        calls.append(
            Call(
                input=[dict(m) for m in messages],
                output=output,
                output_tokens=out_n,
                tool_time_s=req.tool_time_s,
                recorded=dict(req.recorded),
                spawn=list(req.spawn),
            )
        )
    return calls, worst
