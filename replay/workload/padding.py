"""``--unrecorded-context pad``: a deterministic stand-in for the context a recording left out, built once at load.

Some sources do not hold all that was sent: Claude Code transcripts keep neither the system prompt nor the tool
schemas, and the provider counts what each call adds its own way (framing around tool results). Their importers
record per call ``recorded.unrecorded_context_tokens`` = the provider's prompt tokens − the loader's estimate of the
replayed request (docs/importers.md). Padding puts that back, so each request is as long as the provider counted:

- the *head*: the first call's gap, as a system message at the start of the conversation (the system prompt and
  tool schemas stood in by words, one cl100k token each). It is kept through every truncation (an agent resends
  its system prompt after compacting), so it is the stable prefix every call shares and a host caches it as it
  cached the real one. Its words depend only on the recorded model, so trajectories of one agent share it as their
  system prompt was shared (their heads differ only in length: a shorter one is a prefix of a longer one).
- the *growth*: from then on, each call's gap less the padding its context already holds is added to the call's
  last appended message (a line of words after its text), so the stand-in for what a turn added is part of the
  message that added it, sent and cached with it. A call whose gap shrank (the provider counted less) adds nothing;
  the excess stays until later calls catch up.

Only turns with ``recorded.unrecorded_context_tokens`` are padded; everything else is left as it is. ``omit``
sends the recording as it is. The per-read and per-token paths never see any of this: the padded messages are
ordinary messages, serialised and counted once at load.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from replay.workload.filler_words import vocabulary
from replay.workload.history import content_text
from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, Tokenizer

MODES = ("pad", "omit")
DEFAULT_MODE = "pad"
GAP = "unrecorded_context_tokens"


@dataclass(slots=True)
class PadCount:
    """What padding added to a workload (all in the loader's tokens)."""

    trajectories: int = 0  # trajectories padded
    head_tokens: int = 0  # Σ heads (one per padded trajectory)
    added_tokens: int = 0  # Σ padding text added, heads included, each counted once
    padded_tokens: int = 0  # Σ over calls of the padding in the call's request (what a pass of the workload sends)
    prompt_tokens: int = 0  # Σ over the padded trajectories' calls of their padded prompt estimate

    def public(self, mode: str) -> dict[str, Any]:
        return {
            "mode": mode,
            "trajectories": self.trajectories,
            "head_tokens": self.head_tokens,
            "added_tokens": self.added_tokens,
            "padded_tokens": self.padded_tokens,
            "padded_share": round(self.padded_tokens / self.prompt_tokens, 6) if self.prompt_tokens else None,
        }

    def add(self, other: PadCount) -> None:
        for name in ("trajectories", "head_tokens", "added_tokens", "padded_tokens", "prompt_tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def _words(key: str, n: int) -> str:
    """``n`` words drawn for ``key``, one cl100k token each after a space (the block traces' word list)."""

    return "".join(random.Random(f"unrecorded\x00{key}").choices(vocabulary(), k=n)) if n > 0 else ""


def _pad_message(msg: dict[str, Any], tokens: int, key: str, tokenizer: Tokenizer) -> tuple[dict[str, Any], int]:
    """``msg`` with about ``tokens`` more tokens of words after its text; (new message, tokens added exactly)."""
    content = msg.get("content")
    before = len(tokenizer.encode(content_text(content)))
    n = tokens
    for _ in range(4):  # the join with the text before may merge a token or two: measure and correct
        words = "\n" + _words(key, n)
        new = [*content, {"type": "text", "text": words}] if isinstance(content, list) else (content or "") + words
        added = len(tokenizer.encode(content_text(new))) - before
        if added == tokens or n + tokens - added < 1:
            break
        n += tokens - added
    return {**msg, "content": new}, added


def pad_turns(turns: list[dict[str, Any]], model: str | None, traj_id: str, tokenizer: Tokenizer) -> PadCount:
    """Pad a trajectory's raw turn objects in place (see the module); returns what was added."""
    gaps = [(t.get("recorded") or {}).get(GAP) for t in turns]
    known = [g for g in gaps if isinstance(g, int) and not isinstance(g, bool)]
    count = PadCount()
    if not known:
        return count
    head = known[0] if known[0] > MESSAGE_OVERHEAD_TOKENS else 0
    pads: list[int] = []  # padding held by each message of the context
    for k, turn in enumerate(turns):
        if turn.get("truncate_to") is not None:
            keep = turn["truncate_to"] + (1 if head else 0)  # the head stays: it is the resent system prompt
            turn["truncate_to"] = keep
            del pads[keep:]
        append = list(turn.get("append") or [])
        append_pads = [0] * len(append)
        if k == 0 and head:
            append.insert(
                0, {"role": "system", "content": _words(f"head\x00{model or ''}", head - MESSAGE_OVERHEAD_TOKENS)}
            )
            append_pads.insert(0, head)
            count.head_tokens = count.added_tokens = head
        gap = gaps[k]
        grow = gap - sum(pads) - sum(append_pads) if isinstance(gap, int) and not isinstance(gap, bool) else 0
        last = next((i for i in range(len(append) - 1, -1, -1) if append[i].get("role") in ("user", "tool")), None)
        if grow > 0 and last is not None:
            append[last], append_pads[last] = _pad_message(append[last], grow, f"{traj_id}\x00{k}", tokenizer)
            count.added_tokens += append_pads[last]
        turn["append"] = append
        pads += append_pads
        count.padded_tokens += sum(pads)
        pads.append(0)  # the answer
    count.trajectories = 1
    return count
