"""Option parsing and help text shared by the commands."""

from __future__ import annotations

import re

import click

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


def parse_duration(value: str | None) -> float | None:
    """'90', '90s', '5m', '1h' → seconds."""
    if value is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", value)
    if not m:
        raise click.BadParameter(f"{value!r}: expected seconds, or a number with s, m or h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def parse_bytes(value: str) -> int:
    """'1000000', '64MiB', '1GB', '512kb' → bytes (ValueError otherwise)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS or float(m.group(1)) * _UNITS[unit] < 1:
        raise ValueError(f"{value!r}: expected a size in bytes, e.g. 1000000, 512KiB, 64MiB, 1GB")
    return int(float(m.group(1)) * _UNITS[unit])


def profile_names() -> str:
    """The simulated host's profile names, comma-separated, for help texts (one list: ``PROFILES``)."""
    from replay.sim.core.profiles import PROFILES  # stdlib only: cheap at import time of the CLI

    return ", ".join(PROFILES)
