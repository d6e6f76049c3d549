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
from functools import lru_cache
from typing import Any

from replay.workload.importers._common import Call, common_prefix, make_output
from replay.workload.tokens import DEFAULT_TOKENIZER, MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS

# Neutral English words, each one cl100k token with a leading space (checked at load; the few that are not
# are dropped). A fixed list rather than the tokenizer's vocabulary, which is web text and not all printable.
_WORDS = """
value index buffer cache thread request response server client token block prefix memory vector matrix tensor
kernel device stream queue batch model layer weight input output config option module package import export
function method class object string number integer float boolean array list map set tuple record field column
table row query schema parser compiler runtime process signal event handler callback promise future task worker
pool lock channel socket port host route path file folder directory archive format encode decode hash digest
random seed sample metric counter timer window range limit offset cursor page size length width height depth
count total average median minimum maximum score rank level state status error warning notice debug trace log
message header body footer title label name type kind mode version release build test check verify result report
summary detail note comment document section chapter paragraph line word letter symbol character byte bit run
read write load store fetch send receive open close start stop create delete update insert select merge split
join sort filter apply reduce scan parse render compute measure schedule allocate acquire retry cancel commit
rollback flush sync copy move rename match search replace print return yield raise catch handle resolve reject
connect listen accept bind mount install deploy configure enable disable toggle refresh reload restart resume
pause wait sleep notify publish subscribe emit collect gather scatter broadcast shuffle partition replicate
shard balance scale grow shrink expand compress extract transform convert validate normalize register lookup
garden river mountain forest ocean cloud bridge tower door chair paper pencil book music color light green blue
yellow orange purple silver golden winter summer spring autumn morning evening island valley desert planet
harbor market village city street station train plane ship engine wheel circle square triangle point angle shape
pattern sound voice story idea plan goal step key box bag cup plate bread apple lemon coffee water stone metal
wood glass sand snow rain wind storm lake pond hill road lane avenue castle palace temple museum library school
office factory farm kitchen room hall floor roof wall corner edge center middle top bottom left right north
south east west inside outside above below before after during between across along around through under over
near far early late quick slow simple complex small large tiny huge short long wide narrow thin thick heavy soft
hard warm cold fresh clean clear bright dark quiet loud calm steady gentle careful rapid smooth rough sharp flat
round empty full closed public private local global remote direct indirect primary secondary final initial
common rare basic advanced modern classic natural digital manual automatic static dynamic stable active passive
visible hidden current previous next first second third fourth fifth sixth seventh eighth ninth tenth hundred
thousand million single double triple half quarter zero one two three four five six seven eight nine ten eleven
twelve twenty thirty forty fifty sixty seventy eighty ninety system network service storage database cluster
region zone node graph tree branch leaf root trunk flower fruit plant animal bird fish horse tiger lion eagle
whale dolphin rabbit turtle bear wolf fox deer owl bee ant spider butterfly dragon unicorn robot rocket
satellite telescope microscope camera screen keyboard mouse monitor printer speaker phone tablet laptop computer
program software hardware interface protocol standard framework platform browser editor terminal console shell
script command argument parameter variable constant expression statement condition loop case switch default
namespace scope context environment session user account profile group team member owner admin guest visitor
customer partner vendor supplier product item order invoice payment price cost budget revenue profit income
expense ledger journal entry audit review approval proposal contract agreement policy rule guideline principle
practice procedure workflow pipeline stage phase milestone deadline calendar meeting agenda minutes decision
action priority impact risk issue problem solution answer question topic subject theme concept theory approach
technique strategy tactic design structure architecture component element feature property attribute quality
quantity unit dimension area volume mass speed velocity pressure temperature energy power force motion rhythm
harmony melody chord tempo beat song album artist painter writer author poet reader student teacher professor
doctor nurse engineer builder designer developer tester manager leader captain pilot driver sailor farmer baker
cook chef waiter plumber tailor
"""


@lru_cache(maxsize=1)
def vocabulary() -> tuple[str, ...]:
    """The words blocks are made of, each exactly one cl100k token (fixed for a given encoding)."""
    import tiktoken

    enc = tiktoken.get_encoding(DEFAULT_TOKENIZER.partition(":")[2])
    words: list[str] = []
    for w in _WORDS.split():
        word = " " + w
        if word not in words and len(enc.encode(word, disallowed_special=())) == 1:
            words.append(word)
    return tuple(words)


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
