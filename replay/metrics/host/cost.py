"""Cost from a rate card and the host's own token counts: per request, per task, per million tokens, per run.

A card is USD per million tokens: ``input`` (uncached input), ``cached_input`` (cache reads), ``cache_write``
(input written to the cache) and ``output`` (reasoning included, as every provider bills it). A missing or null
``cached_input`` or ``cache_write`` bills those tokens as input. ``long_context = {above = N, ...}`` replaces
rates for a request whose prompt exceeds N tokens (the whole request, as OpenAI bills it); ``tiers = {NAME =
{...}}`` replaces them for a request the host says it served at that service tier (the answered tier, not the
asked one); ``markup`` multiplies the result, and so does ``1 + regional_premium`` when the call was processed in a
region (``regional = true``: set by the card, or when the run's URL is one of its ``regional_hosts``, as OpenAI's
data-residency domains are; ``for_endpoint``). A call whose counts the host did not report is not priced (counted
in ``unpriced``). A host-reported cost (OpenRouter ``usage.cost``) is summed beside the computed one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from replay.errors import ReplayError
from replay.metrics.host.rate_cards import RATE_CARDS
from replay.records.run_file import RequestRecord


class CostTally(Protocol):
    """What ``run_cost`` reads of a run's tally (``host_tally.HostTally``, which prices calls with this module)."""

    reported: list[int]  # host-reported pico-USD, requests that reported one
    cost: list[int]  # pico-USD, tokens priced, requests priced, requests not priced
    task_usd: dict[int, int]


PICO = 10**12  # a tally sums cost in whole pico-dollars (exact in any order)
RATES = ("input", "cached_input", "cache_write", "output")
CARD_FIELDS = {*RATES, "long_context", "tiers", "markup", "regional_premium", "regional_hosts", "regional", "date",
               "note", "source", "currency"}  # fmt: skip


class CardError(ReplayError, ValueError):
    """A rate card that cannot be used; the message names the field."""


def parse_card(value: Any, where: str, partial: bool = False) -> dict[str, Any]:
    """A checked card from a shipped card's name or a table; CardError naming ``where`` and the field. A
    ``partial`` card (a tier's or the long-context rates) may override only some rates."""
    if isinstance(value, str):
        if value not in RATE_CARDS:
            raise CardError(f"{where}: unknown rate card {value!r}; shipped cards: {', '.join(RATE_CARDS)}")
        return {"name": value, **RATE_CARDS[value]}
    if not isinstance(value, dict):
        raise CardError(f"{where}: expected a table of USD per million tokens or a shipped card's name")
    unknown = sorted(set(value) - CARD_FIELDS - {"name", "above"})
    if unknown:
        raise CardError(f"{where}.{unknown[0]}: unknown field (known: {', '.join(sorted(CARD_FIELDS))})")
    for name in ("input", "output"):
        if name not in value and not partial:
            raise CardError(f"{where}.{name}: missing (USD per million tokens)")
    for name in (*RATES, "markup", "regional_premium"):
        v = value.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0):
            raise CardError(f"{where}.{name}: expected a non-negative number, not {v!r}")
    hosts = value.get("regional_hosts")
    if hosts is not None and (not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts)):
        raise CardError(f"{where}.regional_hosts: expected a list of host names (us.api.openai.com)")
    if not isinstance(value.get("regional", False), bool):
        raise CardError(f"{where}.regional: expected true or false")
    long = value.get("long_context")
    if long is not None:
        if not isinstance(long, dict) or not isinstance(long.get("above"), int) or long["above"] <= 0:
            raise CardError(f"{where}.long_context.above: expected a positive whole number of input tokens")
        parse_card(long, f"{where}.long_context", partial=True)
    for tier, sub in (value.get("tiers") or {}).items():
        if not isinstance(sub, dict):
            raise CardError(f"{where}.tiers.{tier}: expected a table of rates")
        parse_card(sub, f"{where}.tiers.{tier}", partial=True)
    return dict(value)


def for_endpoint(card: dict[str, Any] | None, base_url: str | None) -> dict[str, Any] | None:
    """``card`` as a run against ``base_url`` is priced: ``regional = true`` when the URL's host is one of the card's
    ``regional_hosts`` (a card that says ``regional`` itself keeps it)."""
    if card is None or card.get("regional") or not card.get("regional_hosts") or not base_url:
        return card
    host = (urlsplit(base_url).hostname or "").lower()
    return card | {"regional": True} if host in {h.lower() for h in card["regional_hosts"]} else card


def rates_for(card: dict[str, Any], rec: RequestRecord) -> dict[str, float]:
    """The rates that apply to ``rec``: the card's, then its answered tier's, then its long-context ones."""
    rates = {k: card.get(k) for k in RATES}
    tier = (rec.served or {}).get("service_tier")
    sub = (card.get("tiers") or {}).get(tier) if tier else None
    if sub:
        rates.update({k: v for k, v in sub.items() if k in RATES})
    long = card.get("long_context")
    if long and (rec.prompt_tokens or 0) > long["above"]:
        rates.update({k: v for k, v in long.items() if k in RATES})
    inp = float(rates["input"] or 0.0)
    return {
        "input": inp,
        "cached_input": inp if rates["cached_input"] is None else float(rates["cached_input"]),
        "cache_write": inp if rates["cache_write"] is None else float(rates["cache_write"]),
        "output": float(rates["output"] or 0.0),
    }


def request_cost(card: dict[str, Any], rec: RequestRecord) -> float | None:
    """USD of one call from its reported counts, or None when the host reported none."""
    if rec.prompt_tokens is None or rec.output_tokens is None:
        return None
    r = rates_for(card, rec)
    cached, written = rec.cached_tokens or 0, rec.cache_write_tokens or 0
    fresh = max(0, rec.prompt_tokens - cached - written)
    usd = fresh * r["input"] + cached * r["cached_input"] + written * r["cache_write"]
    usd += rec.output_tokens * r["output"]
    premium = 1.0 + float(card.get("regional_premium") or 0.0) if card.get("regional") else 1.0
    return usd / 1e6 * float(card.get("markup") or 1.0) * premium


def run_cost(t: CostTally, complete: Mapping[int, bool], card: dict[str, Any] | None) -> dict[str, Any]:
    """The run's cost figures from its tally, priced as it was gathered with ``card`` (the header's): every figure
    null without a card; a host-reported cost is summed regardless. ``complete``: the tasks that ended complete."""
    reported_usd, reported_n = t.reported
    out: dict[str, Any] = {
        "card": card.get("name") if card else None,
        "host_reported_usd": reported_usd / PICO if reported_n else None,
        "host_reported_requests": reported_n,
    }
    if card is None:
        return out | {"total_usd": None, "per_task_usd": None, "per_mtok_usd": None, "per_request_usd": None}
    pico, tokens, priced, unpriced = t.cost
    total = pico / PICO
    done = [t.task_usd.get(task, 0) for task in complete]
    per_task = done or list(t.task_usd.values())  # whole pico-dollars: the same sum in any order of tasks
    return out | {
        "total_usd": total,
        "per_request_usd": total / priced if priced else None,
        "per_task_usd": sum(per_task) / (len(per_task) * PICO) if per_task else None,
        "per_task_of": "complete tasks" if done else "all tasks",
        "per_mtok_usd": total / tokens * 1e6 if tokens else None,
        "priced_requests": priced,
        "unpriced": unpriced,
    }


def hourly_cost(price_per_hour: float | None, concurrency: int | None, task_wall_s: float | None,
                total_tps: float | None, output_tps: float | None, run_s: float | None) -> dict[str, Any]:  # fmt: skip
    """Cost at a host's hourly price (``--price-per-hour``; every figure null without one). A closed loop of N agents
    whose tasks take W seconds finishes N / W tasks a second, so a task costs price/s × W / N; a million tokens cost
    price/s × 1e6 / (tokens/s over the steady window); the run cost price/s × its seconds."""
    per_s = price_per_hour / 3600 if price_per_hour else None

    def per(amount: float | None, rate: float | None) -> float | None:
        return amount / rate if amount is not None and rate else None

    return {
        "price_per_hour": price_per_hour,
        "run_usd": per_s * run_s if per_s and run_s is not None else None,
        "per_task_usd": per_s * task_wall_s / concurrency if per_s and task_wall_s and concurrency else None,
        "per_million_tokens_usd": per(per_s * 1e6 if per_s else None, total_tps),
        "per_million_output_tokens_usd": per(per_s * 1e6 if per_s else None, output_tps),
    }
