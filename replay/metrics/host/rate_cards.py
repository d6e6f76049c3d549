"""Published rate cards, shipped as examples: USD per million tokens, with the date they were read.

A hosts file names one with ``price = "NAME"`` (or ``--rate-card NAME``), or writes its own table. ``None``
means the provider publishes no separate rate (cached input is then billed as input). Batch discounts are out
of scope. Long-context rates (OpenAI bills more above 272,000 input tokens) go under ``long_context``; the seeds
gave the short-context rates only, so the shipped OpenAI cards carry none.

Kimi K3 Fast and GLM 5.3 Fast routers on Fireworks cost 50 % more than the model's Standard rates: write that
model's Standard card with ``markup = 1.5`` (the Standard rates themselves were not given).
"""

from __future__ import annotations

from typing import Any

DATE = "2026-11"
SOURCE = "the providers' published prices as given in issue 11 (November 2026)"


def _card(input_: float, cached: float | None, output: float, note: str = "") -> dict[str, Any]:
    card: dict[str, Any] = {"input": input_, "cached_input": cached, "output": output, "date": DATE}
    if note:
        card["note"] = note
    return card


RATE_CARDS: dict[str, dict[str, Any]] = {
    "fireworks/deepseek-v4.1-flash-1017/standard": _card(0.30, 0.006, 1.20),
    "fireworks/deepseek-v4.1-flash-1017/ultra-fast": _card(2.40, 0.048, 9.60),
    "baseten/deepseek-v4.1-flash-1017/fast": _card(0.60, 0.014, 2.40),
    "cerebras/gpt-oss-120b": _card(0.35, None, 0.75, "no separate cached-input rate"),
    "groq/gpt-oss-120b": _card(0.15, 0.075, 0.60),
    "groq/gpt-oss-20b": _card(0.075, 0.037, 0.30),
    "openai/gpt-6.1-sol/standard": _card(2.00, 0.10, 10.00, "short context; long-context rates not given"),
    "openai/gpt-6.1-sol/ultrafast": _card(12.00, 0.60, 60.00, "short context; long-context rates not given"),
    "verda/deepseek-v4.1-flash": _card(0.15, 0.006, 0.60),
}
