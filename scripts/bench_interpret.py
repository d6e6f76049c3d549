"""CPU to read one finished 500-token chat stream into figures (``replay.clients.stream.interpret``), in-process.

Two shapes of the same answer, as vLLM writes it (role, 500 one-token deltas, finish reason, usage, ``[DONE]``):
``whole`` (all of it in one read) and ``event`` (one event per read, each with its own time); and the same two as
OpenAI writes its deltas (``*-obfuscated``: an ``obfuscation`` field of random padding on each, so the deltas
differ in more than their text and are counted by the flavour's byte counts, not by a shared framing). Prints the
best of ``--reps`` runs per shape, in µs per answer and ns per token. No network, no host: the read step alone, so two
commits can be compared side by side (run it in each checkout).

    python scripts/bench_interpret.py [--reps 200] [--tokens 500]
"""

from __future__ import annotations

import argparse
import random
import string
import time

import orjson

from replay.clients.flavours.base import RequestOptions
from replay.clients.flavours.chat import ChatFlavour
from replay.clients.stream import interpret

HEAD = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1733000000, "model": "stub"}


def event(choices: list[dict], **extra: object) -> bytes:
    return b"data: " + orjson.dumps({**HEAD, "choices": choices, **extra}) + b"\n\n"


def answer(tokens: int, obfuscated: bool = False) -> list[bytes]:
    """The events of one answer, one per read."""
    delta = event([{"index": 0, "delta": {"content": " the"}, "finish_reason": None}])
    deltas = [delta] * tokens
    if obfuscated:  # OpenAI's padding: a random string of a random length on every delta
        rng = random.Random(0)
        deltas = [event([{"index": 0, "delta": {"content": " the"}, "finish_reason": None}],
                        obfuscation="".join(rng.choices(string.ascii_letters, k=rng.randint(2, 12))))
                  for _ in range(tokens)]  # fmt: skip
    return [
        event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]),
        *deltas,
        event([{"index": 0, "delta": {}, "finish_reason": "length"}]),
        event([], usage={"prompt_tokens": 1000, "completion_tokens": tokens, "total_tokens": 1000 + tokens}),
        b"data: [DONE]\n\n",
    ]


def best_of(reps: int, flavour: ChatFlavour, reads: list[bytes], times: list[float]) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        interpret(flavour, reads, times, 0.5)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--tokens", type=int, default=500)
    args = ap.parse_args()
    flavour = ChatFlavour(RequestOptions(model="m"))
    shapes = {}
    for suffix, obfuscated in (("", False), ("-obfuscated", True)):
        reads = answer(args.tokens, obfuscated)
        shapes["whole" + suffix] = ([b"".join(reads)], [1.0])
        shapes["event" + suffix] = (reads, [1.0 + i * 1e-5 for i in range(len(reads))])
    for name, (rs, ts) in shapes.items():
        state = interpret(flavour, rs, ts, 0.5)
        assert state.events == args.tokens and state.malformed is None, (name, state.events, state.malformed)
        best = best_of(args.reps, flavour, rs, ts)
        print(f"{name}: {best * 1e6:.0f} µs per {args.tokens}-token answer, {best / args.tokens * 1e9:.0f} ns/token")


if __name__ == "__main__":
    main()
