"""Every number a host sends goes through one bounded parser before it reaches a tally (issue 25, item 1).

A Groq, Cerebras, llama.cpp or Fireworks timing of 1e303 (or Fireworks' header) once raised OverflowError in the
host tally and killed every session while the run passed. Now the value is left out with a note on the record, the
call and the run go on, and a run file that holds such a value (written before the bound) reports without a crash.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import orjson
import pytest

import replay
from replay.loops.closed_loop import LoadConfig
from replay.metrics.host.server_figures import server_times
from replay.records import host_numbers as hn
from replay.records.reader import read_run
from replay.records.run_file import RequestRecord
from replay.runner.rebuild import rebuild_run
from replay.sessions.retry import retry_after
from tests.support.hostile import PATHS, answer, streaming, threaded_host
from tests.support.trajectories import simple_turns, write_trajectory

HUGE = 1e303
CARRIERS = {  # where each provider puts its timings (PROVIDERS.md), each with one absurd value
    "groq": ({"x_groq": {"usage": {"queue_time": HUGE, "prompt_time": 0.01, "completion_time": 0.2}}}, {}),
    "cerebras": ({"time_info": {"queue_time": 0.001, "prompt_time": HUGE, "completion_time": 0.2}}, {}),
    "llamacpp": ({"timings": {"prompt_ms": 12.0, "predicted_ms": HUGE, "cache_n": 3}}, {}),
    "fireworks": ({"perf_metrics": {"server-time-to-first-token": HUGE}}, {}),
    "fireworks-header": ({}, {"fireworks-server-time-to-first-token": "1e303"}),
    "cost": ({}, {}),
}


def _parts(carrier: str) -> list[bytes]:
    extra, _ = CARRIERS[carrier]
    usage = {"cost": HUGE} if carrier == "cost" else None
    if carrier == "groq":  # Groq's usage rides in x_groq on the finish chunk when ``usage`` is not asked for
        parts = answer("chat", extra=extra)
        return [*parts[:-2], parts[-1]]
    return answer("chat", extra=extra, usage=usage)


@pytest.mark.parametrize("carrier", sorted(CARRIERS))
def test_an_absurd_host_number_is_left_out_with_a_note_and_the_run_goes_on(tmp_path: Path, carrier: str) -> None:
    work = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(2, output_tokens=3))
    with threaded_host({PATHS["chat"]: streaming(_parts(carrier), CARRIERS[carrier][1])}) as url:
        spec = replay.RunSpec([str(work)], host=url, model="m", retries=0, out=str(tmp_path / "r.jsonl"),
                              load=LoadConfig(concurrency=2))  # fmt: skip
        result = replay.run(spec)
    assert result.exit_code == 0, result.summary["verdict"]
    run = read_run(result.path)
    assert len(run.requests) == 8 and all(r.error is None for r in run.requests)
    assert all(r.notes and "left out" in r.notes[0] for r in run.requests), run.requests[0].notes
    for r in run.requests:  # what was kept of the timings is plausible: no 1e303 reached the record
        assert "e+303" not in orjson.dumps(r.server_timings).decode() and (r.served or {}).get("cost") is None
    offline = rebuild_run(result.path).summary  # (the report adds the recorded timeline's breakdown)
    assert {k: v for k, v in offline.items() if k != "breakdown"} == {k: v for k, v in result.summary.items()
                                                                       if k != "breakdown"}  # fmt: skip


def test_a_run_file_written_before_the_bound_reports_without_a_crash(tmp_path: Path) -> None:
    """Server timings of 1e303, a NaN-like string and 2^70 in a run file (an older replay, or a hand edit)."""
    work = tmp_path / "w.jsonl"
    write_trajectory(work, "w0", simple_turns(3, output_tokens=3))
    with threaded_host({PATHS["chat"]: streaming(answer("chat"))}) as url:
        result = replay.run(replay.RunSpec([str(work)], host=url, model="m", out=str(tmp_path / "r.jsonl")))
    odd = [{"queue_time": HUGE, "prompt_time": 0.1, "completion_time": HUGE}, {"prompt_ms": 2**70, "predicted_ms": 5},
           {"server-time-to-first-token": -HUGE, "server-processing-time": HUGE}]  # fmt: skip
    lines = result.path.read_bytes().splitlines()
    out, i = [], 0
    for line in lines:
        obj = orjson.loads(line)
        if obj["type"] == "request":
            obj["server_timings"], obj["served"] = odd[i % 3], {"cost": HUGE}
            i += 1
        out.append(json.dumps(obj).encode())  # (the standard encoder writes 2^70 too)
    result.path.write_bytes(b"\n".join(out) + b"\n")
    summary = rebuild_run(result.path).summary
    assert summary["requests"] == 3 and summary["verdict"]["exit_code"] == 0


def test_the_parser_takes_only_finite_numbers_of_the_right_type_in_range() -> None:
    assert hn.number(1, 0, 10) == 1.0 and hn.number(2.5, 0, 10) == 2.5
    for bad in (True, "1", None, [1], math.nan, math.inf, -1, 11, 10**400, HUGE):
        assert hn.number(bad, 0, 10) is None, bad
    assert hn.integer(7, 0, 10) == 7 and hn.integer(7.0, 0, 10) is None and hn.integer(2**64, 0, 10) is None
    for text, expected in (("1.5", 1.5), (" 2 ", 2.0), ("nan", None), ("inf", None), ("1e400", None), ("-1", None),
                           ("0x10", None), ("9" * 100, None), ("", None)):  # fmt: skip
        assert hn.from_text(text, 0, 10) == expected, text
    assert server_times({"queue_time": HUGE, "prompt_time": 0.5, "completion_time": math.inf})["decode"] is None


@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf", "-inf", "1e400", "Thu, 01 Jan 1970 00:00:00 GMT"])
def test_retry_after_that_asks_for_no_wait_falls_back_to_the_backoff(value: str) -> None:
    for name in ("retry-after", "retry-after-ms"):
        rec = RequestRecord(id="r", session=0, task=0, trajectory="t", turn=0, headers={name: value})
        assert retry_after(rec) is None, (name, value)
    rec = RequestRecord(id="r", session=0, task=0, trajectory="t", turn=0, headers={"retry-after": "1.5"})
    assert retry_after(rec) == 1.5
