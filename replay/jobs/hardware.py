"""What a host is made of, for the figures per GPU, per MW and per dollar: GPU count, accelerator power, price.

``hardware_for`` is the one place these come from. Today: the ``--gpus``, ``--power-kw`` and ``--price-per-hour``
options, and for the embedded simulated host its profile's GPU count. Hosts files and provider presets (a named
host with its GPUs, power and rate card) will feed the same ``Hardware`` value through this function.

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
    host: str | None,
    sim_profile: str | None,
    gpus: int | None = None,
    power_kw: float | None = None,
    price_per_hour: float | None = None,
    profile_file: str | None = None,
) -> Hardware:
    """The hardware of one host: what the options say, else what the host itself tells (a sim profile's GPUs,
    the shipped one's or a profile file's)."""
    source = "options"
    if gpus is None and host is None and sim_profile:
        profile = sim_profile_of(sim_profile, profile_file)
        if profile is not None:
            gpus, source = profile.gpus, f"sim profile {profile_file or sim_profile}"
    return Hardware(gpus, power_kw, price_per_hour, source)


def sim_profile_of(name: str, profile_file: str | None = None) -> Any:
    """The simulated host's profile (``SimProfile``): a shipped one, or a file's over its base; None if unknown."""
    if profile_file:
        from replay.sim.profile_file import resolve_profile

        try:
            return resolve_profile(name, profile_file)
        except ValueError:
            return None
    from replay.sim.profiles import PROFILES  # stdlib only: a table of numbers

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


def costs(summary: dict[str, Any], concurrency: int, hw: Hardware) -> dict[str, float | None]:
    """Cost per task and per million tokens at the host's hourly price (None without one).

    A closed loop of N agents whose tasks take W seconds on average finishes N / W tasks a second, so a task
    costs price/s × W / N; a million tokens cost price/s × 1e6 / (tokens/s over the steady window).
    """
    price_s = hw.price_per_hour / 3600 if hw.price_per_hour else None
    tasks = summary.get("tasks") or {}
    t = summary.get("throughput") or {}
    wall = tasks.get("wall_s")
    return {
        "price_per_hour": hw.price_per_hour,
        "per_task": price_s * wall / concurrency if price_s and wall and concurrency else None,
        "per_million_tokens": _per(price_s * 1e6 if price_s else None, t.get("total_tps")),
        "per_million_output_tokens": _per(price_s * 1e6 if price_s else None, t.get("output_tps")),
    }
