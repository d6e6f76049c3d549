"""What OpenAI's WebSocket mode saves, measured: per-turn time and client CPU for the Responses API over a WebSocket
(``--transport websocket``) vs HTTP keep-alive vs a new HTTPS connection per call, against the simulated host over
TLS (``replay sim --tls``, its own process), at 1 and 32 sessions.

Every mode continues each session's conversation with ``previous_response_id`` (``--responses-state previous``), so
only the transport differs. Modes are run in turn, repeated, and the medians of the repeats printed side by side with
their ratios to HTTP keep-alive (a shared machine: single runs are noise). Per run: the median per-turn time from
when the call began (``t_done - t_call``: a new connection's TCP and TLS setup included), the median TTFT from the
same start, the client's CPU per turn (this process's CPU time over the run, which is the client's: the host runs
apart) and, over the WebSocket, the TTFT deviation from the host's truth log at p50.

    python scripts/bench_transport.py [--repeats 3] [--turns 24,6] [--sessions 1,32]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from replay.histogram import percentile
from replay.loops.load import LoadConfig
from replay.metrics.truth_compare import compare, load_truth
from replay.records.reader import read_run
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' helpers: the sim's process, trajectories
from tests.support.sim_process import sim_process
from tests.support.trajectories import simple_turns, write_trajectory

MODES = {  # name: (transport, connection)
    "websocket": ("websocket", "session"),
    "http keep-alive": ("http", "session"),
    "new https per call": ("http", "per-request"),
}


def one_run(tmp: Path, work: Path, sessions: int, mode: str) -> dict[str, float]:
    transport, connection = MODES[mode]
    truth_path = tmp / "truth.jsonl"
    args = ("--profile", "fast", "--tls", "--tls-dir", str(tmp / "tls"), "--truth-log", str(truth_path))
    with sim_process(*args) as (url, _):
        spec = RunSpec(trajectories=[str(work)], host=url, model="m", api="responses", transport=transport,
                       connection=connection, responses_state="previous", ca_bundle=str(tmp / "tls" / "sim-cert.pem"),
                       load=LoadConfig(concurrency=sessions, tool_time=ToolTimePolicy.parse("none")),
                       out=str(tmp / "run.jsonl"), progress=False)  # fmt: skip
        cpu = time.process_time()
        result = execute(spec)
        cpu = time.process_time() - cpu
    run = read_run(result.path)
    calls = [r for r in run.requests if r.error is None and r.t_call is not None and r.t_first_token is not None]
    assert len(calls) == len(run.requests), {r.error for r in run.requests}
    turn_ms = [(r.t_done - r.t_call) * 1e3 for r in calls]
    ttft_ms = [(r.t_first_token - r.t_call) * 1e3 for r in calls]
    out = {
        "turn_ms": percentile(turn_ms, 50, 1000) or 0.0,  # (at the microsecond)
        "ttft_ms": percentile(ttft_ms, 50, 1000) or 0.0,
        "cpu_ms": cpu * 1e3 / len(calls),
        "new_conn": float(sum(r.connect_s is not None for r in calls)),
    }
    cmp = compare(run.requests, load_truth(truth_path))
    out["ttft_dev_p50_ms"] = cmp["ttft_dev_s"]["p50"] * 1e3 if cmp["ttft_dev_s"]["n"] else float("nan")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--turns", default="24,6", help="turns per session at each --sessions level")
    parser.add_argument("--sessions", default="1,32")
    args = parser.parse_args()
    levels = [int(s) for s in args.sessions.split(",")]
    turns_of = dict(zip(levels, [int(t) for t in args.turns.split(",")], strict=True))
    with tempfile.TemporaryDirectory() as d:  # untimed: the tokenizer and the imports loaded once, before any mode
        write_trajectory(Path(d) / "w.jsonl", "w", simple_turns(2, output_tokens=5))
        one_run(Path(d), Path(d) / "w.jsonl", 1, "websocket")
    for sessions in levels:
        turns = turns_of[sessions]
        runs: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
        with tempfile.TemporaryDirectory() as d:
            work = Path(d) / "w.jsonl"
            for i in range(sessions):
                write_trajectory(work, f"w{i}", simple_turns(turns, output_tokens=20, grow="word "))
            for _ in range(args.repeats):
                for mode in MODES:  # in turn, so a busy spell of the machine falls on every mode alike
                    runs[mode].append(one_run(Path(d), work, sessions, mode))
        base = {k: statistics.median(r[k] for r in runs["http keep-alive"]) for k in ("turn_ms", "ttft_ms", "cpu_ms")}
        print(f"\n{sessions} session(s) x {turns} turns, {args.repeats} repeats (medians of the runs' medians)")
        print(f"{'mode':<20} {'turn ms':>8} {'ratio':>6} {'TTFT ms':>8} {'ratio':>6} {'CPU ms/turn':>11} {'ratio':>6}"
              f" {'new conns':>9} {'TTFT-truth p50 ms':>17}")  # fmt: skip
        for mode, rs in runs.items():
            med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
            dev = med["ttft_dev_p50_ms"]
            ratio = {k: med[k] / base[k] for k in base}
            print(f"{mode:<20} {med['turn_ms']:8.2f} {ratio['turn_ms']:6.2f} {med['ttft_ms']:8.2f}"
                  f" {ratio['ttft_ms']:6.2f} {med['cpu_ms']:11.2f} {ratio['cpu_ms']:6.2f}"
                  f" {med['new_conn']:9.0f} {'' if np.isnan(dev) else f'{dev:.2f}':>17}")  # fmt: skip


if __name__ == "__main__":
    main()
