"""Session affinity templates reach the host unredacted; connections per session or per request; provider limits
as their own error classes, and an exhausted quota never retried."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.clients.affinity import Affinity, split_body
from replay.clients.errors import http_error_class
from replay.loops.closed_loop import LoadConfig
from replay.records.reader import read_run
from replay.records.run_file import RequestRecord
from replay.runner.single_run import RunSpec, execute
from replay.sessions.retry import RetryPolicy
from replay.sessions.tool_time import ToolTimePolicy
from tests.support.trajectories import simple_turns, write_trajectory


def _work(tmp: Path, n: int = 4, turns: int = 3) -> Path:
    path = tmp / "w.jsonl"
    for i in range(n):
        write_trajectory(path, f"w{i}", simple_turns(turns, output_tokens=8))
    return path


def _truth(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_templates_are_filled_per_call() -> None:
    fixed, templated = split_body({"a": 1, "prompt_cache_key": "k-{task}", "meta": {"s": "{session}"}})
    assert fixed == {"a": 1} and set(templated) == {"prompt_cache_key", "meta"}
    aff = Affinity(templated, {"X-Session-ID": "sess-{session}", "X-Fixed": "1"})
    body = aff.body(b'{"model":"m","stream":true}', 3, 17)
    assert orjson.loads(body) == {"model": "m", "stream": True, "prompt_cache_key": "k-17", "meta": {"s": "3"}}
    assert aff.headers(3, 17) == {"X-Session-ID": "sess-3"} and aff.header_names == ("X-Session-ID",)


def test_per_session_prompt_cache_keys_arrive_at_the_host_unredacted(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    result = CliRunner().invoke(
        main,
        [
            "run",
            str(_work(tmp_path)),
            "--sim-profile",
            "fast",
            "--tool-time",
            "none",
            "-c",
            "2",
            "-q",
            "--out",
            str(out),
            "--extra-body",
            '{"prompt_cache_key": "replay-{task}", "user": "u{session}"}',
            "--header",
            "X-Session-ID:s-{session}-{task}",
            "--sim-dialect",
            "openai",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    requests = {r["id"]: r for r in lines if r["type"] == "request"}
    truth = _truth(tmp_path / "run.truth.jsonl")
    assert len(truth) == len(requests) == 12
    for t in truth:
        rec = requests[t["request_id"]]
        assert t["request_fields"]["prompt_cache_key"] == f"replay-{rec['task']}"
        assert t["request_fields"]["user"] == f"u{rec['session']}"
        assert t["request_headers"]["x-session-id"] == f"s-{rec['session']}-{rec['task']}"
    assert len({t["request_fields"]["prompt_cache_key"] for t in truth}) == 4  # one per task
    header = lines[0]
    assert header["host"]["body"]["prompt_cache_key"] == "replay-{task}"  # the template, not ***
    assert header["request"]["extra_body"]["prompt_cache_key"] == "replay-{task}"
    assert header["host"]["headers"] == {"X-Session-ID": "s-{session}-{task}"}


def test_per_request_connections_are_timed_and_reported(tmp_path: Path) -> None:
    spec = RunSpec(
        trajectories=[str(_work(tmp_path))],
        connection="per-request",
        sim_profile="fast",
        progress=False,
        load=LoadConfig(concurrency=2, tool_time=ToolTimePolicy.parse("none")),
        out=str(tmp_path / "r.jsonl"),
    )
    result = execute(spec)
    conn = result.summary["connections"]
    assert conn["new"] == result.summary["window"]["requests"] > 0 and conn["reused"] == 0
    assert conn["connect_s"]["p50"] > 0
    for rec in read_run(result.path).requests:  # opened inside the call, before its bytes left: in its send wait
        assert rec.connect_s is not None and 0 < rec.connect_s <= rec.t_sent - rec.t_call + 2e-6, rec
    assert result.header["host"]["connection"] == "per-request"
    from replay.reports.text_report import to_text

    assert "new connections:" in to_text(result.summary, result.header)


def test_kept_alive_connections_are_opened_before_the_run(tmp_path: Path) -> None:
    spec = RunSpec(
        trajectories=[str(_work(tmp_path))],
        sim_profile="fast",
        progress=False,
        load=LoadConfig(concurrency=2, tool_time=ToolTimePolicy.parse("none")),
        out=str(tmp_path / "r.jsonl"),
    )
    conn = execute(spec).summary["connections"]
    assert conn["new"] == 0 and conn["reused"] > 0


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (
            429,
            b'{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}',
            "quota_exhausted",
        ),
        (402, b'{"error":{"code":402,"message":"Insufficient credits"}}', "quota_exhausted"),
        (
            400,
            b'{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low"}}',
            "quota_exhausted",
        ),
        (
            429,
            b'{"error":{"message":"Request too large for gpt-x on tokens per min (TPM): Limit 30000, Requested 4e4"}}',
            "tier_limit",
        ),
        (
            413,
            b'{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}',
            "request_too_large",
        ),
        (400, b'{"error":{"message":"prompt is too long: 210000 tokens > 200000 maximum"}}', "context_overflow"),
        (400, b'{"error":{"code":"context_length_exceeded"}}', "context_overflow"),
        (429, b'{"error":{"message":"Rate limit reached for requests"}}', "http_429"),
        (400, b'{"error":{"message":"bad"}}', "http_4xx"),
    ],
)
def test_provider_limits_are_classes_of_their_own(status: int, body: bytes, cls: str) -> None:
    assert http_error_class(status, body) == cls


def test_an_exhausted_quota_is_never_retried() -> None:
    rec = RequestRecord(id="r", session=0, task=0, trajectory="t", turn=0, status=429, error="quota_exhausted")
    rec.headers = {"x-should-retry": "true", "retry-after": "1"}
    assert not RetryPolicy(retries=3).should_retry(rec)
    rec.error = "http_429"
    assert RetryPolicy(retries=3).should_retry(rec)


def test_a_402_from_the_host_is_named_and_not_retried(tmp_path: Path) -> None:
    spec = RunSpec(
        trajectories=[str(_work(tmp_path, n=1, turns=2))],
        sim_profile="fast",
        sim_faults="402:1",
        sim_dialect="openrouter",
        retries=2,
        progress=False,
        out=str(tmp_path / "r.jsonl"),
        load=LoadConfig(concurrency=1, tool_time=ToolTimePolicy.parse("none")),
    )
    result = execute(spec)
    assert result.summary["errors_by_class"] == {"quota_exhausted": 2}
    assert result.summary["retries"] == 0 and result.summary["provider_limits"] == {"quota_exhausted": 2}
