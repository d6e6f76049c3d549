"""Published rate cards, shipped as examples: USD per million tokens, each with the date it was read and its source.

A hosts file names one with ``price = "NAME"`` (or ``--rate-card NAME``), or writes its own table. ``None``
means the provider publishes no separate rate (cached input, or a cache write, is then billed as input). Batch
discounts are out of scope.

OpenAI's GPT-6.1 Sol cards carry the whole of its model page: cache writes at 1.25 × the uncached input rate;
prompts of more than 272,000 input tokens priced at 2 × the input and cache rates and 1.5 × the output rate for
the full request (``long_context``; exactly 272,000 is still short context); regional processing (its
data-residency domains) 10 % over the rate that applies (``regional_premium``, applied when the run's URL is one of
``regional_hosts``). The Ultrafast card is the seed's 6 × Standard rates; its cache-write and long-context rates
are the page's rules applied to them (the page states them for Standard), so they are derived, not read.

Kimi K3 Fast and GLM 5.3 Fast routers on Fireworks cost 50 % more than the model's Standard rates: write that
model's Standard card with ``markup = 1.5`` (the Standard rates themselves were not given).
"""

from __future__ import annotations

from typing import Any

DATE = "2026-11"
SEEDS = "the providers' published prices, as quoted in November 2026"
OPENAI = (
    "developers.openai.com/api/docs/models/gpt-6.1-sol (short-context rates as quoted in November 2026; cache "
    "writes, the 272K long-context rule and the regional-processing premium from the page) and "
    "developers.openai.com/api/docs/guides/data-residency (the regional domains), stored copies read 2026-12"
)
LONG_CONTEXT_ABOVE = 272_000  # input tokens: a request with more is priced at the long-context rates, all of it
OPENAI_REGIONAL_HOSTS = ["us.api.openai.com", "eu.api.openai.com", "au.api.openai.com", "in.api.openai.com",
                         "jp.api.openai.com"]  # fmt: skip


def _card(input_: float, cached: float | None, output: float, note: str = "", **more: Any) -> dict[str, Any]:
    card: dict[str, Any] = {"input": input_, "cached_input": cached, "output": output, "date": DATE, "source": SEEDS}
    if note:
        card["note"] = note
    return card | more


def _openai(input_: float, cached: float, output: float, note: str) -> dict[str, Any]:
    """An OpenAI card from its short-context rates, by the model page's rules (see the module's docstring)."""
    return _card(
        input_, cached, output, note,
        cache_write=round(input_ * 1.25, 6),
        long_context={"above": LONG_CONTEXT_ABOVE, "input": input_ * 2, "cached_input": round(cached * 2, 6),
                      "cache_write": round(input_ * 1.25 * 2, 6), "output": output * 1.5},
        regional_premium=0.10,
        regional_hosts=list(OPENAI_REGIONAL_HOSTS),
        source=OPENAI,
    )  # fmt: skip


RATE_CARDS: dict[str, dict[str, Any]] = {
    "fireworks/deepseek-v4.1-flash-1017/standard": _card(0.30, 0.006, 1.20),
    "fireworks/deepseek-v4.1-flash-1017/ultra-fast": _card(2.40, 0.048, 9.60),
    "baseten/deepseek-v4.1-flash-1017/fast": _card(0.60, 0.014, 2.40),
    "cerebras/gpt-oss-120b": _card(0.35, None, 0.75, "no separate cached-input rate"),
    "groq/gpt-oss-120b": _card(0.15, 0.075, 0.60),
    "groq/gpt-oss-20b": _card(0.075, 0.037, 0.30),
    "openai/gpt-6.1-sol/standard": _openai(2.00, 0.10, 10.00, "rates of the model page"),
    "openai/gpt-6.1-sol/ultrafast": _openai(
        12.00, 0.60, 60.00, "the seed's rates (6 × Standard); cache-write and long-context rates derived"
    ),
    "verda/deepseek-v4.1-flash": _card(0.15, 0.006, 0.60),
}
