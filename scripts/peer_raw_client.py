"""The ceiling of the peer benchmark: a raw-socket client that only counts bytes.

It keeps ``--concurrency`` keep-alive connections to ``scripts/peer_stub.py``, each sending the same
prebuilt request again as soon as the previous answer's last chunk arrived, and per answer does what no
real client can do less of: one clock read and one ``data:`` count per read, and a check for the closing
chunk. It knows the stub's framing (chunked SSE) and nothing else: no HTTP parsing, no JSON. Tokens are
events minus the four that carry none (role, finish, usage, ``[DONE]``). TTFT is the first read after the
request went out; the mean inter-token gap is (last read - first read) / (tokens - 1).

    python scripts/peer_raw_client.py --url http://127.0.0.1:PORT/v1/chat/completions -c 64 -n 256
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from urllib.parse import urlsplit

import orjson

from replay.histogram import US, percentile

END = b"\r\n0\r\n\r\n"
NON_TOKEN_EVENTS = 4  # role chunk, finish chunk, usage chunk, [DONE]


def request_bytes(url: str, model: str, prompt_words: int, max_tokens: int) -> bytes:
    """One POST with a prompt of about ``prompt_words`` tokens."""
    parts = urlsplit(url)
    prompt = " ".join(["hello"] * prompt_words)
    if parts.path.endswith("chat/completions"):
        body: dict = {"messages": [{"role": "user", "content": prompt}]}
    else:
        body = {"prompt": prompt}
    body |= {"model": model, "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True}}
    raw = orjson.dumps(body)
    head = (
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(raw)}\r\n\r\n"
    )
    return head.encode() + raw


class Counter(asyncio.Protocol):
    """One connection, one answer at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[tuple[float, float, float, int, int]] | None = None
        self.lost: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError("the stub closed the connection"))
        if not self.lost.done():
            self.lost.set_result(None)

    def send(self, request: bytes) -> asyncio.Future[tuple[float, float, float, int, int]]:
        assert self.transport is not None
        self.done = self.loop.create_future()
        self.first = 0.0
        self.events = self.nbytes = 0
        self.tail = b""
        self.sent = time.monotonic()
        self.transport.write(request)
        return self.done

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        if not self.first:
            self.first = now
        joined = self.tail + data
        self.events += joined.count(b"data:") - self.tail.count(b"data:")
        self.nbytes += len(data)
        self.tail = joined[-8:]
        if self.tail.endswith(END) and self.done is not None:
            self.done.set_result((self.sent, self.first, now, self.events, self.nbytes))


async def run(url: str, concurrency: int, requests: int, request: bytes) -> dict:
    loop = asyncio.get_running_loop()
    parts = urlsplit(url)
    assert parts.hostname in ("127.0.0.1", "localhost"), "the benchmark client talks to 127.0.0.1 only"
    left = requests
    ttfts: list[float] = []
    itls: list[float] = []
    totals = {"tokens": 0, "bytes": 0}

    async def worker() -> None:
        nonlocal left
        _, conn = await loop.create_connection(lambda: Counter(loop), parts.hostname, parts.port)
        try:
            while left > 0:
                left -= 1
                sent, first, last, events, nbytes = await conn.send(request)
                tokens = events - NON_TOKEN_EVENTS
                totals["tokens"] += tokens
                totals["bytes"] += nbytes
                ttfts.append(first - sent)
                if tokens > 1:
                    itls.append((last - first) / (tokens - 1))
        finally:
            if conn.transport is not None:
                conn.transport.close()

    t0 = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, requests))))
    wall = time.monotonic() - t0
    return {
        "requests": len(ttfts),
        "tokens": totals["tokens"],
        "bytes": totals["bytes"],
        "wall_s": wall,
        "ttft_mean_s": statistics.fmean(ttfts) if ttfts else None,
        "ttft_p50_s": percentile(ttfts, 50, US),  # replay's own percentile method, so the columns compare
        "itl_mean_s": statistics.fmean(itls) if itls else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("-c", "--concurrency", type=int, default=1)
    ap.add_argument("-n", "--requests", type=int, default=100)
    ap.add_argument("--prompt-tokens", type=int, default=1000)
    ap.add_argument("--max-tokens", type=int, default=500)
    ap.add_argument("--model", default="stub")
    args = ap.parse_args()
    request = request_bytes(args.url, args.model, args.prompt_tokens, args.max_tokens)
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    out = runner(run(args.url, args.concurrency, args.requests, request))
    sys.stdout.write(orjson.dumps(out).decode() + "\n")


if __name__ == "__main__":
    main()
