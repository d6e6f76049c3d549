"""CPU of the answer checks per call (``replay.clients.answer_check``), beside the read step they follow.

One finished 500-token chat stream as vLLM writes it (``bench_interpret.answer``), one event per read. Three ways,
side by side, best of ``--reps`` each: the read step alone (``interpret``, as before the checks); the read step
plus the free checks (length, tool calls, empty: what ``replay run`` does by default); the read step with the
text collected (every event decoded) plus every check, degenerate included (``--check-answers``). Nothing of this
is on the per-read path: it runs once per call, after the stream closed.

    python scripts/bench_answer_check.py [--reps 300] [--tokens 500]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from bench_interpret import answer

from replay.clients.answer_check import answer_check
from replay.clients.flavours.base import RequestOptions
from replay.clients.flavours.chat import ChatFlavour
from replay.clients.stream import interpret


def best_of(reps: int, job: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        job()
        best = min(best, time.perf_counter() - t0)
    return best * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--tokens", type=int, default=500)
    args = ap.parse_args()
    flavour = ChatFlavour(RequestOptions("m"))
    reads = answer(args.tokens)
    times = [i * 1e-3 for i in range(len(reads))]

    def free() -> None:
        st = interpret(flavour, reads, times, 0.0)
        answer_check(args.tokens, st.usage.output if st.usage else None, st.finish_reason, None, [], None,
                     st.first_answer is not None)  # fmt: skip

    def full() -> None:
        st = interpret(flavour, reads, times, 0.0, True)
        answer_check(args.tokens, st.usage.output if st.usage else None, st.finish_reason, "".join(st.text or ()),
                     [], None, st.first_answer is not None)  # fmt: skip

    st = interpret(flavour, reads, times, 0.0, True)
    text = "".join(st.text or ())
    rows = (
        ("read step alone", lambda: interpret(flavour, reads, times, 0.0)),
        ("+ free checks", free),
        ("text read + every check", full),
        ("the free checks alone", lambda: answer_check(args.tokens, args.tokens, "length", None, [], None, True)),
        ("the text checks alone", lambda: answer_check(args.tokens, args.tokens, "length", text, [], None, True)),
    )
    base = best_of(args.reps, rows[0][1])
    for name, job in rows:
        us = best_of(args.reps, job)
        print(f"{name:>24}: {us:8.1f} µs per {args.tokens}-token answer ({us - base:+.1f} µs against the first)")


if __name__ == "__main__":
    main()
