"""Client cost per streamed token: replay's OpenAI client against a bare byte-counting loop, side by side.

Both clients stream the same answers from the simulated host in the ``instant`` profile (no pacing, 256
tokens per write, its own process), alternating run by run so machine noise hits both alike. Reported:
client CPU microseconds per token (process_time of this process, the sim excluded) and tokens/s received,
median over runs, and the ratio replay / bare.

    python scripts/bench_client.py [--streams 16] [--tokens 20000] [--concurrency 4] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import aiohttp

from replay import event_loop
from replay.clients.client import HostClient, make_client
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.clients.transport import Transport
from replay.records.run_file import RequestRecord
from replay.runner.embedded_host import embedded_host
from replay.workload.trajectory import Message

MESSAGE = Message(raw={"role": "user", "content": "go"}, wire=b'{"role":"user","content":"go"}', tokens=5)


async def bare(http: aiohttp.ClientSession, url: str, body: bytes) -> int:
    """The floor: count `data:` by byte scan, nothing else."""
    events, carry = 0, b""
    async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        async for chunk in resp.content.iter_any():
            buf = carry + chunk
            events += buf.count(b"data:")
            carry = buf[-4:]
    return events - 4  # role chunk, finish chunk, usage chunk, [DONE]


async def with_replay(client: HostClient, body: bytes) -> int:
    rec = RequestRecord(id=uuid.uuid4().hex, session=0, task=0, trajectory="bench", turn=0)
    await client.call(body, rec)
    assert rec.error is None, rec.error_detail
    return rec.output_tokens or 0


async def one_run(base_url: str, kind: str, streams: int, tokens: int, concurrency: int) -> tuple[float, float]:
    host = HostConfig(base_url, "bench")
    gate = asyncio.Semaphore(concurrency)
    async with Transport(host) as transport:
        http = transport.http
        assert http is not None
        client = make_client(host, RequestOptions(model="bench"), transport)
        body = client.render([MESSAGE], tokens, None)
        url = client.url

        async def one() -> int:
            async with gate:
                return await (with_replay(client, body) if kind == "replay" else bare(http, url, body))

        cpu0, t0 = time.process_time(), time.perf_counter()
        counts = await asyncio.gather(*(one() for _ in range(streams)))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    total = sum(counts)
    assert total == streams * tokens, (kind, total)
    return cpu / total * 1e6, total / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--profile", default="instant", help="sim profile: instant (unpaced) or a paced one, e.g. fast")
    args = ap.parse_args()
    results: dict[str, list[tuple[float, float]]] = {"bare": [], "replay": []}
    with embedded_host(args.profile) as host:
        for _ in range(args.runs):
            for kind in ("bare", "replay"):
                results[kind].append(
                    event_loop.run(one_run(host.base_url, kind, args.streams, args.tokens, args.concurrency))
                )
    med = {k: (statistics.median(c for c, _ in v), statistics.median(r for _, r in v)) for k, v in results.items()}
    for kind, (cpu_us, rate) in med.items():
        print(f"{kind:>7}: {cpu_us:6.2f} µs CPU per token   {rate:12,.0f} tokens/s received")
    print(
        f" ratio: replay / bare CPU per token = {med['replay'][0] / med['bare'][0]:.2f}x (median of {args.runs} runs)"
    )


if __name__ == "__main__":
    main()
