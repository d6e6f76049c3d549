"""replay against a real engine: llama.cpp's llama-server with a tiny random-weight model, on 127.0.0.1.

The engine comes from ``scripts/real_engine.py`` (built from the llama.cpp sources in the llama-cpp-python
sdist and cached under ``$REPLAY_CACHE``, default ``~/.cache/replay``; the first build takes minutes, later
runs reuse it). If it cannot be built here the module is skipped, loudly, with the reason.

What is checked is replay's own accounting against what the server says about the same requests: cached
tokens (per request ``timings.cache_n``, and over a run the deltas of the Prometheus counters), output token
counts, TTFT against the server's prompt time, and continuous batching as replay's figures show it.
``pytest -s -m engine`` prints the figures. ``REPLAY_SKIP_ENGINE=1`` skips the module.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from replay.loops.closed_loop import LoadConfig
from replay.records.reader import read_run
from replay.records.run_file import RequestRecord
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from tests.support.trajectories import write_trajectory

# The module fixture may build llama-server (minutes, bounded by the script's own timeouts); test bodies
# are bounded here (func_only: the fixture's build does not count against it).
pytestmark = [pytest.mark.engine, pytest.mark.timeout(240, func_only=True)]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "real_engine.py"
ENGINE_TIMEOUT_S = 3600  # download + configure + compile on 2 cores, with a wide margin
START_TIMEOUT_S = 60
PARALLEL = 4
CTX = 16384  # total KV cells; with -np 4 (and no unified KV) each slot gets CTX / 4 = 4096
# One compute thread. With two on this 2-core machine, ggml's threads meet at a spinning barrier after every
# op, and any other process (the replay client itself, another test run) that takes a core stalls the other
# thread: measured decode speed then swung 2-5x between identical runs. One thread degrades gracefully.
THREADS = 1
OUTPUT_TOKENS = 48
TURNS = 7
OBSERVATION_CHARS = 1200  # ~300 tokens of Python source per tool observation
# A short pause between turns, so aiohttp sees that llama-server closed the connection after the stream
# (it does after every streamed response) before the next call; see test_back_to_back_calls_...
TOOL_TIME = "fixed:0.05"  # 0.02 was enough in every run here; the margin is for a loaded machine


def _loud_skip(reason: str) -> None:
    """Skip with the reason in the warnings summary too, so ``pytest -q`` cannot hide it."""
    msg = f"llama-server engine tests SKIPPED: {reason}"
    print(f"\n*** {msg}", file=sys.stderr)
    warnings.warn(msg, stacklevel=2)
    pytest.skip(msg)


# --------------------------------------------------------------------------------------------- the server


@dataclass
class Engine:
    base_url: str  # http://127.0.0.1:PORT (no /v1)
    model: str
    proc: subprocess.Popen
    log: Path

    @property
    def api(self) -> str:
        return self.base_url + "/v1"

    def get(self, path: str, timeout: float = 10.0) -> bytes:
        with urllib.request.urlopen(self.base_url + path, timeout=timeout) as resp:
            return resp.read()

    def metrics(self) -> dict[str, float]:
        """The Prometheus text of /metrics, as name -> value (llama-server's names: ``llamacpp:...``)."""
        out: dict[str, float] = {}
        for line in self.get("/metrics").decode().splitlines():
            m = re.fullmatch(r"(llamacpp:[a-z_]+)\s+(\S+)", line.strip())
            if m:
                out[m.group(1)] = float(m.group(2))
        return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _engine_paths(tmp: Path, config: pytest.Config) -> dict[str, Any]:
    """Build (first time: about 12 minutes on 2 cores) or find llama-server and the tiny model; the build's
    progress lines go straight to the terminal, past pytest's capture, so a first run is never silent."""
    if os.environ.get("REPLAY_SKIP_ENGINE"):
        _loud_skip("REPLAY_SKIP_ENGINE is set")
    err = tmp / "real_engine.stderr"
    capture = config.pluginmanager.getplugin("capturemanager")
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[bytes] = []

    def forward() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if capture is not None:
                with capture.global_and_fixture_disabled():
                    sys.stderr.write("\n  " + line.decode(errors="replace").rstrip())
                    sys.stderr.flush()

    reader = threading.Thread(target=forward, daemon=True)
    reader.start()
    timer = threading.Timer(ENGINE_TIMEOUT_S, proc.kill)  # a hung build must not hang the suite
    timer.start()
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.wait()
    timer.cancel()
    reader.join(10)
    if proc.returncode == -signal.SIGKILL:
        _loud_skip(f"building the engine took over {ENGINE_TIMEOUT_S}s")
    err.write_bytes(b"".join(lines))
    tail = "\n".join(err.read_text(errors="replace").splitlines()[-20:])
    if proc.returncode == 2:  # the script's "cannot make the engine here"
        _loud_skip(f"scripts/real_engine.py could not build llama-server or the model:\n{tail}")
    if proc.returncode != 0:
        pytest.fail(f"scripts/real_engine.py failed ({proc.returncode}):\n{tail}")
    return json.loads(out)


def _start(paths: dict[str, Any], log: Path) -> Engine:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from real_engine import server_command
    finally:
        sys.path.remove(str(SCRIPT.parent))
    last = ""
    for _attempt in range(3):  # a port picked free can be taken before the server binds it: try another
        port = _free_port()
        cmd = server_command(
            Path(paths["binary"]), Path(paths["model"]), port, parallel=PARALLEL, ctx=CTX, threads=THREADS
        )
        with open(log, "ab") as logf:
            proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        engine = Engine(f"http://127.0.0.1:{port}", paths["model_name"], proc, log)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError, urllib.error.URLError):
                if json.loads(engine.get("/health", timeout=2)).get("status") == "ok":
                    return engine
            time.sleep(0.2)
        _stop(proc)
        last = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        if "bind" not in last.lower():
            break
    pytest.fail(f"llama-server did not become healthy within {START_TIMEOUT_S}s; log {log}:\n{last}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


@pytest.fixture(scope="module")
def engine(tmp_path_factory, pytestconfig) -> Iterator[Engine]:
    tmp = tmp_path_factory.mktemp("engine")
    paths = _engine_paths(tmp, pytestconfig)
    eng = _start(paths, tmp / "llama-server.log")
    try:
        slots = json.loads(eng.get("/slots"))
        print(
            f"\nllama-server {paths['binary']}\n  model {paths['model']}\n"
            f"  {len(slots)} slots, n_ctx per slot {[s.get('n_ctx') for s in slots]}"
        )
        yield eng
    finally:
        _stop(eng.proc)


# ------------------------------------------------------------------------------------------- the workload


def _source_text() -> str:
    """Python source to show the agent as tool output (the stdlib's own, always present)."""
    import argparse

    return Path(argparse.__file__).read_text()


def _opening(i: int, output_tokens: int) -> dict[str, Any]:
    return {
        "append": [
            {"role": "system", "content": f"Agent {i} of the replay engine test. Work carefully."},
            {"role": "user", "content": f"Ticket {i}: the option parser mishandles prefix matching."},
        ],
        "output": {"content": f"Agent {i}: let me read the parser.\n```bash\nsed -n 1,40p argparse.py\n```"},
        "output_tokens": output_tokens,
        "tool_time_s": 0.0,
    }


def _agent_workload(path: Path, n: int, first: int) -> Path:
    """n trajectories of TURNS turns whose context grows by ~350 tokens a turn, to ~2,000-2,400 tokens.

    Each starts with its own words, so no two trajectories share a prefix beyond the chat template's first
    tokens: the host's hits then come from each session's own history, as the client-side figure assumes.
    """
    text = _source_text()
    for i in range(first, first + n):
        base = (i * 7919 * 13) % max(1, len(text) - OBSERVATION_CHARS * TURNS)
        turns = [_opening(i, OUTPUT_TOKENS)]
        for k in range(1, TURNS):
            start = base + (k - 1) * OBSERVATION_CHARS
            turns.append(
                {
                    "append": [{"role": "user", "content": f"<output>\n{text[start : start + OBSERVATION_CHARS]}"}],
                    "output": {"content": f"step {k}: next part\n```bash\nsed -n {40 * k},{40 * k + 40}p argparse.py"},
                    "output_tokens": OUTPUT_TOKENS,
                    "tool_time_s": 0.0,
                }
            )
        write_trajectory(path, f"engine-{i}", turns)
    return path


def _decode_workload(path: Path, n: int, first: int, turns: int = 3, output_tokens: int = 128) -> Path:
    """Short prompts, long answers: what continuous batching speeds up is decoding, so give it the stage."""
    for i in range(first, first + n):
        rest = [
            {
                "append": [{"role": "user", "content": f"continue ({k})"}],
                "output": {"content": "ok"},
                "output_tokens": output_tokens,
                "tool_time_s": 0.0,
            }
            for k in range(1, turns)
        ]
        write_trajectory(path, f"decode-{i}", [_opening(i, output_tokens), *rest])
    return path


@dataclass
class EngineRun:
    concurrency: int
    summary: dict[str, Any]
    records: list[RequestRecord]
    metrics_delta: dict[str, float]
    wall_s: float

    @property
    def busy_slots_per_decode(self) -> float | None:
        """Mean busy slots per llama_decode() call during this run, from /metrics (the gauge is cumulative)."""
        decodes = self.metrics_delta["llamacpp:n_decode_total"]
        return self.metrics_delta["busy_slot_decodes"] / decodes if decodes else None


def _replay(engine: Engine, workload: Path, out: Path, concurrency: int, tool_time: str = TOOL_TIME) -> EngineRun:
    """One replay run against the engine, with /metrics read just before and just after it."""
    before = engine.metrics()
    t0 = time.monotonic()
    result = execute(
        RunSpec(
            trajectories=[str(workload)],
            host=engine.api,
            model=engine.model,
            load=LoadConfig(concurrency=concurrency, tool_time=ToolTimePolicy.parse(tool_time)),
            force_output_length=True,
            request_timeout_s=120.0,
            stall_timeout_s=60.0,
            out=str(out),
            progress=False,
        )
    )
    wall = time.monotonic() - t0
    after = engine.metrics()
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    # busy slots summed over decode calls = the cumulative mean gauge times the decode count
    busy = "llamacpp:n_busy_slots_per_decode"
    decodes = "llamacpp:n_decode_total"
    delta["busy_slot_decodes"] = after[busy] * after[decodes] - before.get(busy, 0.0) * before.get(decodes, 0.0)
    return EngineRun(concurrency, result.summary, read_run(result.path).requests, delta, wall)


@pytest.fixture(scope="module")
def run_c1(engine, tmp_path_factory) -> EngineRun:
    """One agent session alone: 1 trajectory of TURNS turns (one task per session, see TOOL_TIME)."""
    tmp = tmp_path_factory.mktemp("c1")
    return _replay(engine, _agent_workload(tmp / "w.jsonl", 1, first=0), tmp / "run.jsonl", concurrency=1)


@pytest.fixture(scope="module")
def run_c4(engine, tmp_path_factory) -> EngineRun:
    """Four agent sessions at once on four slots, one trajectory each."""
    tmp = tmp_path_factory.mktemp("c4")
    workload = _agent_workload(tmp / "w.jsonl", PARALLEL, first=100)
    return _replay(engine, workload, tmp / "run.jsonl", concurrency=PARALLEL)


@pytest.fixture(scope="module", params=["c1", "c4"])
def any_run(request) -> EngineRun:
    return request.getfixturevalue(f"run_{request.param}")


# ---------------------------------------------------------------------------------------------- the checks


def test_every_request_succeeds_and_carries_the_servers_timings(any_run: EngineRun) -> None:
    assert any_run.records, "the run sent no request"
    for r in any_run.records:
        assert r.error is None, f"{r.error}: {r.error_detail}"
        assert r.server_timings is not None, "llama-server sent no timings"
        assert r.prompt_tokens is not None and r.cached_tokens is not None and r.output_tokens is not None
    biggest = max(r.prompt_tokens for r in any_run.records)
    print(
        f"\nc{any_run.concurrency}: {len(any_run.records)} requests in {any_run.wall_s:.1f}s, prompts up to {biggest}"
    )


def test_output_tokens_equal_max_tokens_and_the_servers_count(any_run: EngineRun) -> None:
    for r in any_run.records:
        # output_tokens is usage.completion_tokens; ignore_eos makes the model run to max_tokens
        assert r.output_tokens == r.max_tokens == OUTPUT_TOKENS
        assert r.server_timings["predicted_n"] == r.output_tokens
        assert r.finish_reason == "length"
    total = sum(r.output_tokens for r in any_run.records)
    assert any_run.summary["totals"]["output_tokens"] == total
    assert any_run.metrics_delta["llamacpp:tokens_predicted_total"] == total


def test_cached_tokens_agree_with_the_server_per_request_and_with_its_counters(any_run: EngineRun) -> None:
    recs = any_run.records
    for r in recs:
        t = r.server_timings
        assert r.cached_tokens == t["cache_n"], r.id
        assert r.prompt_tokens == t["cache_n"] + t["prompt_n"], r.id
    cached = sum(r.cached_tokens for r in recs)
    processed = sum(r.server_timings["prompt_n"] for r in recs)
    d = any_run.metrics_delta
    print(
        f"\nc{any_run.concurrency} cache: replay Σcached_tokens {cached} = Σtimings.cache_n {cached} = "
        f"Δllamacpp:prompt_tokens_cached_total {d['llamacpp:prompt_tokens_cached_total']:.0f}; "
        f"Σtimings.prompt_n {processed} = Δllamacpp:prompt_tokens_total {d['llamacpp:prompt_tokens_total']:.0f}"
    )
    assert any_run.summary["totals"]["cached_tokens"] == cached
    assert d["llamacpp:prompt_tokens_cached_total"] == cached
    assert d["llamacpp:prompt_tokens_total"] == processed
    assert cached > 0, "no prompt-cache hit at all: the server's prefix cache did not work"


def test_client_reuse_ratio_bounds_the_host_hit_ratio(any_run: EngineRun) -> None:
    cache = any_run.summary["cache"]
    reuse, hit = cache["client_reuse_ratio"], cache["host_hit_ratio"]
    print(
        f"\nc{any_run.concurrency} reuse: client_reuse_ratio {reuse:.3f} (cl100k) >= host_hit_ratio {hit:.3f} "
        f"(the model's BPE): efficiency {cache['efficiency']:.3f}, gap {reuse - hit:.3f}"
    )
    # The client counts the previous answer as reusable; the host cannot reuse it, since it generated other
    # tokens than the recorded answer replay puts in the history. So the client-side ratio is an upper bound.
    assert 0 < hit <= reuse < 1


def test_ttft_covers_the_servers_prompt_time(any_run: EngineRun) -> None:
    gaps = []
    for r in any_run.records:
        ttft_ms = (r.t_first_token - r.t_sent) * 1000
        prompt_ms = r.server_timings["prompt_ms"]
        assert ttft_ms >= prompt_ms, (r.id, ttft_ms, prompt_ms)
        gaps.append(ttft_ms - prompt_ms)
    gaps.sort()
    p50, worst = gaps[len(gaps) // 2], gaps[-1]
    ttfts = sorted((r.t_first_token - r.t_sent) * 1000 for r in any_run.records)
    prompt = sorted(r.server_timings["prompt_ms"] for r in any_run.records)
    print(
        f"\nc{any_run.concurrency} TTFT - prompt_ms: p50 {p50:.1f} ms, max {worst:.1f} ms "
        f"(TTFT p50 {ttfts[len(ttfts) // 2]:.1f} ms, prompt_ms p50 {prompt[len(prompt) // 2]:.1f} ms)"
    )
    if any_run.concurrency == 1:
        # Alone on the server, TTFT is the prompt time plus HTTP, chat templating, tokenising, slot selection,
        # one sampled token and one SSE write: 4-13 ms measured here (p50 6-10 ms).
        assert p50 < 25.0


def test_continuous_batching_shows_in_replays_figures(engine, run_c1: EngineRun, run_c4: EngineRun, tmp_path) -> None:
    """Four sessions on four slots: each user decodes slower, the host produces more in aggregate.

    Measured on a decode-heavy workload (short prompts, 128-token answers), twice each way, alternating,
    and the best of each kept: CPU prefill does not batch, and other processes on a 2-core machine add noise.
    """
    runs: dict[int, list[EngineRun]] = {1: [], PARALLEL: []}
    for rep in range(2):
        for c in runs:
            workload = _decode_workload(tmp_path / f"d{rep}-{c}.jsonl", c, first=1000 + 100 * rep + 10 * c)
            runs[c].append(_replay(engine, workload, tmp_path / f"d{rep}-{c}.run.jsonl", concurrency=c))
    for c, rs in runs.items():
        for r in rs:
            assert r.summary["errors"] == 0, r.summary["errors_by_class"]
            print(
                f"\ndecode-heavy c{c}: per-user decode p50 {r.summary['user_decode_tps']['p50']:.0f} tok/s, "
                f"output {r.summary['throughput']['output_tps']:.0f} tok/s, "
                f"busy slots per decode call {r.busy_slots_per_decode:.2f}",
                end="",
            )
    d1 = max(r.summary["user_decode_tps"]["p50"] for r in runs[1])
    d4 = max(r.summary["user_decode_tps"]["p50"] for r in runs[PARALLEL])
    t1 = max(r.summary["throughput"]["output_tps"] for r in runs[1])
    t4 = max(r.summary["throughput"]["output_tps"] for r in runs[PARALLEL])
    a1, a4 = run_c1.summary, run_c4.summary
    print(
        f"\nbatching (decode-heavy, best of 2): per-user decode p50 {d1:.0f} -> {d4:.0f} tok/s ({d4 / d1:.2f}x), "
        f"output throughput {t1:.0f} -> {t4:.0f} tok/s ({t4 / t1:.2f}x)"
        f"\nbatching (agent workload, for the record): per-user decode p50 {a1['user_decode_tps']['p50']:.0f} -> "
        f"{a4['user_decode_tps']['p50']:.0f} tok/s, output throughput {a1['throughput']['output_tps']:.0f} -> "
        f"{a4['throughput']['output_tps']:.0f} tok/s, busy slots per decode call "
        f"{run_c1.busy_slots_per_decode:.2f} -> {run_c4.busy_slots_per_decode:.2f}"
    )
    assert max(r.busy_slots_per_decode for r in runs[PARALLEL]) > 2.0, "the server did not batch the sessions"
    assert d4 < 0.8 * d1, "4 sessions on 4 slots should each decode slower than one alone"
    assert t4 > 1.2 * t1, "batching 4 sessions should raise the aggregate output throughput"


def test_back_to_back_calls_on_one_connection(engine, tmp_path) -> None:
    """One session, two trajectories, no tool pauses: what ``--tool-time none`` does against llama-server.

    llama-server closes the connection after every stream while announcing keep-alive; the client must resend
    on a fresh connection (counted in ``retries``) rather than record an error.
    """
    workload = _decode_workload(tmp_path / "b.jsonl", 2, first=2000, output_tokens=8)
    run = _replay(engine, workload, tmp_path / "b.run.jsonl", concurrency=1, tool_time="none")
    errors = [f"turn {r.turn}: {r.error} {r.error_detail}" for r in run.records if r.error]
    print(f"\nback-to-back: {len(errors)} of {len(run.records)} calls failed" + "".join(f"\n  {e}" for e in errors))
    assert not errors
    print(f"  resent on a fresh connection: {sum(r.retries for r in run.records)} calls")
