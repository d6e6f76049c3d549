"""What a host is made of, for the figures per GPU, per MW and per dollar: GPU count, accelerator power, price.

``hardware_for`` is the one place these come from: the ``--gpus``, ``--power-kw`` and ``--price-per-hour`` options,
else the host's own facts (its hosts-file table's ``gpus`` and ``power_kw``, replay.hosts.resolve.host_facts), else
for the embedded simulated host its profile's GPU count. A rate card (per-token prices) is not an hourly price:
the run prices itself with it (the summary's ``cost``), and ``costs`` shows that beside the hourly arithmetic.

Power is accelerator power (the GPUs' board power), not the whole datacentre: no CPUs, network, cooling or PUE.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

POWER_NOTE = "accelerator power (GPU board power), not the whole datacentre: no host CPUs, network, cooling or PUE"


@dataclass(frozen=True, slots=True)
class Hardware:
    """A host's size and price; any of them None when nobody said."""

    gpus: int | None = None
    power_kw: float | None = None  # accelerator power of the whole host, kW
    price_per_hour: float | None = None  # USD per hour for the whole host
    source: str = "options"  # where the figures came from: options, sim profile, hosts file, rate card

    def public(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_public(cls, d: dict[str, Any] | None) -> Hardware:
        d = d or {}
        return cls(d.get("gpus"), d.get("power_kw"), d.get("price_per_hour"), d.get("source", "options"))


def hardware_for(
    spec: Any, gpus: int | None = None, power_kw: float | None = None, price_per_hour: float | None = None
) -> Hardware:
    """The hardware of a spec's host: what the options say, else the host's own facts (its hosts-file table's
    ``gpus`` and ``power_kw``; the simulated host's profile, shipped or from a file). HostError (a ValueError)
    when the host cannot be resolved."""
    from replay.hosts.resolve import host_facts

    facts = host_facts(spec)
    if gpus is None and facts.get("gpus") is None and spec.host is None:
        profile = sim_profile_of(spec.sim_profile, spec.sim_profile_file)
        facts["gpus"] = profile.gpus if profile is not None else None
    told = [name for name, v in (("gpus", gpus), ("power_kw", power_kw)) if v is None and facts.get(name) is not None]
    source = "options"
    if told:
        where = "sim profile " + (spec.sim_profile_file or spec.sim_profile) if spec.host is None else "hosts file"
        source = f"{where} ({', '.join(told)})" + (", options" if gpus or power_kw or price_per_hour else "")
    return Hardware(
        gpus if gpus is not None else facts.get("gpus"),
        power_kw if power_kw is not None else facts.get("power_kw"),
        price_per_hour,
        source,
    )


def hardware_of_run(header: dict[str, Any]) -> Hardware:
    """The hardware a run file's header records: its host's GPUs and power (hosts file), or its sim profile's."""
    host = header.get("host") or {}
    sim = header.get("simulated") or {}
    gpus, power = host.get("gpus"), host.get("power_kw")
    source = "run header"
    if gpus is None and header.get("simulated_host"):
        profile = sim_profile_of(header["simulated_host"], sim.get("profile_file"))
        gpus, source = (profile.gpus if profile is not None else None), f"sim profile {header['simulated_host']}"
    return Hardware(gpus, power, None, source)


def sim_profile_of(name: str, profile_file: str | None = None) -> Any:
    """The simulated host's profile (``SimProfile``): a shipped one, or a file's over its base; None if unknown."""
    if profile_file:
        from replay.sim.core.profile_file import resolve_profile

        try:
            return resolve_profile(name, profile_file)
        except ValueError:
            return None
    from replay.sim.core.profiles import PROFILES  # stdlib only: a table of numbers

    return PROFILES.get(name)


def _per(value: float | None, denominator: float | None) -> float | None:
    if value is None or not denominator:
        return None
    return value / denominator


def per_unit(amount: float | None, hw: Hardware) -> dict[str, float | None]:
    """``amount`` (agents, tokens/s, ...) per GPU, per kW, per MW and per dollar-hour of the host."""
    return {
        "per_gpu": _per(amount, hw.gpus),
        "per_kw": _per(amount, hw.power_kw),
        "per_mw": _per(amount, hw.power_kw / 1000 if hw.power_kw else None),
        "per_dollar_hour": _per(amount, hw.price_per_hour),
    }


def costs(summary: dict[str, Any], concurrency: int, hw: Hardware) -> dict[str, Any]:
    """Cost per task and per million tokens at the host's hourly price (None without one; the arithmetic is
    ``metrics.host.cost.hourly_cost``'s), beside the run's own cost from its rate card (the summary's ``cost``:
    per-token prices, docs/providers.md)."""
    from replay.metrics.host.cost import hourly_cost

    card = summary.get("cost") or {}
    t = summary.get("throughput") or {}
    hourly = hourly_cost(hw.price_per_hour, concurrency, (summary.get("tasks") or {}).get("wall_s"),
                         t.get("total_tps"), t.get("output_tps"), None)  # fmt: skip
    return {
        "price_per_hour": hw.price_per_hour,
        "per_task": hourly["per_task_usd"],
        "per_million_tokens": hourly["per_million_tokens_usd"],
        "per_million_output_tokens": hourly["per_million_output_tokens_usd"],
        "rate_card": card.get("card"),
        "rate_card_per_task": card.get("per_task_usd"),
        "rate_card_per_million_tokens": card.get("per_mtok_usd"),
    }
