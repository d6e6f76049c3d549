"""The event loop when many streams end together: its longest stall, and the TTFT error, against injected truth.

Starts ``scripts/peer_stub.py`` in its ``timed`` mode (first token 200 ms after a request arrives, then one token
every 10 ms, each in its own write), sends N requests at once through replay's own client (so all N streams end
within a few ms of each other), and measures on the client's loop: the longest gap of a 1 ms probe (the loop's
stall), and each call's TTFT minus the stub's 200 ms (the error, counted over every request). Alternates between
reading finished streams on the loop at once (``inline``, as before issue 14) and a slice per turn of the loop
(``sliced``: the budget of ``replay.clients.loop_turns``), repeats, and prints medians. Each pass runs on replay's
own event loop (``replay.event_loop.run``: uvloop, the start-up heap frozen out of the collector), as ``replay
run`` does.

    python scripts/bench_stream_end.py [--streams 256] [--tokens 200] [--reps 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid

import peer_stub

from replay import event_loop
from replay.clients import loop_turns
from replay.clients.client import make_client
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.clients.transport import Transport
from replay.histogram import US, percentile
from replay.records.run_file import RequestRecord
from replay.workload.trajectory import Message

MESSAGE = Message(b'{"role":"user","content":"go"}', 5, role="user")


async def probe(stop: asyncio.Event, gaps: list[float]) -> None:
    """The loop's lateness: how long past its 1 ms a sleep returns."""
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(0.001)
        gaps.append(time.perf_counter() - t - 0.001)


def truth_errors(recs: list[RequestRecord], stats: dict) -> dict[str, float]:
    """The client's TTFT against the stub's own (its first write − the request's arrival), paired in arrival
    order (both are CLOCK_MONOTONIC here), and how late the stub itself was against its 200 ms."""
    ours = sorted((r.t_sent, r.t_first_token) for r in recs if r.t_first_token is not None)
    theirs = sorted(zip(stats["arrival"], stats["first"], strict=True))
    client = sorted(abs((f - s) - (tf - ta)) * 1000 for (s, f), (ta, tf) in zip(ours, theirs, strict=False))
    stub = sorted(((tf - ta) - 0.2) * 1000 for ta, tf in theirs)
    return {"client_vs_stub_max_ms": client[-1], "client_vs_stub_p50_ms": percentile(client, 50, 1000),
            "stub_late_max_ms": stub[-1]}  # fmt: skip


async def one_pass(port: int, streams: int, tokens: int) -> dict[str, float]:
    host = HostConfig(f"http://127.0.0.1:{port}/v1", "stub")
    async with Transport(host) as transport:
        client = make_client(host, RequestOptions("stub"), transport)
        await client.warm(streams)
        peer_stub.control(port, "/bench/reset")
        body = client.render([MESSAGE], tokens, None)
        stop, gaps = asyncio.Event(), []
        watcher = asyncio.create_task(probe(stop, gaps))
        recs = [RequestRecord(id=uuid.uuid4().hex, session=i, task=i, trajectory="t", turn=0, t_sent=0.0)
                for i in range(streams)]  # fmt: skip
        await asyncio.gather(*(client.call(body, r) for r in recs))
        stop.set()
        await watcher
    errors = sorted(abs(r.t_first_token - r.t_sent - 0.2) for r in recs if r.t_first_token is not None)
    ok = sum(r.error is None for r in recs)
    return {"stall_max_ms": max(gaps) * 1000, "ttft_err_max_ms": errors[-1] * 1000,
            "ttft_err_p50_ms": (percentile(errors, 50, US) or 0.0) * 1000, "ok": ok,
            **truth_errors(recs, peer_stub.control(port, "/bench/stats"))}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    budget = (loop_turns.BUDGET_S, loop_turns.SATURATED_BUDGET_S)
    results: dict[str, list[dict[str, float]]] = {"inline": [], "sliced": []}
    with peer_stub.started("--mode", "timed", "--tokens", str(args.tokens)) as (_, port):
        for _ in range(args.reps):
            for mode in ("inline", "sliced"):
                # inline: every queued stream at once, saturated or not
                loop_turns.BUDGET_S, loop_turns.SATURATED_BUDGET_S = (1e9, 1e9) if mode == "inline" else budget
                results[mode].append(event_loop.run(one_pass(port, args.streams, args.tokens)))
    out = {mode: {k: statistics.median(r[k] for r in rows) for k in rows[0]} | {"runs": rows}
           for mode, rows in results.items()}  # fmt: skip
    print(json.dumps({"streams": args.streams, "tokens": args.tokens, **out}, indent=2))


if __name__ == "__main__":
    main()
