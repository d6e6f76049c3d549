"""Whole runs against the simulated host over real HTTP: the client's figures against the host's truth."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.loops.closed_loop import LoadConfig
from replay.metrics.summary import steady_window, summarize
from replay.metrics.truth_compare import client_token_times, host_token_times
from replay.records.reader import read_run
from replay.reports.text_report import to_json, to_text
from replay.runner.embedded_host import embedded_host
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from replay.verdict.judge import judge
from tests.support.trajectories import simple_turns, write_trajectory

ROUNDING_S = 2e-6  # both sides store times rounded to the microsecond


def _workload(tmp_path: Path, n: int = 6, turns: int = 4, output_tokens: int = 24, tool_time_s: float = 0.05) -> Path:
    path = tmp_path / "w.jsonl"
    for i in range(n):
        write_trajectory(path, f"w{i}", simple_turns(turns, output_tokens=output_tokens, tool_time_s=tool_time_s))
    return path


def _truth(path: Path) -> dict[str, dict]:
    return {t["request_id"]: t for t in map(orjson.loads, path.read_bytes().splitlines())}


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory) -> tuple:
    """One run of 6 trajectories at concurrency 4 against the embedded host (default profile: real pacing)."""
    tmp = tmp_path_factory.mktemp("run")
    spec = RunSpec(
        trajectories=[str(_workload(tmp))],
        load=LoadConfig(concurrency=4, tool_time=ToolTimePolicy.parse("recorded")),
        out=str(tmp / "run.jsonl"),
        sim_profile="default",
        sim_truth_log=str(tmp / "truth.jsonl"),
        progress=False,
    )
    result = execute(spec)
    return result, read_run(result.path), _truth(tmp / "truth.jsonl")


def test_every_request_succeeds_and_matches_the_host_token_counts(sim_run) -> None:
    result, run, truth = sim_run
    assert len(run.requests) == 6 * 4
    for rec in run.requests:
        assert rec.error is None, rec.error_detail
        t = truth[rec.id]
        assert rec.output_tokens == t["output_tokens"] == rec.max_tokens == rec.output_events
        assert rec.prompt_tokens == t["prompt_tokens"]
        assert rec.cached_tokens == t["cached_tokens"]
        # the sim counts prompts with the same rules as the client estimate: they must agree exactly
        assert rec.prompt_tokens == rec.prompt_tokens_est
    assert result.summary["totals"]["cached_tokens"] == sum(t["cached_tokens"] for t in truth.values())


def test_ttft_and_token_times_agree_with_the_truth_log(sim_run) -> None:
    """Order and counts, which no busy machine can break (how close the times are is a timing claim, measured by
    scripts/truth_agreement.py into docs/benchmarks.md): one monotonic clock for client and host, so every request
    left before the host saw it and every token was read after the host wrote it, which bounds an error in the
    client's clock base from both sides; and tokens were stamped as they came, not when the answer was whole."""
    result, run, truth = sim_run
    ttft, prompt = [], 0
    for rec in run.requests:
        t = truth[rec.id]
        ttft.append((rec.t_first_token - rec.t_sent) - (t["first_token"] - t["arrival"]))
        client, host = client_token_times(rec), host_token_times(t)
        assert len(client) == len(host) == rec.output_tokens
        assert rec.t_sent <= t["arrival"] + ROUNDING_S and bool(np.all(client >= host - ROUNDING_S)), rec.id
        prompt += int(np.count_nonzero(client[:-1] < host[1:]))  # read before the host wrote the next one
    assert prompt > 0  # a client that stamped an answer's tokens only once it had them all would have none
    assert min(ttft) >= -2 * ROUNDING_S  # so the client's TTFT holds the host's
    # the live report's truth section is this same comparison: the nearest-rank median, held to 3 significant digits
    deviations = sorted(np.abs(ttft))
    median = float(deviations[math.ceil(len(deviations) / 2) - 1])
    assert result.summary["truth"]["ttft_dev_s"]["p50"] == pytest.approx(median, rel=1e-3, abs=1e-6)


def test_a_task_run_is_measured_whole(sim_run) -> None:
    """A run of N tasks (here one pass over the workload) covers every call: warm-up and drain included."""
    result, run, truth = sim_run
    win = steady_window(run)
    assert win.start == run.phases["start"] and win.end == run.phases["end"] and "stop" not in run.phases
    w = result.summary["window"]
    assert w["whole_run"] and w["requests"] == w["of_requests"] == len(run.requests) == 24
    host_out = sum(t["output_tokens"] for t in truth.values())
    assert result.summary["throughput"]["tokens"]["output"] == pytest.approx(host_out)
    assert "window: the whole run" in to_text(result.summary, result.header)


def test_a_timed_runs_steady_window_excludes_warmup_and_drain(tmp_path: Path) -> None:
    spec = RunSpec(
        trajectories=[str(_workload(tmp_path))],
        load=LoadConfig(concurrency=4, duration_s=2.5, tool_time=ToolTimePolicy.parse("recorded")),
        out=str(tmp_path / "run.jsonl"),
        sim_profile="default",
        sim_truth_log=str(tmp_path / "truth.jsonl"),
        progress=False,
    )
    result = execute(spec)
    run, truth = read_run(result.path), _truth(tmp_path / "truth.jsonl")
    win = steady_window(run)
    first_done: dict[int, float] = {}
    for rec in run.requests:
        first_done[rec.session] = min(first_done.get(rec.session, rec.t_done), rec.t_done)
    assert win.steady and not result.summary["window"]["whole_run"]
    assert run.phases["steady_start"] >= max(first_done.values())  # warm-up: every session's first call is back
    assert win.start == run.phases["steady_start"]
    assert win.end == run.phases["stop"] < run.phases["end"]  # the drain is after the stop
    before = [r for r in run.requests if r.t_sent < win.start]
    # no call starts after the stop (its bytes may leave after it: t_sent is stamped at the wire)
    assert before and not [r for r in run.requests if r.t_call >= win.end]
    assert any(r.t_done > win.end for r in run.requests)  # but some were in flight: the drain, cut off
    inside = [r for r in run.requests if win.start <= r.t_sent < win.end and r.error is None]
    assert result.summary["window"]["requests"] == len(inside) >= len(run.requests) - len(before) - 4  # 4 sessions
    # output tokens in the window, recounted from each call's raw reads ([dt, n, ...] after t_sent) by this test;
    # and each token read no earlier than the host wrote it (one monotonic clock; both stored to the microsecond)
    client_out = result.summary["throughput"]["tokens"]["output"]
    recount = 0
    for rec in run.requests:
        reads = [(rec.t_sent + dt, n) for dt, n in zip(rec.chunks[::2], rec.chunks[1::2], strict=True)]
        recount += sum(n for t, n in reads if win.start <= t < win.end)
        host = [t for t, n in zip(truth[rec.id]["writes"][::2], truth[rec.id]["writes"][1::2], strict=True)
                for _ in range(n)]  # fmt: skip
        mine = [t for t, n in reads for _ in range(n)]
        assert len(mine) == len(host) and all(c >= h - 2e-6 for c, h in zip(mine, host, strict=True)), rec.id
    assert client_out == recount > 0
    assert result.summary["throughput"]["output_tps"] == pytest.approx(client_out / win.seconds)


def test_report_from_the_file_equals_the_live_summary(sim_run) -> None:
    result, run, _ = sim_run
    live = result.summary.to_dict()
    truth_part = live.pop("truth")  # the comparison with the sim's truth log, which the run file names
    # the run beside its recorded timeline, from the workload (this one records none: a note says so)
    timeline = live["breakdown"].pop("recorded_timeline")
    assert timeline["tasks"] == 0 and timeline["notes"]
    assert judge(summarize(run).to_dict(), run.header, run.footer) == live  # the verdict comes from the file alone too
    assert truth_part["matched"] == truth_part["aligned"] == len(run.requests)
    out = CliRunner().invoke(main, ["report", str(result.path), "--json"])
    assert out.exit_code == 0, out.output
    assert orjson.loads(out.output) == orjson.loads(to_json(result.summary))  # live equals offline, every key
    for key in ("ttft_s", "ttfat_s", "e2e_s", "itl_s", "user_decode_tps", "throughput", "cache", "tasks", "totals"):
        assert key in result.summary
    assert result.summary["tasks"]["count"] == 6
    assert 0 < result.summary["cache"]["client_reuse_ratio"] < 1
    assert result.summary["cache"]["host_hit_ratio"] > 0


def test_api_key_never_reaches_the_run_file_or_output(tmp_path: Path, monkeypatch) -> None:
    secret = "sk-live-DO-NOT-LEAK-0123456789"
    monkeypatch.setenv("REPLAY_TEST_KEY", secret)
    out = tmp_path / "run.jsonl"
    res = CliRunner().invoke(
        main,
        [
            "run", str(_workload(tmp_path, n=2, turns=2)), "--api-key-env", "REPLAY_TEST_KEY", "-c", "2",
            "--sim-profile", "fast", "--tool-time", "none", "--out", str(out), "--extra-body", '{"api_key": "x1"}',
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert secret not in text and secret not in res.output
    header = read_run(out).header
    assert header["host"]["api_key_env"] == "REPLAY_TEST_KEY" and header["host"]["api_key_set"] is True
    assert header["request"]["extra_body"] == {"api_key": "***"}


def test_cli_against_a_standalone_sim_with_duration(tmp_path: Path) -> None:
    """`replay sim --port P` in its own process, then `replay run --host ... --duration` against it."""
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sim = subprocess.Popen(
        [sys.executable, "-m", "replay", "sim", "--port", str(port), "--profile", "fast"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sim.stdout is not None and sim.stdout.readline().startswith("REPLAY_SIM_READY")
        out = tmp_path / "run.jsonl"
        work = _workload(tmp_path, n=4, turns=40, tool_time_s=0.02)
        res = subprocess.run(
            [sys.executable, "-m", "replay", "run", str(work), "--host", f"http://127.0.0.1:{port}/v1",
             "--model", "M", "--concurrency", "4", "--duration", "2", "--out", str(out), "--json", "-q"],
            capture_output=True, timeout=60,
        )  # fmt: skip
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    assert res.returncode == 0, res.stderr.decode()
    summary = orjson.loads(res.stdout)
    run = read_run(out)
    assert run.header["host"]["model"] == "M" and run.header["simulated_host"] is None
    assert run.footer["stop_reason"] == "duration"
    assert summary["requests"] == len(run.requests) > 0 and summary["errors"] == 0
    assert summary["window_s"] >= 2.0 - summary["window"]["start_s"] - 2e-6  # the stop is late when busy, never early
    assert summary["throughput"]["output_tps"] > 0 and summary["ttft_s"]["p50"] > 0


def test_reasoning_host_time_to_first_answer_token(tmp_path: Path) -> None:
    spec = RunSpec(
        trajectories=[str(_workload(tmp_path, n=2, turns=2, output_tokens=20, tool_time_s=0.0))],
        load=LoadConfig(concurrency=2, tool_time=ToolTimePolicy.parse("none")),
        out=str(tmp_path / "run.jsonl"),
        sim_profile="reasoning",
        sim_truth_log=str(tmp_path / "truth.jsonl"),
        progress=False,
    )
    result = execute(spec)
    truth = _truth(tmp_path / "truth.jsonl")
    run = read_run(result.path)
    for rec in run.requests:
        t = truth[rec.id]
        assert rec.reasoning_tokens == t["reasoning_tokens"] == 6  # 30% of 20
        # the answer starts with the 7th token, as the host wrote it: the client's 7th token read
        client = client_token_times(rec)
        assert len(client) == len(host_token_times(t)) == 20
        assert rec.t_first_answer == pytest.approx(client[6], abs=1e-6)
        assert rec.t_first_answer > rec.t_first_token == pytest.approx(client[0], abs=1e-6)
    s = result.summary
    assert s["ttfat_s"]["p50"] > s["ttft_s"]["p50"]


def test_run_with_simulated_faults_counts_them_exactly(tmp_path: Path) -> None:
    out, truth_path = tmp_path / "run.jsonl", tmp_path / "truth.jsonl"
    res = CliRunner().invoke(
        main,
        ["run", str(_workload(tmp_path, n=4, turns=6, tool_time_s=0.0)), "-c", "4", "--sim-profile", "fast",
         "--sim-faults", "429:0.15,500:0.1,drop:0.1", "--sim-fault-seed", "3", "--sim-truth-log", str(truth_path),
         "--out", str(out), "--json", "-q"],
    )  # fmt: skip
    assert res.exit_code == 2, res.output  # more than 10 % of calls failed: the default limit
    summary = orjson.loads(res.output)
    assert summary["verdict"]["exit_code"] == 2 and "10%" in summary["verdict"]["reasons"][0]
    faults: dict[str, int] = {}
    for t in _truth(truth_path).values():
        if t.get("fault"):
            faults[t["fault"]] = faults.get(t["fault"], 0) + 1
    expected = {"http_429": faults.get("429", 0), "http_5xx": faults.get("500", 0), "disconnect": faults.get("drop", 0)}
    assert sum(expected.values()) > 0
    assert summary["errors_by_class"] == {k: v for k, v in expected.items() if v}
    assert read_run(out).header["simulated_faults"] == "429:0.15,500:0.1,drop:0.1"


def test_task_salt_keeps_copies_of_a_trajectory_from_sharing_cache(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    turns = simple_turns(2, output_tokens=8)
    turns[0]["append"][1]["content"] = "Fix the failing test in parser.py. " + "Details follow. " * 200
    write_trajectory(path, "one", turns)
    first_cached = {}
    for salt in (True, False):
        spec = RunSpec(
            trajectories=[str(path)], out=str(tmp_path / f"{salt}.jsonl"), sim_profile="fast", progress=False,
            load=LoadConfig(concurrency=1, tasks=2, tool_time=ToolTimePolicy.parse("none"), salt_tasks=salt),
        )  # fmt: skip
        run = read_run(execute(spec).path)
        second_task_first_call = next(r for r in run.requests if r.task == 1 and r.turn == 0)
        assert second_task_first_call.prompt_tokens == second_task_first_call.prompt_tokens_est
        first_cached[salt] = second_task_first_call.cached_tokens
        assert bool(run.footer["salt"]) is salt  # a fresh nonce per run: no cache carried over between runs
    # unsalted, the copy is served almost entirely from the first task's cache; salted, only the system prompt
    assert first_cached[False] > 200 > first_cached[True]


def test_a_later_run_is_not_served_from_an_earlier_runs_cache(tmp_path: Path) -> None:
    """One host kept warm across two runs of the same trajectory: the system prompt carries the run's tag, so the
    second run's first call shares no cached block with the first run's (it shared the whole system prompt)."""
    path = tmp_path / "one.jsonl"
    turns = simple_turns(2, output_tokens=8)
    turns[0]["append"][0]["content"] = "You are a careful coding agent. " + "Follow the house rules. " * 100
    write_trajectory(path, "one", turns)
    cached = []
    with embedded_host("fast") as sim:
        for i in range(2):
            load = LoadConfig(concurrency=1, tasks=1, tool_time=ToolTimePolicy.parse("none"))
            spec = RunSpec(trajectories=[str(path)], host=sim.base_url, model="m", out=str(tmp_path / f"{i}.jsonl"),
                           progress=False, load=load)  # fmt: skip
            run = read_run(execute(spec).path)
            first = next(r for r in run.requests if r.turn == 0)
            assert first.error is None and first.prompt_tokens > 500
            cached.append(first.cached_tokens)
    assert cached[1] < 32, cached  # at most the chat template's opening block: the system prompt is not shared


def test_rate_limit_spaces_call_starts_across_sessions(tmp_path: Path) -> None:
    spec = RunSpec(
        trajectories=[str(_workload(tmp_path, n=2, turns=3, output_tokens=4, tool_time_s=0.0))],
        out=str(tmp_path / "run.jsonl"), sim_profile="fast", progress=False,
        load=LoadConfig(concurrency=2, tool_time=ToolTimePolicy.parse("none"), rate_limit=(2, 0.4)),
    )  # fmt: skip
    run = read_run(execute(spec).path)
    started = sorted(r.t_call for r in run.requests)
    assert len(started) == 6 and all(r.error is None for r in run.requests)
    # a sliding window of 2 calls per 0.4 s: call k+2 starts at least 0.4 s after call k
    assert all(b - a >= 0.4 for a, b in zip(started, started[2:], strict=False))
    assert sum(r.throttle_s for r in run.requests) >= 0.8  # calls 3-6 waited: throttled time, not model time
    assert all(r.t_call <= r.t_sent for r in run.requests)
    assert read_run(tmp_path / "run.jsonl").header["load"]["rate_limit"] == [2, 0.4]


def test_report_finds_the_truth_log_beside_the_run_file_or_as_told(sim_run, tmp_path: Path) -> None:
    result, _, _ = sim_run
    text = CliRunner().invoke(main, ["report", str(result.path)])
    assert text.exit_code == 0, text.output
    assert "Against the host's truth log (24 of 24 calls matched" in text.output
    truth = Path(result.header["simulated_truth_log"])
    moved = tmp_path / "moved.jsonl"  # the run file moved away, and the truth log where it named gone
    moved.write_bytes(result.path.read_bytes().replace(str(truth).encode(), b"/gone/" + truth.name.encode(), 1))
    alone = CliRunner().invoke(main, ["report", str(moved)])
    assert alone.exit_code == 0 and "truth log" not in alone.output
    (tmp_path / truth.name).write_bytes(truth.read_bytes())  # moved along with it: found beside the run file
    beside = CliRunner().invoke(main, ["report", str(moved)])
    assert beside.exit_code == 0 and "24 of 24 calls matched" in beside.output
    told = CliRunner().invoke(main, ["report", str(moved), "--truth", str(truth)])
    assert told.exit_code == 0 and "24 of 24 calls matched" in told.output
    bad = tmp_path / "bad-truth.jsonl"
    bad.write_bytes(b'{"request_id": "a"}\nnot json\n{"request_id": "b"}\n')
    broken = CliRunner().invoke(main, ["report", str(moved), "--truth", str(bad)])
    assert broken.exit_code != 0 and f"{bad}:2: not JSON" in broken.output
