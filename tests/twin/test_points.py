"""The probe's decode steps read off streams as a host delivers them: one token per read, or in bursts.

An engine under load (vLLM's output collector, a proxy's buffer) hands the client several tokens per read. The
step is then the time between bursts over the tokens in them; read as gaps between tokens it was half zeros, and
one lone stream timed at a microsecond per token pulled every coefficient of the twin's fit to zero (CI, vLLM on
a busy machine: a twin predicting TTFT 0.8 ms for a host measured at 384 ms).
"""

from __future__ import annotations

import pytest

from replay.records.run_file import RequestRecord
from replay.sim.core.profiles import get_profile
from replay.twin.fit import DecodePoint, PrefillPoint, fit, true_coefficients
from replay.twin.points import single_decode_point

STEP = 0.02  # the host's decode step, seconds


def stream(tokens: int, burst: int, step: float = STEP, prompt: int = 1000, split: bool = False) -> RequestRecord:
    """A call whose ``tokens`` answer tokens came ``burst`` at a time, one step apart each: in one read each
    burst, or (``split``) one read per token, a microsecond apart, as vLLM's coalesced events reach a client."""
    ttft = 0.1
    chunks: list[float] = [ttft, 1]  # the first token alone
    sent = 1
    while sent < tokens:
        n = min(burst, tokens - sent)
        sent += n
        at = ttft + (sent - 1) * step
        chunks += [x for k in range(n) for x in (at + k * 1e-6, 1)] if split else [at, n]
    rec = RequestRecord(id="r", session=0, task=0, trajectory="t", turn=1, status=200, prompt_tokens=prompt,
                        output_tokens=tokens, chunks=chunks)  # fmt: skip
    rec.t_sent, rec.t_first_token, rec.t_last_token = 0.0, ttft, chunks[-2]
    return rec


@pytest.mark.parametrize("split", [False, True], ids=["one read a burst", "one read a token"])
@pytest.mark.parametrize("burst", [1, 3, 8, 16, 24])
def test_a_lone_streams_step_is_the_hosts_step_whatever_the_reads_carry(burst, split):
    point = single_decode_point(stream(200, burst, split=split), 1.0)
    assert point is not None and point.batch == 1
    assert point.step_s == pytest.approx(STEP, rel=0.01), burst


def test_an_answer_that_came_at_once_gives_no_step_and_two_reads_give_their_mean():
    at_once = stream(40, 39)
    at_once.chunks, at_once.t_last_token = [0.1, 40], 0.1
    assert single_decode_point(at_once, 1.0) is None  # every token in the first read: nothing to time
    two = single_decode_point(stream(40, 39), 1.0)  # the first token, then the rest at once
    assert two is not None and two.step_s == pytest.approx(STEP)


def test_a_burst_read_as_a_step_does_not_pull_the_fit_to_zero():
    truth = true_coefficients(get_profile("h100-8b"))
    pre = [PrefillPoint(n, c, truth.ttft_s(n, c)) for n, c in ((2500, 0), (20000, 0), (150, 20000), (3000, 20000))]
    dec = [DecodePoint(b, b * s, truth.decode_s(b, b * s)) for b, s in ((1, 2000), (1, 40000), (16, 8000), (4, 4000))]
    coalesced = DecodePoint(1, 3000, 1e-6)  # a stream whose tokens all came in one read: a microsecond "step"
    got = fit(pre, [*dec, coalesced])
    assert got.untrusted() is None and got.worst < 1e-3
    assert got.coefficients.weight_read_s == pytest.approx(truth.weight_read_s, rel=1e-2)
