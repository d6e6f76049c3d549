"""Every preset against the simulated host speaking its dialect: each provider's extra fields on every request,
in the report and in --json, and the server timings equal to what the host's truth log says it sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from replay.hosts.presets import PRESETS
from replay.loops.closed_loop import LoadConfig
from replay.records.reader import read_run
from replay.reports.text_report import to_json, to_text
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from tests.support.trajectories import simple_turns, write_trajectory

TIMED = {"groq", "cerebras", "fireworks", "llamacpp"}  # presets whose host reports server timings


def _run(tmp: Path, dialect: str, **extra: Any) -> tuple[Any, Any, dict[str, dict]]:
    work = tmp / "w.jsonl"
    for i in range(3):
        write_trajectory(work, f"w{i}", simple_turns(3, output_tokens=16))
    spec = RunSpec(
        trajectories=[str(work)],
        load=LoadConfig(concurrency=3, tool_time=ToolTimePolicy.parse("none")),
        out=str(tmp / "run.jsonl"),
        sim_profile="fast",
        sim_dialect=dialect,
        dialect=dialect,
        progress=False,
        **extra,
    )
    result = execute(spec)
    truth = {t["request_id"]: t for t in map(orjson.loads, (tmp / "run.truth.jsonl").read_bytes().splitlines())}
    return result, read_run(result.path), truth


@pytest.fixture(scope="module", params=sorted(PRESETS))
def preset_run(request, tmp_path_factory) -> tuple[str, Any, Any, dict[str, dict]]:
    name = request.param
    return (name, *_run(tmp_path_factory.mktemp(name), name))


def _extras(name: str, rec: Any) -> None:
    """What that provider says about itself, on this one record."""
    served, headers = rec.served or {}, rec.headers or {}
    assert served.get("model") == "replay-sim"
    if name in ("openai", "cerebras"):
        assert served["service_tier"] == "default" and served["system_fingerprint"] == "fp_replay_sim"
        assert "x-ratelimit-remaining-requests" in headers or "x-ratelimit-remaining-requests-day" in headers
    elif name == "anthropic":
        assert served["service_tier"] == "priority" and served["id"].startswith("msg_")
        assert headers["request-id"] == f"req_{rec.id}" and "anthropic-ratelimit-requests-remaining" in headers
    elif name == "groq":
        assert served["request_id"] == f"req_{rec.id}" and "x-ratelimit-remaining-tokens" in headers
    elif name == "fireworks":
        assert int(headers["fireworks-prompt-tokens"]) == rec.prompt_tokens
        assert int(headers["fireworks-cached-prompt-tokens"]) == rec.cached_tokens
    elif name == "openrouter":
        assert served["provider"] == "primary" and served["cost"] > 0
        assert headers["x-generation-id"] == f"gen-{rec.id}"
    elif name == "vercel":
        assert served["provider"] == "primary"  # provider_metadata.gateway.routing.finalProvider
    elif name == "deepseek":
        assert served["system_fingerprint"] == "fp_replay_sim"


def test_every_request_carries_the_providers_own_fields(preset_run) -> None:
    name, _result, run, truth = preset_run
    assert run.header["host"]["dialect"] == name
    assert run.header["host"]["api"] == PRESETS[name].api
    assert len(run.requests) == 9
    for rec in run.requests:
        assert rec.error is None, rec.error_detail
        t = truth[rec.id]
        assert (rec.prompt_tokens, rec.output_tokens) == (t["prompt_tokens"], t["output_tokens"])
        if rec.cached_tokens is None:  # vLLM and SGLang leave the details out when nothing was cached
            assert name in ("vllm", "sglang") and t["cached_tokens"] == 0
        else:
            assert rec.cached_tokens == t["cached_tokens"]
        _extras(name, rec)


def test_server_timings_agree_with_the_truth_log_within_a_millisecond(preset_run) -> None:
    name, _result, run, truth = preset_run
    for rec in run.requests:
        sent = truth[rec.id]["server_timings"]
        if name not in TIMED:
            assert rec.server_timings is None and sent is None
            continue
        assert rec.server_timings is not None, f"{name}: no server timings recorded"
        for key, value in sent.items():
            scale = 1e-3 if key.endswith("_ms") else 1.0
            if isinstance(value, float):
                assert abs(rec.server_timings[key] - value) * scale <= 1e-3, (name, key)
            else:
                assert rec.server_timings[key] == value, (name, key)


def test_the_report_and_json_carry_them(preset_run) -> None:
    name, result, _run, _truth = preset_run
    summary = orjson.loads(to_json(result.summary))
    text = to_text(result.summary, result.header)
    if name in TIMED:
        server = summary["server"]
        assert server["ttft_s"]["p50"] > 0 and server["ttft_s"]["p95"] >= server["ttft_s"]["p50"]
        assert "server TTFT p50" in text and "client − server" in text
        if name != "fireworks" or server["decode_tps"]["n"]:
            assert server["decode_tps"]["p50"] > 0
    else:
        assert "server" not in summary
    if name in ("openai", "cerebras", "anthropic"):
        assert summary["service_tiers"] == {"default" if name != "anthropic" else "priority": 1.0}
        assert "service tier answered" in text
    if name in ("openai", "groq", "cerebras", "anthropic"):
        assert summary["rate_limits"] and "rate limits, lowest remaining" in text
    if name == "openrouter":
        assert summary["routes"] == {"primary": 1.0}
        assert summary["cost"]["host_reported_usd"] > 0 and summary["cost"]["host_reported_requests"] == 9
        assert "host-reported $" in text


def test_fireworks_asks_for_perf_metrics_and_reads_them() -> None:
    assert PRESETS["fireworks"].body == {"perf_metrics_in_response": True}


def test_a_preset_dialect_applies_at_any_url(tmp_path: Path) -> None:
    """--host URL --dialect groq: a local test host read as Groq."""
    from replay.runner.embedded_host import embedded_host

    work = tmp_path / "w.jsonl"
    write_trajectory(work, "w", simple_turns(2, output_tokens=8))
    with embedded_host("fast", dialect="groq") as host:
        result = execute(
            RunSpec(
                trajectories=[str(work)],
                host=host.base_url,
                dialect="groq",
                model="replay-sim",
                retries=0,
                load=LoadConfig(concurrency=1, tool_time=ToolTimePolicy.parse("none")),
                out=str(tmp_path / "run.jsonl"),
                progress=False,
            )
        )
    run = read_run(result.path)
    assert run.header["host"]["dialect"] == "groq" and run.header["host"]["base_url"] == host.base_url
    assert all(r.server_timings and "queue_time" in r.server_timings for r in run.requests)
    assert result.summary["server"]["queue_s"]["n"] == result.summary["window"]["requests"] >= 1
