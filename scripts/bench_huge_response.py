#!/usr/bin/env python3
"""What a runaway answer costs the client: memory, and how long other streams go unstamped meanwhile.

A stub host (its own process) serves two kinds of answer on 127.0.0.1: a huge one (``--huge-mb`` of content, in
1 MB events, or as one single line with ``--one-line``), and paced ones (a token every 5 ms). The client (this
process, replay's own transport and chat flavour) runs ``--paced`` paced streams and, once they are going, the huge
one. Reported: the huge call's outcome, the client's peak RSS over its RSS before, the longest gap between two
tokens of the paced streams as the client stamped them (the host's own gap is 5 ms), and the event loop's longest
stall (a 1 ms probe).

    python scripts/bench_huge_response.py [--huge-mb 1024] [--limit 64MiB] [--one-line] [--paced 8]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import subprocess
import sys
import time
import uuid
from pathlib import Path

from replay import event_loop
from replay.cli.options import parse_bytes
from replay.clients.client import make_client
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.clients.transport import Transport
from replay.records.run_file import RequestRecord
from replay.workload.trajectory import Message

MESSAGE = Message(raw={"role": "user", "content": "go"}, wire=b'{"role":"user","content":"go"}', tokens=5)
END = b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}\n\ndata: [DONE]\n\n'


def serve(port_file: str, huge_mb: int, one_line: bool) -> None:
    from aiohttp import web

    mb = b"x" * (1 << 20)

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        try:
            if body.get("user") == "huge":
                if one_line:
                    await resp.write(b'data: {"choices":[{"index":0,"delta":{"content":"')
                    for _ in range(huge_mb):
                        await resp.write(mb)
                    await resp.write(b'"}}]}\n\n' + END)
                else:
                    event = b'data: {"choices":[{"index":0,"delta":{"content":"' + mb + b'"}}]}\n\n'
                    for _ in range(huge_mb):
                        await resp.write(event)
                    await resp.write(END)
            else:
                for _ in range(int(body["max_tokens"])):
                    await resp.write(b'data: {"choices":[{"index":0,"delta":{"content":" a"}}]}\n\n')
                    await asyncio.sleep(0.005)
                await resp.write(END)
        except (ConnectionError, RuntimeError):
            pass
        return resp

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        Path(port_file).write_text(str(site._server.sockets[0].getsockname()[1]))  # type: ignore[union-attr]
        await asyncio.Event().wait()

    asyncio.run(main())


def rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() / 1e6


async def client(base_url: str, limit: int, paced: int, tokens: int) -> dict[str, object]:
    host = HostConfig(base_url, "m", max_response_bytes=limit, request_timeout_s=600)
    stalls: list[float] = []

    async def probe() -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            stalls.append(time.perf_counter() - t - 0.001)

    async with Transport(host) as transport:
        plain = make_client(host, RequestOptions(model="m"), transport)
        huge = make_client(host, RequestOptions(model="m", extra_body={"user": "huge"}), transport)
        await plain.warm(paced + 1)
        before = rss_mb()
        probing = asyncio.create_task(probe())
        recs = [RequestRecord(id=uuid.uuid4().hex, session=i, task=i, trajectory="p", turn=0) for i in range(paced)]
        calls = [asyncio.create_task(plain.call(plain.render([MESSAGE], tokens, None), r)) for r in recs]
        await asyncio.sleep(0.5)
        big = RequestRecord(id=uuid.uuid4().hex, session=paced, task=paced, trajectory="huge", turn=0)
        t0 = time.perf_counter()
        await huge.call(huge.render([MESSAGE], 1, None), big)
        huge_s = time.perf_counter() - t0
        await asyncio.gather(*calls)
        probing.cancel()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    gaps = [b - a for r in recs for a, b in zip(r.chunks[0::2], r.chunks[2::2], strict=False)]
    return {
        "huge": f"{big.error or 'ok'} ({big.error_detail or ''}) after {huge_s:.2f} s",
        "rss_before_mb": round(before),
        "rss_peak_mb": round(peak),
        "peak_over_before_mb": round(peak - before),
        "paced_max_gap_ms": round(1000 * max(gaps), 1),
        "paced_errors": sum(r.error is not None for r in recs),
        "loop_max_stall_ms": round(1000 * max(stalls), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--huge-mb", type=int, default=1024)
    ap.add_argument("--limit", default="64MiB")
    ap.add_argument("--one-line", action="store_true", help="the huge answer is one single SSE line")
    ap.add_argument("--paced", type=int, default=8)
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.huge_mb, args.one_line)
        return
    port_file = Path(f"/tmp/replay-huge-{uuid.uuid4().hex}.port")
    cmd = [sys.executable, __file__, "--serve", str(port_file), "--huge-mb", str(args.huge_mb)]
    stub = subprocess.Popen([*cmd, "--one-line"] if args.one_line else cmd)
    try:
        while not port_file.exists() or not port_file.read_text():
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text()}/v1"
        result = event_loop.run(client(url, parse_bytes(args.limit), args.paced, 1000))
    finally:
        stub.terminate()
        stub.wait()
        port_file.unlink(missing_ok=True)
    for key, value in result.items():
        print(f"{key:>22}: {value}")


if __name__ == "__main__":
    main()
