"""The probe's third phase: decode speed against the number of streams, and where queueing starts.

Level by level (1, 2, 4 ... ``--max-concurrency``) the host gets that many calls at once over one shared
prefix (sent once first, so that it is cached): the workload's median prompt, shrunk so that the level fits
in half the KV cache, each call with the median new input and an answer long enough to decode together for
a while. The stretch in which the same streams were all decoding gives a decode step at that batch. Fewer
streams decoding at once than were sent is the host's running cap, if the same level with answers twice as
long shows no more (long prefills alone can also keep the first calls from overlapping the last ones).
The ladder stops at the cap, when doubling the streams raised the aggregate decode rate by under 10 % twice
in a row (one level past the first, where queueing may start), when the KV cache cannot hold a level, or
when the next level would not fit what is left of the budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from replay.twin.fit import Coefficients
from replay.twin.plan import MIN_PROMPT, ladder_pass, ladder_warmup
from replay.twin.points import decode_window, ok, peak_decoding, seconds_percentile, span

if TYPE_CHECKING:
    from replay.twin.state import Measured, Phase

LEVELS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SATURATION_GAIN = 1.10  # doubling the streams must raise the aggregate decode rate by this much to go on
MAX_ANSWER = 512


@dataclass(slots=True)
class Ladder:
    levels: list[dict[str, Any]] = field(default_factory=list)
    cap: int | None = None  # the running cap, when one was seen
    peak: int = 1  # the most streams seen decoding at once


def _sizes(m: Measured, streams: int, kv_tokens: float | None) -> tuple[int, int, int]:
    """(shared prefix, new input, answer) of a level's calls, in client tokens."""
    new, answer = m.shape.new_input[1], min(max(m.shape.output, 64), MAX_ANSWER)
    prefix = m.shape.prompts[2] if m.limit is None else min(m.shape.prompts[2], m.limit - new - 2 * answer)
    if kv_tokens is not None:
        prefix = min(prefix, int(kv_tokens / m.ratio / (2 * streams)) - new - 2 * answer)
    return prefix, new, answer


def _level_cost(c: Coefficients, ratio: float, streams: int, prefix: int, new: int, answer: int) -> float:
    ph, nh = prefix * ratio, new * ratio
    cost = c.ttft_s(round(ph), 0) + streams * c.ttft_s(round(nh), round(ph))
    return cost + answer * c.decode_s(streams, streams * (ph + nh + answer / 2))


def ladder_cost(m: Measured, c: Coefficients, max_concurrency: int) -> float:
    """What the whole ladder would take by the coefficients so far (the cache phase leaves this much)."""
    total = 0.0
    for streams in (n for n in LEVELS if n <= max_concurrency):
        prefix, new, answer = _sizes(m, streams, None)
        total += _level_cost(c, m.ratio, streams, max(prefix, MIN_PROMPT), new, answer)
    return total


def run_ladder(phase: Phase, m: Measured, kv_tokens: float, max_concurrency: int, log: Callable[[str], None]) -> Ladder:
    out = Ladder()
    coef, previous_rate, saturated = m.coefficients(), None, False
    phase.log.stopped = "max-concurrency"
    for streams in (n for n in LEVELS if n <= max_concurrency):
        prefix, new, answer = _sizes(m, streams, kv_tokens)
        if prefix < MIN_PROMPT:
            phase.log.stopped = "kv"
            break
        cost = _level_cost(coef, m.ratio, streams, prefix, new, answer)
        if 1.5 * cost > phase.left():
            phase.log.stopped = "budget"
            break
        key = f"lad{streams}"
        phase.run(ladder_warmup(m.passes, key, prefix, new), 1)
        records = phase.run(ladder_pass(m.passes, key, streams, prefix, new, answer), streams)
        peak, together = peak_decoding(records)
        cap = None
        if peak < streams and 1.5 * _level_cost(coef, m.ratio, streams, prefix, new, 2 * answer) < phase.left():
            again = phase.run(ladder_pass(m.passes, key + "x", streams, prefix, new, 2 * answer), streams)
            peak2, together2 = peak_decoding(again)
            if peak2 > peak:  # the prefills spread the starts: no cap
                records, peak, together = again, peak2, together2
            else:
                cap = peak
        window = decode_window(together, m.ratio)
        ttfts = [span(r)[0] - r.t_sent for r in ok(records)]
        level = {"concurrency": streams, "prefix_tokens": prefix, "new_tokens": new, "answer_tokens": answer,
                 "calls_ok": len(ttfts), "errors": sum(1 for r in records if not r.ok), "decoding_peak": peak,
                 "ttft_p50_s": seconds_percentile(ttfts, 50), "ttft_max_s": max(ttfts, default=None),
                 "step_s": window.point.step_s if window else None}  # fmt: skip
        out.levels.append(level)
        out.peak = max(out.peak, peak)
        log(f"  concurrency {streams}: {peak} decoding at once, TTFT p50 {level['ttft_p50_s'] or 0:.3f} s, "
            f"step {1000 * (level['step_s'] or 0):.1f} ms")  # fmt: skip
        if window is not None:
            m.decode.append(window.point)
            coef = m.coefficients()
        if cap is not None:
            out.cap = cap
            phase.log.stopped = "cap"
            break
        rate = window.streams / window.point.step_s if window and window.point.step_s > 0 else None
        flat = bool(rate and previous_rate and streams >= 4 and rate < SATURATION_GAIN * previous_rate)
        if flat and saturated:  # twice in a row: one level past the first, to see where queueing starts
            phase.log.stopped = "saturated"
            break
        saturated, previous_rate = flat, rate or previous_rate
    return out
