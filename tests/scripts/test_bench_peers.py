"""The peer benchmark's own parts (scripts/peer_*.py), fast and offline: no peer is installed here.

What the benchmark's figures rest on: the stub sends what it says (token counts, SSE format, one write per
answer or one per event, the timed mode's first token only after the injected TTFT), counts what it sent,
and the raw client counts the same; the window and CPU helpers do what their names say.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(SCRIPTS))
import peer_measure  # noqa: E402
import peer_stub  # noqa: E402

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def stub() -> Iterator[int]:
    with peer_stub.started("--tokens", "20") as (_, port):
        yield port


class Conn:
    """A keep-alive HTTP/1.1 connection that keeps the chunk framing visible (one chunk = one stub write)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.buf = b""

    def _need(self, n: int) -> None:
        while len(self.buf) < n:
            data = self.sock.recv(65536)
            assert data, "connection closed"
            self.buf += data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._need(len(self.buf) + 1)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict[str, str], list[bytes]]:
        raw = json.dumps(body).encode() if body is not None else b""
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(raw)}\r\n\r\n"
        self.sock.sendall(head.encode() + raw)
        status = int(self._line().split()[1])
        headers = {}
        while line := self._line():
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        if headers.get("transfer-encoding") == "chunked":
            chunks = []
            while size := int(self._line(), 16):
                self._need(size + 2)
                chunks.append(self.buf[:size])
                self.buf = self.buf[size + 2 :]
            assert self._line() == b""
            return status, headers, chunks
        n = int(headers["content-length"])
        self._need(n)
        body_, self.buf = self.buf[:n], self.buf[n:]
        return status, headers, [body_]

    def get(self, path: str) -> dict:
        status, _, chunks = self.request("GET", path)
        assert status == 200, (path, status)
        return json.loads(b"".join(chunks))


def events(chunks: list[bytes]) -> list[str]:
    text = b"".join(chunks).decode()
    assert text.endswith("\n\n")
    out = [e for e in text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in out), out
    return [e[len("data: ") :] for e in out]


CHAT = {"model": "stub", "messages": [{"role": "user", "content": "hi " * 1000}], "max_tokens": 7, "stream": True}
USAGE = {"stream_options": {"include_usage": True}}


def test_whole_answer_is_one_write_with_every_token(stub: int) -> None:
    c = Conn(stub)
    assert c.get("/bench/reset?mode=whole&tokens=20")["ok"]
    status, headers, chunks = c.request("POST", "/v1/chat/completions", CHAT | USAGE)
    assert status == 200 and headers["content-type"] == "text/event-stream"
    assert len(chunks) == 1  # one write: one chunk
    evs = events(chunks)
    assert evs[-1] == "[DONE]"
    objs = [json.loads(e) for e in evs[:-1]]
    assert objs[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    tokens = [o["choices"][0]["delta"]["content"] for o in objs[1:-2]]
    assert tokens == [peer_stub.WORD] * 20  # the stub's count, whatever max_tokens asked
    assert objs[-2]["choices"][0]["finish_reason"] == "length"
    assert objs[-1]["choices"] == [] and objs[-1]["usage"]["completion_tokens"] == 20
    stats = c.get("/bench/stats")
    assert stats["requests"] == 1 and stats["tokens"] == 20 and stats["per_request_tokens"] == [20]
    assert stats["first"] == stats["last"] and stats["arrival"][0] <= stats["first"][0]


def test_event_mode_writes_one_event_per_token_on_a_kept_connection(stub: int) -> None:
    c = Conn(stub)
    c.get("/bench/reset?mode=event&tokens=20")
    for _ in range(2):  # the same connection twice: keep-alive
        _, _, chunks = c.request("POST", "/v1/chat/completions", CHAT | USAGE)
        # The first write carries the role chunk and the first token, the last the finish, usage and [DONE].
        assert len(chunks) == 20 + 1
        assert all(len(events([ch])) == 1 for ch in chunks[1:-1])
        assert len(events(chunks)) == 20 + 4
    stats = c.get("/bench/stats")
    assert stats["requests"] == 2 and stats["tokens"] == 40
    assert stats["max_in_flight"] == 1 and stats["max_connections"] >= 1


def test_completions_without_usage_and_not_streamed(stub: int) -> None:
    c = Conn(stub)
    c.get("/bench/reset?mode=event&tokens=5")
    _, _, chunks = c.request("POST", "/v1/completions", {"model": "stub", "prompt": "x", "stream": True})
    objs = [json.loads(e) for e in events(chunks)[:-1]]
    assert [o["choices"][0]["text"] for o in objs[:-1]] == [peer_stub.WORD] * 5
    assert objs[-1]["choices"][0]["finish_reason"] == "length" and "usage" not in objs[-1]
    status, _, body = c.request("POST", "/v1/chat/completions", {"model": "stub", "messages": []})
    answer = json.loads(b"".join(body))
    assert status == 200 and answer["choices"][0]["message"]["content"] == peer_stub.WORD * 5
    assert answer["usage"]["completion_tokens"] == 5
    assert c.get("/v1/models")["data"][0]["id"] == "stub"
    assert c.get("/bench/stats")["tokens"] == 10
    assert c.request("GET", "/bench/reset?mode=nonsense")[0] == 400
    assert c.request("GET", "/nowhere")[0] == 404


def test_timed_mode_sends_nothing_before_the_injected_ttft(stub: int) -> None:
    c = Conn(stub)
    c.get("/bench/reset?mode=timed&tokens=4&ttft=0.05&itl=0.01")
    _, _, chunks = c.request("POST", "/v1/chat/completions", CHAT | USAGE)
    assert len(chunks) == 4 + 1 and len(events(chunks)) == 4 + 4
    stats = c.get("/bench/stats")
    arrival, first, last = stats["arrival"][0], stats["first"][0], stats["last"][0]
    # Order, not precision (a busy machine makes writes late, never early): the first write after the TTFT,
    # the last after the three gaps on the schedule that starts at the request's arrival.
    assert first >= arrival + 0.05
    assert last >= arrival + 0.05 + 3 * 0.01


def test_raw_client_counts_what_the_stub_sent(stub: int) -> None:
    c = Conn(stub)
    for mode in ("whole", "event"):
        c.get(f"/bench/reset?mode={mode}&tokens=20")
        argv = [sys.executable, str(SCRIPTS / "peer_raw_client.py"), "--url"]
        argv += [f"http://127.0.0.1:{stub}/v1/chat/completions", "-c", "4", "-n", "10"]
        out = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout)
        assert out["requests"] == 10 and out["tokens"] == 200
        assert out["ttft_mean_s"] > 0
        stats = c.get("/bench/stats")
        assert stats["requests"] == 10 and stats["tokens"] == out["tokens"]


def test_window_is_the_steady_stretch_of_the_last_requests() -> None:
    # 2 probes long before, then 8 answers at 2 streams: the window starts at the third arrival of the 8.
    arrival = [0.0, 0.5, 10.0, 10.0, 10.2, 10.3, 10.4, 10.5, 10.6, 10.7]
    stats = {"arrival": arrival, "per_request_tokens": [1, 1, *[5] * 8]}
    w = peer_measure.window(stats, requests=8, streams=2)
    assert w is not None and (w.t0, w.t1) == (10.2, 10.7)
    assert w.answers == 5 and w.tokens == 25
    assert peer_measure.window(stats, requests=2, streams=2) is None


def test_tree_sampler_counts_a_child_process() -> None:
    code = "import sys; sum(i * i for i in range(3_000_000)); print('done', flush=True); sys.stdin.read()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "done"
        sampler = peer_measure.TreeSampler(proc.pid)
        sampler.start()
        sampler.stop()  # at least one sample was taken
        assert sampler.cpu and sampler.cpu[-1] > 0
        assert sampler.at(sampler.times[0] - 1) == sampler.cpu[0]
    finally:
        peer_measure.kill_group(proc)
    assert proc.poll() is not None
