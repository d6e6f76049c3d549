"""Provider dialects: the extra fields, headers and quirks each provider puts on an OpenAI-style stream.

``replay sim --dialect NAME`` picks one. A dialect shapes the chat stream (fields on every chunk, on the
first and on the last chunk, where reasoning text goes, how usage looks and where it rides), the response
headers, SSE comments and the wording of errors (``errors``). Server timings it reports come from the
engine's truth (``Timings``), and ``reported_timings`` is exactly what it put on the wire, so the truth log
can hold it. The default stream and the hooks each dialect overrides are ``dialect_base``'s. Sources:
the project's provider notes (PROVIDERS.md), section per provider; docs/simulated-host.md has a table.
"""

from __future__ import annotations

from typing import Any

from replay.sim.server.dialect_base import Dialect, openai_usage
from replay.sim.server.exchange import PRIMARY, Counts, Exchange, Timings
from replay.sim.server.ratelimits import RateLimits

# Prices of the OpenRouter dialect's usage.cost (USD per token): uncached input, cached input, output.
OPENROUTER_PRICES = (0.5e-6, 0.05e-6, 1.5e-6)
# The request headers that opt in to OpenRouter's router metadata (its guide names both).
ROUTER_METADATA_HEADERS = ("x-openrouter-experimental-metadata", "x-openrouter-metadata")


def _seconds(t: float) -> float:
    return round(t, 6)


def openai_tier(x: Exchange) -> str:
    """The service tier OpenAI answers: the one asked for (``auto`` is ``default``, ``fast`` is reported as
    ``priority``); the fallback route is served at ``flex`` (slower, as that tier is)."""
    if x.fallback:
        return "flex"
    return {None: "default", "auto": "default", "fast": "priority"}.get(x.tier, x.tier or "default")


def anthropic_tier(x: Exchange) -> str:
    """Anthropic's usage.service_tier: an account with Priority Tier capacity whose overflow (the fallback
    route) is served at ``standard``, as ``service_tier: auto`` does; ``standard_only`` asks for standard."""
    return "standard" if x.fallback or x.tier == "standard_only" else "priority"


class OpenAI(Dialect):
    """OpenAI: ``service_tier`` and ``system_fingerprint`` on chunks, no reasoning text on chat, rate-limit
    headers (PROVIDERS.md §1)."""

    name = "openai"
    reasoning_fields = ()
    errors = "openai"
    done_after_error = False

    def chunk_fields(self, x: Exchange) -> dict[str, Any]:
        return {"service_tier": openai_tier(x), "system_fingerprint": "fp_replay_sim"}

    def headers(self, x: Exchange, limits: RateLimits, exhausted: bool = False) -> dict[str, str]:
        return limits.openai(exhausted)

    def response_tier(self, x: Exchange) -> str:
        return openai_tier(x)


class Anthropic(Dialect):
    """Anthropic: ``request-id`` and ``anthropic-ratelimit-*`` headers, ``usage.service_tier`` (§2)."""

    name = "anthropic"
    done_after_error = False

    def headers(self, x: Exchange, limits: RateLimits, exhausted: bool = False) -> dict[str, str]:
        return {"request-id": f"req_{x.request_id}", **limits.anthropic(exhausted)}

    def messages_usage(self, x: Exchange) -> dict[str, Any]:
        return {"service_tier": anthropic_tier(x)}


def _groq_timings(t: Timings) -> dict[str, float]:
    return {
        "queue_time": _seconds(t.queue_s),
        "prompt_time": _seconds(t.prefill_s),
        "completion_time": _seconds(t.decode_s),
        "total_time": _seconds(t.prefill_s + t.decode_s),
    }


class Groq(Dialect):
    """Groq: ``x_groq.id`` on the first and last chunk; the finish chunk carries ``x_groq.usage`` and
    ``usage`` alike, with ``queue_time``, ``prompt_time``, ``completion_time``, ``total_time`` (prompt +
    completion) in seconds; reasoning in ``delta.reasoning`` (§3)."""

    name = "groq"
    reasoning_fields = ("reasoning",)
    usage_on_finish = True
    timings_in_usage = True
    errors = "openai"
    done_after_error = False

    def first_fields(self, x: Exchange) -> dict[str, Any]:
        return {"x_groq": {"id": f"req_{x.request_id}"}}

    def usage(self, c: Counts, t: Timings) -> dict[str, Any]:
        return openai_usage(c) | _groq_timings(t)

    def reported_timings(self, x: Exchange, c: Counts, t: Timings) -> dict[str, Any] | None:
        return _groq_timings(t)

    def final_fields(self, x: Exchange, c: Counts, t: Timings, usage: dict[str, Any] | None) -> dict[str, Any]:
        groq: dict[str, Any] = {"id": f"req_{x.request_id}"}
        if usage is not None:
            groq["usage"] = usage
        return {"x_groq": groq}

    def headers(self, x: Exchange, limits: RateLimits, exhausted: bool = False) -> dict[str, str]:
        return limits.groq(exhausted)


class Cerebras(Dialect):
    """Cerebras: ``service_tier`` and ``system_fingerprint`` on chunks; the finish chunk carries ``usage``
    and a top-level ``time_info`` (seconds; ``total_time`` = prompt + completion, as Groq's); §4."""

    name = "cerebras"
    reasoning_fields = ("reasoning",)
    usage_on_finish = True
    errors = "openai"
    done_after_error = False

    def chunk_fields(self, x: Exchange) -> dict[str, Any]:
        return {"service_tier": openai_tier(x), "system_fingerprint": "fp_replay_sim"}

    def reported_timings(self, x: Exchange, c: Counts, t: Timings) -> dict[str, Any] | None:
        return _groq_timings(t)

    def final_fields(self, x: Exchange, c: Counts, t: Timings, usage: dict[str, Any] | None) -> dict[str, Any]:
        return {"time_info": _groq_timings(t) | {"created": float(x.created)}}

    def headers(self, x: Exchange, limits: RateLimits, exhausted: bool = False) -> dict[str, str]:
        return limits.cerebras(exhausted)


def _fireworks_metrics(c: Counts, t: Timings) -> dict[str, Any]:
    return {
        "prompt-tokens": c.prompt,
        "cached-prompt-tokens": c.cached,
        "server-time-to-first-token": _seconds(t.to_first_token_s),
        "server-processing-time": _seconds(t.to_first_token_s + t.decode_s),
    }


class Fireworks(Dialect):
    """Fireworks: headers ``fireworks-prompt-tokens``, ``fireworks-cached-prompt-tokens`` and
    ``fireworks-server-time-to-first-token`` (seconds), sent once the first token is ready; ``perf_metrics``
    on the finish chunk when the request sets ``perf_metrics_in_response`` (§5)."""

    name = "fireworks"
    headers_at_first_token = True
    errors = "openai"
    done_after_error = False

    def first_token_headers(self, x: Exchange, c: Counts, t: Timings) -> dict[str, str]:
        return {
            "fireworks-prompt-tokens": str(c.prompt),
            "fireworks-cached-prompt-tokens": str(c.cached),
            "fireworks-server-time-to-first-token": f"{t.to_first_token_s:.6f}",
        }

    def reported_timings(self, x: Exchange, c: Counts, t: Timings) -> dict[str, Any] | None:
        return _fireworks_metrics(c, t)

    def final_fields(self, x: Exchange, c: Counts, t: Timings, usage: dict[str, Any] | None) -> dict[str, Any]:
        return {"perf_metrics": _fireworks_metrics(c, t)} if x.perf_metrics else {}


class Together(Dialect):
    """Together: OpenAI-shaped; reasoning in ``delta.reasoning``; cached tokens where OpenAI puts them
    (PROVIDERS.md §6 could not verify Together's field, so the common path is used)."""

    name = "together"
    reasoning_fields = ("reasoning",)
    errors = "openai"
    done_after_error = False


class Baseten(Dialect):
    """Baseten: OpenAI-shaped (§9: no own fields found)."""

    name = "baseten"
    errors = "openai"
    done_after_error = False


class OpenRouter(Dialect):
    """OpenRouter: ``provider`` on every chunk (the route), usage always, with ``cost`` and
    ``cost_details``; ``: OPENROUTER PROCESSING`` comments; ``X-Generation-Id``; reasoning in
    ``delta.reasoning`` (§7)."""

    name = "openrouter"
    reasoning_fields = ("reasoning",)
    usage_always = True
    comment = b": OPENROUTER PROCESSING\n\n"
    errors = "openrouter"
    done_after_error = False

    def chunk_fields(self, x: Exchange) -> dict[str, Any]:
        return {"provider": x.route}

    def usage(self, c: Counts, t: Timings) -> dict[str, Any]:
        uncached, cached, out = OPENROUTER_PRICES
        prompt_cost = (c.prompt - c.cached) * uncached + c.cached * cached
        cost = round(prompt_cost + c.output * out, 10)
        details = {
            "upstream_inference_cost": None,
            "upstream_inference_prompt_cost": round(prompt_cost, 10),
            "upstream_inference_completions_cost": round(c.output * out, 10),
        }
        return openai_usage(c) | {"cost": cost, "is_byok": False, "cost_details": details}

    def headers(self, x: Exchange, limits: RateLimits, exhausted: bool = False) -> dict[str, str]:
        return {"X-Generation-Id": f"gen-{x.request_id}"}

    def final_fields(self, x: Exchange, c: Counts, t: Timings, usage: dict[str, Any] | None) -> dict[str, Any]:
        """``openrouter_metadata`` when the request opted in: a fallback route's call is its second attempt, after
        the primary refused it (the router metadata guide's ``attempt``, ``attempts[{model, provider, status}]``)."""
        if not x.router_metadata:
            return {}
        attempts = [{"model": x.model, "provider": x.route, "status": 200}]
        if x.fallback:
            attempts.insert(0, {"model": x.model, "provider": PRIMARY, "status": 429})
        meta = {"attempt": len(attempts), "attempts": attempts, "requested": x.model, "strategy": "direct",
                "is_byok": False, "region": None, "summary": f"selected={x.route}"}  # fmt: skip
        return {"openrouter_metadata": meta}


class Vercel(Dialect):
    """Vercel AI Gateway: OpenAI-shaped. The routing metadata is the sim's choice (PROVIDERS.md §8 could not
    verify how it surfaces on the OpenAI-compatible stream): a top-level ``provider_metadata`` on the finish
    chunk, ``{"gateway": {"routing": {"finalProvider": ROUTE, "fallbacksAvailable": [...], "modelAttempts":
    [{canonicalSlug, success, providerAttemptCount}]}}}`` (the AI SDK's ``GatewayRoutingMetadata``); a fallback
    route's call took two provider attempts."""

    name = "vercel"
    errors = "openai"
    done_after_error = False

    def __init__(self, routes: tuple[str, ...] = ()) -> None:
        self.routes = routes

    def final_fields(self, x: Exchange, c: Counts, t: Timings, usage: dict[str, Any] | None) -> dict[str, Any]:
        others = [r for r in self.routes if r != x.route]
        attempt = {"canonicalSlug": x.model, "success": True, "providerAttemptCount": 2 if x.fallback else 1}
        routing = {"finalProvider": x.route, "fallbacksAvailable": others, "modelAttempts": [attempt]}
        return {"provider_metadata": {"gateway": {"routing": routing}}}


class DeepSeek(Dialect):
    """DeepSeek: ``usage.prompt_cache_hit_tokens`` and ``prompt_cache_miss_tokens`` beside the OpenAI
    fields, ``system_fingerprint``, reasoning in ``delta.reasoning_content`` (DeepSeek's context caching
    guide, api-docs.deepseek.com/guides/kv_cache; a recorded response in opensolon/solon)."""

    name = "deepseek"
    errors = "openai"
    done_after_error = False

    def chunk_fields(self, x: Exchange) -> dict[str, Any]:
        return {"system_fingerprint": "fp_replay_sim"}

    def usage(self, c: Counts, t: Timings) -> dict[str, Any]:
        return openai_usage(c) | {"prompt_cache_hit_tokens": c.cached, "prompt_cache_miss_tokens": c.prompt - c.cached}


class VLLM(Dialect):
    """vLLM: reasoning in ``delta.reasoning`` and its copy ``reasoning_content``; ``prompt_tokens_details``
    only when cached tokens are > 0; no ``completion_tokens_details`` (§10)."""

    name = "vllm"
    reasoning_fields = ("reasoning", "reasoning_content")
    errors = "vllm"

    def spec_meta(self, c: Counts) -> dict[str, int] | None:
        return None  # vLLM reports acceptance only in its spec_decode counters (/metrics), not per request

    def usage(self, c: Counts, t: Timings) -> dict[str, Any]:
        u = openai_usage(c)
        del u["completion_tokens_details"]
        if not c.cached:
            del u["prompt_tokens_details"]
        return u


class SGLang(Dialect):
    """SGLang: ``prompt_tokens_details`` only when cached tokens are > 0, reasoning tokens only when > 0,
    reasoning in ``delta.reasoning_content`` (§11)."""

    name = "sglang"
    errors = "vllm"

    def usage(self, c: Counts, t: Timings) -> dict[str, Any]:
        u = openai_usage(c)
        if not c.cached:
            del u["prompt_tokens_details"]
        if not c.reasoning:
            del u["completion_tokens_details"]
        return u


def _llamacpp_timings(c: Counts, t: Timings) -> dict[str, Any]:
    prompt_n = c.prompt - c.cached
    prompt_ms, predicted_ms = t.prefill_s * 1000, t.decode_s * 1000
    return {
        "cache_n": c.cached,
        "prompt_n": prompt_n,
        "prompt_ms": round(prompt_ms, 3),
        "prompt_per_token_ms": round(prompt_ms / prompt_n, 6) if prompt_n else 0.0,
        "prompt_per_second": round(prompt_n / t.prefill_s, 3) if t.prefill_s else 0.0,
        "predicted_n": c.output,
        "predicted_ms": round(predicted_ms, 3),
        "predicted_per_token_ms": round(predicted_ms / c.output, 6) if c.output else 0.0,
        "predicted_per_second": round(c.output / t.decode_s, 3) if t.decode_s else 0.0,
        **(
            {"draft_n": c.speculation["drafted"], "draft_n_accepted": c.speculation["accepted"]}
            if c.speculation
            else {}
        ),
    }


class LlamaCpp(Dialect):
    """llama.cpp server: a top-level ``timings`` on the finish chunk (``prompt_ms`` = prefill,
    ``predicted_ms`` = first to last token), cached tokens also in ``usage``; no reasoning count (§12)."""

    name = "llamacpp"
    errors = "llamacpp"

    def usage(self, c: Counts, t: Timings) -> dict[str, Any]:
        u = openai_usage(c)
        del u["completion_tokens_details"]
        return u

    def spec_meta(self, c: Counts) -> dict[str, int] | None:
        return None  # llama.cpp puts its draft counts in ``timings`` (draft_n, draft_n_accepted)

    def reported_timings(self, x: Exchange, c: Counts, t: Timings) -> dict[str, Any] | None:
        return _llamacpp_timings(c, t)

    def final_fields(self, x: Exchange, c: Counts, t: Timings, usage: dict[str, Any] | None) -> dict[str, Any]:
        return {"timings": _llamacpp_timings(c, t)}


DIALECTS: dict[str, type[Dialect]] = {
    d.name: d
    for d in (
        Dialect,
        OpenAI,
        Anthropic,
        Groq,
        Cerebras,
        Fireworks,
        Together,
        Baseten,
        OpenRouter,
        Vercel,
        DeepSeek,
        VLLM,
        SGLang,
        LlamaCpp,
    )
}


def get_dialect(name: str | None, routes: tuple[str, ...] = ()) -> Dialect:
    """The dialect called ``name`` (None: the default); ValueError naming the known ones otherwise."""
    cls = DIALECTS.get(name or "default")
    if cls is None:
        raise ValueError(f"unknown dialect {name!r}; one of {', '.join(DIALECTS)}")
    return Vercel(routes) if cls is Vercel else cls()
