"""Provider dialects as bytes: each one's fields, headers and quirks, and server timings that agree with the
engine's truth within 1 ms."""

import aiohttp
import pytest

from replay.sim.server.app import start_sim
from replay.sim.server.dialects import DIALECTS
from replay.sim.wire.openai import piece_text
from tests.support.sim_api import body_for, post, sse, token_texts

N, R = 10, 3  # answer tokens of each request; the reasoning profile streams the first 3 as reasoning
BASE_KEYS = {"id", "object", "created", "model", "choices"}
MS = 1e-3


async def chat_turns(dialect: str, turns: int = 1, api: str = "chat", **extra):
    """Stream ``turns`` growing requests under ``dialect``; their headers, decoded events and truth records."""
    out = []
    async with await start_sim("reasoning", dialect=dialect) as sim, aiohttp.ClientSession() as http:
        for turn in range(turns):
            body = body_for(api, N, **extra)
            if turn and api == "chat":
                body["messages"] += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"}]
            status, headers, raw = await post(http, sim.base_url, api, body, **{"X-Request-Id": f"{dialect}-{turn}"})
            assert status == 200
            out.append((headers, sse(raw), raw))
        truth = await sim.wait_truth(turns)
    return [(h, e, raw, t) for (h, e, raw), t in zip(out, truth, strict=True)]


def chunks(events):
    return [e["data"] for e in events if isinstance(e["data"], dict)]


def finish_chunk(events):
    (finish,) = [c for c in chunks(events) if c["choices"] and c["choices"][0]["finish_reason"]]
    return finish


def usage_of(events):
    return [c["usage"] for c in chunks(events) if c.get("usage")][-1]


def near(a: float, b: float) -> bool:
    return abs(a - b) < MS


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
async def test_every_dialect_streams_one_event_per_token_and_the_right_usage(dialect):
    ((headers, events, _, truth),) = await chat_turns(dialect)
    assert headers["x-replay-route"] == "primary" and events[-1]["data"] == "[DONE]"
    texts = token_texts("chat", events)
    hidden = R if dialect == "openai" else 0  # OpenAI streams no reasoning text on chat
    assert "".join(texts) == piece_text(hidden, N - hidden) and len(texts) == N - hidden
    usage = usage_of(events)
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (truth["prompt_tokens"], N)
    assert truth["output_tokens"] == N and sum(truth["writes"][1::2]) == N - hidden


async def test_default_adds_nothing():
    ((headers, events, _, _),) = await chat_turns("default")
    assert all(set(c) <= BASE_KEYS | {"usage"} for c in chunks(events))
    assert not any(k.startswith("x-ratelimit") for k in headers)


async def test_openai_fields_headers_and_hidden_reasoning():
    ((headers, events, _, _),) = await chat_turns("openai")
    assert all(c["service_tier"] == "default" and c["system_fingerprint"] for c in chunks(events))
    assert not any("reasoning_content" in c["choices"][0]["delta"] for c in chunks(events) if c["choices"])
    assert usage_of(events)["completion_tokens_details"] == {"reasoning_tokens": R}
    limit, left = int(headers["x-ratelimit-limit-requests"]), int(headers["x-ratelimit-remaining-requests"])
    assert left == limit - 1 and headers["x-ratelimit-reset-requests"].endswith("s")
    assert {"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"} <= set(headers)
    assert headers["X-Request-Id"] == "openai-0"
    ((_, events, _, _),) = await chat_turns("openai", service_tier="fast")
    assert {c["service_tier"] for c in chunks(events)} == {"priority"}  # the tier served, not the one asked


async def test_anthropic_messages_usage_tier_and_headers():
    ((headers, events, _, _),) = await chat_turns("anthropic", api="messages")
    start = events[0]["data"]["message"]
    assert start["usage"]["service_tier"] == "priority"
    assert headers["request-id"] == "req_anthropic-0"
    for kind in ("requests", "tokens", "input-tokens", "output-tokens"):
        assert {f"anthropic-ratelimit-{kind}-{x}" for x in ("limit", "remaining", "reset")} <= set(headers)
    assert headers["anthropic-ratelimit-requests-reset"].endswith("Z")


async def test_groq_x_groq_and_timings_in_usage():
    ((_, events, _, truth),) = await chat_turns("groq")
    cs = chunks(events)
    assert cs[0]["x_groq"] == {"id": "req_groq-0"}
    finish = finish_chunk(events)
    assert finish["x_groq"]["id"] == "req_groq-0" and finish["x_groq"]["usage"] == finish["usage"]
    assert not [c for c in cs if c["choices"] == []]  # usage rides on the finish chunk
    assert any("reasoning" in c["choices"][0]["delta"] for c in cs if c["choices"])
    u = finish["usage"]
    assert near(u["queue_time"], truth["queue_wait"]) and near(u["prompt_time"], truth["prefill_time"])
    assert near(u["completion_time"], truth["decode_time"]) and near(
        u["total_time"], u["prompt_time"] + u["completion_time"]
    )
    assert truth["server_timings"] == {k: u[k] for k in ("queue_time", "prompt_time", "completion_time", "total_time")}
    ((_, events, _, _),) = await chat_turns("groq", stream_options={})  # usage not asked: only in x_groq
    finish = finish_chunk(events)
    assert "usage" not in finish and finish["x_groq"]["usage"]["completion_tokens"] == N


async def test_cerebras_time_info_on_the_finish_chunk():
    ((_, events, _, truth),) = await chat_turns("cerebras")
    finish = finish_chunk(events)
    info = finish["time_info"]
    assert near(info["queue_time"], truth["queue_wait"]) and near(info["prompt_time"], truth["prefill_time"])
    assert near(info["completion_time"], truth["decode_time"]) and isinstance(info["created"], float)
    assert finish["usage"]["completion_tokens"] == N and finish["service_tier"] == "default"
    assert truth["server_timings"]["prompt_time"] == info["prompt_time"]


async def test_fireworks_headers_at_the_first_token_and_perf_metrics_when_asked():
    ((headers, events, _, truth),) = await chat_turns("fireworks", perf_metrics_in_response=True)
    assert int(headers["fireworks-prompt-tokens"]) == truth["prompt_tokens"]
    assert int(headers["fireworks-cached-prompt-tokens"]) == truth["cached_tokens"]
    ttft = float(headers["fireworks-server-time-to-first-token"])
    assert near(ttft, truth["queue_wait"] + truth["prefill_time"])
    metrics = finish_chunk(events)["perf_metrics"]
    assert near(metrics["server-time-to-first-token"], ttft) and metrics["prompt-tokens"] == truth["prompt_tokens"]
    assert near(metrics["server-processing-time"], truth["queue_wait"] + truth["prefill_time"] + truth["decode_time"])
    assert truth["server_timings"] == metrics
    ((_, events, _, _),) = await chat_turns("fireworks")
    assert "perf_metrics" not in finish_chunk(events)


async def test_openrouter_provider_cost_and_processing_comments():
    ((headers, events, raw, _),) = await chat_turns("openrouter", stream_options={})  # usage comes unasked
    assert {c["provider"] for c in chunks(events)} == {"primary"}
    usage = usage_of(events)
    assert usage["cost"] > 0 and set(usage["cost_details"]) >= {"upstream_inference_cost"}
    assert headers["X-Generation-Id"] == "gen-openrouter-0"
    assert raw.startswith(b": OPENROUTER PROCESSING\n\n")
    with_comments = [i for i, e in enumerate(events) if e["comments"]]  # a comment goes with the event after it
    assert with_comments[0] == 0 and len(with_comments) == 2
    assert 1 < with_comments[1] < len(events) - 2  # one more keep-alive while tokens are streaming


async def test_vercel_provider_metadata():
    ((_, events, _, _),) = await chat_turns("vercel")
    routing = finish_chunk(events)["provider_metadata"]["gateway"]["routing"]
    assert routing["finalProvider"] == "primary" and routing["fallbacksAvailable"] == []
    # one model attempt, one provider attempt: no fallback (the Vercel gateway's modelAttempts, docs/providers.md)
    assert routing["modelAttempts"] == [{"canonicalSlug": "m", "providerAttemptCount": 1, "success": True}]


async def test_deepseek_cache_hit_and_miss_tokens():
    _, (_, events, _, truth) = await chat_turns("deepseek", turns=2)
    u = usage_of(events)
    assert u["prompt_cache_hit_tokens"] == truth["cached_tokens"] > 0
    assert u["prompt_cache_hit_tokens"] + u["prompt_cache_miss_tokens"] == u["prompt_tokens"]
    assert u["prompt_tokens_details"]["cached_tokens"] == truth["cached_tokens"]


@pytest.mark.parametrize("dialect", ["vllm", "sglang"])
async def test_vllm_and_sglang_leave_out_cached_details_when_zero(dialect):
    (_, first, _, _), (_, second, _, truth) = await chat_turns(dialect, turns=2)
    assert "prompt_tokens_details" not in usage_of(first)
    assert usage_of(second)["prompt_tokens_details"] == {"cached_tokens": truth["cached_tokens"]}
    deltas = [c["choices"][0]["delta"] for c in chunks(first) if c["choices"]]
    reasoning = [d for d in deltas if "reasoning_content" in d]
    assert len(reasoning) == R
    if dialect == "vllm":
        assert all(d["reasoning"] == d["reasoning_content"] for d in reasoning)
        assert "completion_tokens_details" not in usage_of(first)
    else:
        assert usage_of(first)["completion_tokens_details"] == {"reasoning_tokens": R}


async def test_llamacpp_timings():
    _, (_, events, _, truth) = await chat_turns("llamacpp", turns=2)
    t = finish_chunk(events)["timings"]
    assert t["cache_n"] == truth["cached_tokens"] > 0 and t["cache_n"] + t["prompt_n"] == truth["prompt_tokens"]
    assert near(t["prompt_ms"] * MS, truth["prefill_time"]) and near(t["predicted_ms"] * MS, truth["decode_time"])
    assert t["predicted_n"] == N and t["predicted_per_second"] > 0 and t["prompt_per_second"] > 0
    assert truth["server_timings"] == t


@pytest.mark.parametrize(("dialect", "field"), [("together", "reasoning"), ("baseten", "reasoning_content")])
async def test_openai_shaped_dialects(dialect, field):
    ((_, events, _, _),) = await chat_turns(dialect)
    deltas = [c["choices"][0]["delta"] for c in chunks(events) if c["choices"]]
    assert sum(field in d for d in deltas) == R
    assert all(set(c) <= BASE_KEYS | {"usage"} for c in chunks(events))
