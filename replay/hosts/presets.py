"""Provider presets: where each provider is, how it is called, and which request options matter for its speed.

Every value follows ``../shared/PROVIDERS.md`` (section named per preset); docs/providers.md says per provider
what replay sends, reads and reports, and what could not be checked without a live endpoint. A preset's
``dialect`` is the name the simulated host's dialect has (``replay sim --dialect NAME``), so every preset can be
tested against a host speaking it. Local engines have a default URL (the engine's default port).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OPENAI_STREAM = {"stream_options": {"include_usage": True, "include_obfuscation": False}}  # §1: no padding field
# §7: the opt-in to ``openrouter_metadata`` on the final chunk (its attempts say when a call fell back); the
# experimental header of PROVIDERS.md and the name OpenRouter's newer routing docs give it.
OPENROUTER_METADATA = {"X-OpenRouter-Experimental-Metadata": "enabled", "X-OpenRouter-Metadata": "enabled"}


@dataclass(frozen=True, slots=True)
class Preset:
    """One provider as replay calls it."""

    name: str
    base_url: str
    api: str = "chat"
    key_env: str | None = None  # None: no key needed (a local engine)
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)  # sent with every call
    chat_body: dict[str, Any] = field(default_factory=dict)  # sent with chat and completions calls only
    tiers: tuple[str, ...] = ()  # service_tier values the provider takes (empty: it takes none)
    routing: str | None = None  # "openrouter" | "vercel": it routes between providers
    speed: bool = False  # it takes ``speed: "fast"``
    source: str = ""

    @property
    def local(self) -> bool:
        return self.key_env is None

    def body_for(self, api: str) -> dict[str, Any]:
        """The fields this preset sends with every call of flavour ``api``."""
        return {**self.body, **(self.chat_body if api in ("chat", "completions") else {})}


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("openai", "https://api.openai.com/v1", key_env="OPENAI_API_KEY", chat_body=OPENAI_STREAM,
               tiers=("auto", "default", "flex", "scale", "priority", "fast", "ultrafast"), source="§1"),
        Preset("anthropic", "https://api.anthropic.com/v1", api="anthropic", key_env="ANTHROPIC_API_KEY",
               tiers=("auto", "standard_only"), speed=True, source="§2"),
        Preset("groq", "https://api.groq.com/openai/v1", key_env="GROQ_API_KEY",
               tiers=("auto", "on_demand", "flex", "performance"), source="§3"),
        Preset("cerebras", "https://api.cerebras.ai/v1", key_env="CEREBRAS_API_KEY",
               tiers=("auto", "default", "flex", "priority"), source="§4"),
        Preset("fireworks", "https://api.fireworks.ai/inference/v1", key_env="FIREWORKS_API_KEY",
               body={"perf_metrics_in_response": True}, source="§5"),
        Preset("together", "https://api.together.xyz/v1", key_env="TOGETHER_API_KEY", source="§6"),
        Preset("openrouter", "https://openrouter.ai/api/v1", key_env="OPENROUTER_API_KEY",
               tiers=("auto", "default", "flex", "priority"), routing="openrouter", source="§7",
               headers=OPENROUTER_METADATA),
        Preset("vercel", "https://ai-gateway.vercel.sh/v1", key_env="AI_GATEWAY_API_KEY",
               tiers=("default", "priority", "flex"), routing="vercel", speed=True, source="§8"),
        Preset("baseten", "https://inference.baseten.co/v1", key_env="BASETEN_API_KEY", source="§9"),
        Preset("deepseek", "https://api.deepseek.com/v1", key_env="DEEPSEEK_API_KEY",
               source="DeepSeek's API docs (not in PROVIDERS.md)"),
        Preset("vllm", "http://127.0.0.1:8000/v1", source="§10"),
        Preset("sglang", "http://127.0.0.1:30000/v1", source="§11"),
        Preset("llamacpp", "http://127.0.0.1:8080/v1", source="§12"),
    )
}  # fmt: skip

ROUTE_SORTS = ("throughput", "latency", "price")
_VERCEL_SORT = {"throughput": "tps", "latency": "ttft", "price": "cost"}  # §8: providerOptions.gateway.sort


@dataclass(frozen=True, slots=True)
class SpeedOptions:
    """The request options that choose a faster (or cheaper) way to be served."""

    service_tier: str | None = None
    speed: str | None = None  # "fast": Anthropic's beta fast mode; Vercel (unverified)
    route_sort: str | None = None  # throughput | latency | price
    route_order: tuple[str, ...] = ()
    route_only: tuple[str, ...] = ()
    fallbacks: bool | None = None  # False: never fall back to another provider (OpenRouter)

    def any(self) -> bool:
        return any((self.service_tier, self.speed, self.route_sort, self.route_order, self.route_only,
                    self.fallbacks is not None))  # fmt: skip


def speed_fields(preset: Preset | None, opts: SpeedOptions) -> tuple[dict[str, Any], dict[str, str]]:
    """(body fields, headers) for ``opts`` in ``preset``'s terms; ValueError naming the option it cannot take."""
    body: dict[str, Any] = {}
    headers: dict[str, str] = {}
    name = preset.name if preset else "this host"
    if opts.service_tier:
        if preset is not None and preset.tiers and opts.service_tier not in preset.tiers:
            raise ValueError(f"--service-tier: {name} takes {', '.join(preset.tiers)}, not {opts.service_tier!r}")
        body["service_tier"] = opts.service_tier
    if opts.speed:
        if preset is not None and not preset.speed:
            raise ValueError(f"--speed: {name} takes no speed option (anthropic and vercel do); try --service-tier")
        body["speed"] = opts.speed
        if preset is not None and preset.name == "anthropic":
            headers["anthropic-beta"] = "fast-mode-2026-02-01"  # §2: the beta flag of fast mode
    routing = preset.routing if preset else None
    given = (("--route-sort", opts.route_sort), ("--route-order", opts.route_order),
             ("--route-only", opts.route_only), ("--no-fallbacks", opts.fallbacks is not None))  # fmt: skip
    asked = [option for option, value in given if value]
    if asked and routing is None:
        raise ValueError(f"{asked[0]}: {name} does not route between providers (openrouter and vercel do)")
    if routing == "openrouter":
        provider: dict[str, Any] = {}
        if opts.route_sort:
            provider["sort"] = opts.route_sort
        if opts.route_order:
            provider["order"] = list(opts.route_order)
        if opts.route_only:
            provider["only"] = list(opts.route_only)
        if opts.fallbacks is not None:
            provider["allow_fallbacks"] = opts.fallbacks
        if provider:
            body["provider"] = provider
    elif routing == "vercel":
        if opts.fallbacks is not None:
            raise ValueError("--no-fallbacks: the Vercel gateway has no such option (name --route-only instead)")
        gateway: dict[str, Any] = {}
        if opts.route_sort:
            gateway["sort"] = _VERCEL_SORT[opts.route_sort]
        if opts.route_order:
            gateway["order"] = list(opts.route_order)
        if opts.route_only:
            gateway["only"] = list(opts.route_only)
        if gateway:
            body["providerOptions"] = {"gateway": gateway}
    return body, headers
