"""The figures of an AA-AgentPerf run, as far as Artificial Analysis's method is public.

Total tokens (cached input included) per second and per minute, per-user output speed after the first token at
p25, time to first answer token, all of them over model calls only (tool time is never in a model figure); and the
SLO tiers: a tier is met when at least 75 % of calls meet both its TTFT limit and its per-user speed floor
(replay's reading: TTFT p75 within the limit, speed p25 above the floor). Without ``replay capacity`` the maximum
concurrent agents meeting a tier is per run: this run's concurrency when it meets it, else none.
"""

from __future__ import annotations

from typing import Any


def aa_figures(summary: dict[str, Any], recipe: dict[str, Any], concurrency: int | None) -> dict[str, Any]:
    tp = summary["throughput"]
    speed = summary["user_decode_tps"]
    ttft = summary["ttft_s"]
    gpus, power = recipe.get("gpus"), recipe.get("power_kw")
    tiers = []
    for tier in recipe.get("slo_tiers") or ():
        ttft_p75, speed_p25 = ttft.get("p75"), speed.get("p25")
        met = ttft_p75 is not None and speed_p25 is not None and ttft_p75 <= tier["ttft_s"] and (
            speed_p25 >= tier["speed_tps"])  # fmt: skip
        agents = concurrency if met else None
        tiers.append({
            **tier,
            "met": met,
            "max_concurrent_agents": agents,
            "agents_per_accelerator": agents / gpus if agents and gpus else None,
            "agents_per_mw": agents / (power / 1000.0) if agents and power else None,
        })  # fmt: skip
    return {
        "total_tokens_per_s": tp["total_tps"],
        "total_tokens_per_min": tp["total_tokens_per_min"],
        "cached_input_tokens_per_s": tp["cached_input_tps"],
        "output_speed_after_first_token_p25": speed.get("p25"),
        "time_to_first_answer_token_s": summary["ttfat_s"],
        "tool_time_in_model_figures": False,
        "slo_tiers": tiers,
        "capacity_source": "per run (replay capacity would search the concurrency)",
    }
