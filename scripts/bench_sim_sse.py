"""How many streamed tokens per second the sim serves: the ceiling it puts on client benchmarks.

Starts the sim (``instant`` profile: no pacing, 256 tokens per write) in a subprocess, then one aiohttp
client streams ``--streams`` answers of ``--tokens`` tokens, ``--concurrency`` at a time, counting
``data:`` events by byte scan. Prints, per run and as the median, SSE tokens/s received (wall clock, client
and sim sharing the machine) and tokens per CPU-second of the sim process (its own user + system time from
/proc: what one core of the sim sustains, whatever else runs on the machine).

    python scripts/bench_sim_sse.py [--streams 64] [--tokens 32000] [--concurrency 4] [--runs 3]
        [--api chat|completions|messages|responses] [--dialect NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

import aiohttp

from replay import event_loop
from replay.sim.server.dialects import get_dialect

# Events of an answer that carry no token (no usage chunk is asked for on the OpenAI APIs):
_NON_TOKEN_EVENTS = {
    "chat": 3,  # role chunk, finish chunk, [DONE]
    "completions": 2,  # finish chunk, [DONE]
    "messages": 5,  # message_start, content_block_start, content_block_stop, message_delta, message_stop
    "responses": 8,  # created, in_progress, item added, part added, text done, part done, item done, completed
}
_PATHS = {"chat": "chat/completions", "completions": "completions", "messages": "messages", "responses": "responses"}


def request_body(api: str, tokens: int) -> dict[str, object]:
    """A streamed request of ``tokens`` answer tokens in ``api``'s shape."""
    if api == "responses":
        return {"model": "bench", "input": "go", "max_output_tokens": tokens, "stream": True}
    if api == "completions":
        return {"model": "bench", "prompt": "go", "max_tokens": tokens, "stream": True}
    return {"model": "bench", "messages": [{"role": "user", "content": "go"}], "max_tokens": tokens, "stream": True}


def start_sim(dialect: str) -> tuple[subprocess.Popen[str], int]:
    """Run the sim in its own process and wait for its READY line."""
    code = f"from replay.sim.server.app import serve; serve(port=0, profile='instant', dialect={dialect!r})"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("REPLAY_SIM_READY port="):
        proc.kill()
        raise SystemExit(f"sim did not start: {line!r}")
    return proc, int(line.split("=", 1)[1])


async def stream_one(session: aiohttp.ClientSession, url: str, api: str, tokens: int, extra: int) -> int:
    """Stream one answer; return its token events (``data:`` events minus the non-token ones)."""
    body = request_body(api, tokens)
    events, carry = 0, b""
    async with session.post(url, json=body) as resp:
        resp.raise_for_status()
        async for chunk in resp.content.iter_any():
            buf = carry + chunk  # carry < len(b"data:") so no event is counted twice
            events += buf.count(b"data:")
            carry = buf[-4:]
    return events - _NON_TOKEN_EVENTS[api] - extra


async def run_once(url: str, api: str, streams: int, tokens: int, concurrency: int, extra: int = 0) -> float:
    """Tokens/s over one batch of streams."""
    gate = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession() as session:

        async def one() -> int:
            async with gate:
                return await stream_one(session, url, api, tokens, extra)

        t0 = time.perf_counter()
        counts = await asyncio.gather(*(one() for _ in range(streams)))
        elapsed = time.perf_counter() - t0
    if counts != [tokens] * streams:
        raise SystemExit(f"token count mismatch: expected {tokens} per stream, got {sorted(set(counts))}")
    return sum(counts) / elapsed


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=32000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--api", choices=sorted(_PATHS), default="chat")
    parser.add_argument("--dialect", default="default", help="the sim's dialect (replay sim --dialect)")
    args = parser.parse_args()
    # a dialect that always reports usage (OpenRouter) sends a usage chunk no one asked for
    extra = int(args.api in ("chat", "completions") and get_dialect(args.dialect).usage_always)
    proc, port = start_sim(args.dialect)
    try:
        url = f"http://127.0.0.1:{port}/v1/{_PATHS[args.api]}"
        rates, per_core = [], []
        for i in range(args.runs):
            cpu0 = cpu_seconds(proc.pid)
            rate = event_loop.run(run_once(url, args.api, args.streams, args.tokens, args.concurrency, extra))
            sim_cpu = cpu_seconds(proc.pid) - cpu0
            rates.append(rate)
            per_core.append(args.streams * args.tokens / max(sim_cpu, 0.01))
            print(f"run {i + 1}: {rate:,.0f} tokens/s received; sim {per_core[-1]:,.0f} tokens per CPU-second")
        print(
            f"median of {args.runs}: {statistics.median(rates):,.0f} tokens/s of SSE received; "
            f"sim {statistics.median(per_core):,.0f} tokens per CPU-second (one core)"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
