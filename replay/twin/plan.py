"""What the probe sends: the workload's shape, and the short trajectories each phase replays.

The probe measures a host with the workload's own sizes (its prompt lengths, the new input of a
continuing call, its answer lengths), not with made-up ones: a host's prefill cost, decode speed and cache
reach matter at the contexts its agents send. Every pass is an ordinary workload (trajectories written to
a file and loaded as ``replay run`` loads any), so the probe replays them with the run machinery itself.
Prompts are cut from the workload's own text (``Corpus``), so that the host's tokenizer counts them as it
counts the workload (a host whose tokenizer was trained on code needs fewer tokens for code than for
prose, and the twin converts its costs to the client's tokens by that ratio). Each starts with the probe's
nonce and its own name, so every prompt is new to the host (no earlier probe's cache flatters it).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from replay.histogram import percentile, percentiles
from replay.workload.history import content_text
from replay.workload.importers._blocks import BlockText
from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, get_tokenizer
from replay.workload.trajectory import FORMAT_V1, Workload, load_workload

PREFILL_OUTPUT = 32  # answer tokens of a prefill-phase call: enough for its single-stream decode speed
CACHE_OUTPUT = 2  # answer tokens of a cache-phase call: only its TTFT and cached tokens are read
MIN_PROMPT = 64
_FRAME = 2 * MESSAGE_OVERHEAD_TOKENS + REPLY_PRIMING_TOKENS  # a system + user prompt's framing tokens
_USER = 4  # content tokens of the short user message after a system prompt


@dataclass(frozen=True, slots=True)
class Shape:
    """The sizes of a workload's calls, in the client's tokens."""

    prompts: tuple[int, ...]  # prompt length at the 5th, 25th, 50th, 75th and 95th percentiles
    new_input: tuple[int, int, int]  # a continuing call's new input (prompt - reusable prefix): p25, p50, p75
    output: int  # answer tokens, median
    cached_share: float  # Σ reusable prefix / Σ prompt
    calls: int

    @classmethod
    def of(cls, workload: Workload) -> Shape:
        prompts, new, outputs, reusable = [], [], [], 0
        for traj in workload.tasks:
            for turn in traj.turns:
                prompts.append(turn.prompt_tokens_est)
                outputs.append(turn.output_tokens)
                reusable += turn.reusable_prefix_tokens
                if turn.reusable_prefix_tokens:
                    new.append(turn.prompt_tokens_est - turn.reusable_prefix_tokens)
        if not prompts:
            raise ValueError("the workload has no calls to take a shape from")
        q = [int(v or 0) for v in percentiles(prompts, (5, 25, 50, 75, 95), 1).values()]
        n = [int(v or 0) for v in percentiles(new or [MIN_PROMPT], (25, 50, 75), 1).values()]
        return cls(
            prompts=tuple(max(v, MIN_PROMPT) for v in q),
            new_input=(max(n[0], 16), max(n[1], 16), max(n[2], 16)),
            output=max(int(percentile(outputs, 50, 1) or 0), 1),
            cached_share=reusable / sum(prompts),
            calls=len(prompts),
        )

    def public(self) -> dict[str, Any]:
        return {"prompt_tokens_p5_p25_p50_p75_p95": list(self.prompts), "new_input_p25_p50_p75": list(self.new_input),
                "output_tokens_p50": self.output, "cached_share": round(self.cached_share, 4),
                "calls": self.calls}  # fmt: skip


CORPUS_TOKENS = 100_000  # of the workload's text, cut into the probe's prompts
_NAME_TOKENS = 12  # about what "[probe NONCE KEY]" takes


class Corpus:
    """The workload's own text, cut into pieces of a given number of client tokens (to within a few: the
    cuts fall on token boundaries, and the pieces are counted again when loaded)."""

    def __init__(self, text: str, encoding: Any) -> None:
        ids = encoding.encode(text, disallowed_special=())[:CORPUS_TOKENS]
        self.text, offsets = encoding.decode_with_offsets(ids)
        self.offsets = [*offsets, len(self.text)]
        self.size = len(ids)

    @classmethod
    def of(cls, workload: Workload) -> Corpus | None:
        """The workload's message texts, or None if it has too little text (or a tokenizer without offsets)."""
        encoding = getattr(get_tokenizer(), "_encoding", None)
        parts, chars = [], 0
        for traj in workload.tasks:
            for turn in traj.turns:
                for m in turn.append:
                    if (text := content_text(m.raw.get("content"))) and chars < 8 * CORPUS_TOKENS:
                        parts.append(text)
                        chars += len(text)
        corpus = cls("\n".join(parts), encoding) if encoding is not None and parts else None
        return corpus if corpus is not None and corpus.size >= 1000 else None

    def piece(self, key: str, tokens: int) -> str:
        start, out = zlib.crc32(key.encode()) % self.size, []
        while tokens > 0:
            n = min(tokens, self.size - start)
            out.append(self.text[self.offsets[start] : self.offsets[start + n]])
            tokens, start = tokens - n, 0
        return "".join(out)


class Passes:
    """Writes each pass's trajectories to ``directory`` and loads them as a workload."""

    def __init__(self, directory: Path, nonce: str, corpus: Corpus | None = None) -> None:
        self.directory = directory
        self.nonce = nonce
        self.text = BlockText(salt=f"replay-probe\x00{nonce}")
        self.corpus = corpus
        self.count = 0

    def words(self, key: str, tokens: int) -> str:
        """About ``tokens`` client tokens of text that no other key of this probe (or other probe) starts with:
        the probe's nonce and the key, then the workload's own text (or neutral words, without a corpus)."""
        if self.corpus is None or tokens <= 2 * _NAME_TOKENS:
            return self.text.filler(key, max(tokens, 1))
        return f"[probe {self.nonce} {key}] " + self.corpus.piece(f"{self.nonce}/{key}", tokens - _NAME_TOKENS)

    def workload(self, name: str, trajectories: list[list[dict[str, Any]]]) -> Workload:
        self.count += 1
        path = self.directory / f"pass-{self.count:02d}-{name}.jsonl"
        lines = []
        for i, turns in enumerate(trajectories):
            header = {"format": FORMAT_V1, "id": f"probe/{name}/{i}", "source": {"probe": self.nonce}}
            lines.append(orjson.dumps(header))
            lines += [orjson.dumps(t) for t in turns]
        path.write_bytes(b"\n".join(lines) + b"\n")
        return load_workload([path])

    # --- turns ---------------------------------------------------------------------------------------------
    def cold(self, key: str, prompt: int, output: int, restart: bool = True) -> dict[str, Any]:
        """A new conversation of ``prompt`` tokens (system prompt and a short user message)."""
        turn = self._turn(key, output, [{"role": "system", "content": self.words(key, prompt - _FRAME - _USER)},
                                        {"role": "user", "content": self.words(key + "/u", _USER)}])  # fmt: skip
        if restart:
            turn["truncate_to"] = 0
        return turn

    def more(self, key: str, new: int, output: int) -> dict[str, Any]:
        """The conversation goes on with ``new`` tokens more (a tool result, say)."""
        return self._turn(key, output, [{"role": "user", "content": self.words(key, new - MESSAGE_OVERHEAD_TOKENS)}])

    def shared(self, prefix_key: str, prefix: int, key: str, new: int, output: int) -> dict[str, Any]:
        """A conversation whose system prompt of ``prefix`` tokens is the same for every call of the same
        ``prefix_key``, then ``new`` tokens of its own."""
        system = self.words(prefix_key, prefix - MESSAGE_OVERHEAD_TOKENS - REPLY_PRIMING_TOKENS)
        user = self.words(key, new - MESSAGE_OVERHEAD_TOKENS)
        return self._turn(key, output, [{"role": "system", "content": system}, {"role": "user", "content": user}])

    def _turn(self, key: str, output: int, append: list[dict[str, Any]]) -> dict[str, Any]:
        answer = {"content": self.words(key + "/answer", min(output, 8))}
        return {"append": append, "output": answer, "output_tokens": max(output, 1), "tool_time_s": 0.0}


def prefill_lengths(shape: Shape, cap: int | None) -> list[int]:
    """The prompt lengths the prefill phase sends cold, shortest first (a host's context refuses the last)."""
    lengths = sorted({min(p, cap) if cap else p for p in shape.prompts})
    return [n for n in lengths if n >= MIN_PROMPT] or [MIN_PROMPT]


def prefill_pass(p: Passes, shape: Shape, cap: int | None) -> Workload:
    """One conversation at concurrency 1: a warm-up call, then for each length a cold prompt and two
    continuations that add the workload's small and large new input over it (its cached share)."""
    small, _, large = shape.new_input
    turns = [p.cold("warmup", MIN_PROMPT, 8)]
    for n in prefill_lengths(shape, cap):
        turns += [p.cold(f"pre{n}", n, PREFILL_OUTPUT), p.more(f"pre{n}/s", small, PREFILL_OUTPUT),
                  p.more(f"pre{n}/l", large, PREFILL_OUTPUT)]  # fmt: skip
    return p.workload("prefill", [turns])


def cache_round(p: Passes, key: str, prompt: int, fills: int) -> Workload:
    """A sentinel prompt, ``fills`` other prompts of the same length, then the sentinel again: still cached?"""
    turns = [p.cold(f"{key}/sentinel", prompt, CACHE_OUTPUT)]
    turns += [p.cold(f"{key}/fill{i}", prompt, CACHE_OUTPUT) for i in range(fills)]
    turns += [p.cold(f"{key}/sentinel", prompt, CACHE_OUTPUT)]
    return p.workload("cache", [turns])


def cache_recheck(p: Passes, key: str, prompt: int, fills: list[int]) -> Workload:
    """The given fills of a round asked again, newest first: how many of them the cache still holds."""
    return p.workload("cache-recheck", [[p.cold(f"{key}/fill{i}", prompt, CACHE_OUTPUT) for i in fills]])


def ladder_pass(p: Passes, key: str, concurrency: int, prefix: int, new: int, output: int) -> Workload:
    """``concurrency`` calls at once over one shared, already cached prefix, each with new input of its own."""
    return p.workload(f"c{concurrency}", [[p.shared(key, prefix, f"{key}/s{i}", new, output)]
                                          for i in range(concurrency)])  # fmt: skip


def ladder_warmup(p: Passes, key: str, prefix: int, new: int) -> Workload:
    """The shared prefix, sent once so that the level's calls find it cached."""
    return p.workload(f"{key}-warm", [[p.shared(key, prefix, f"{key}/warm", new, CACHE_OUTPUT)]])
