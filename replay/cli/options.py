"""Option parsing and help text shared by the commands."""

from __future__ import annotations

import re

import click


def parse_duration(value: str | None) -> float | None:
    """'90', '90s', '5m', '1h' → seconds."""
    if value is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", value)
    if not m:
        raise click.BadParameter(f"{value!r}: expected seconds, or a number with s, m or h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def profile_names() -> str:
    """The simulated host's profile names, comma-separated, for help texts (one list: ``PROFILES``)."""
    from replay.sim.profiles import PROFILES  # stdlib only: cheap at import time of the CLI

    return ", ".join(PROFILES)
