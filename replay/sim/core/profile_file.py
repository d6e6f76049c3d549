"""Sim profiles from JSON or TOML files: physical inputs over a shipped profile, or measured step times.

A file is one table (TOML) or object (JSON). ``base`` names the shipped profile it starts from (default:
the ``--profile`` given, itself ``default`` by default); every other key is a ``SimProfile`` field that
replaces the base's (``mfu = 0.6``, ``gpus = 4``, ``max_num_seqs = 64`` ...), except ``steps``: a table
of measured step times (``replay.sim.core.step_table``) that then times every step instead of the roofline,
while the physical fields still size the KV cache. ``name`` defaults to the file's stem.

    base = "h100-8b"
    name = "my-h100"
    max_num_seqs = 64

    [steps.prefill]            # ms of a step prefilling `tokens` new tokens over `context` earlier ones
    tokens = [512, 2048, 8192]
    context = [0, 32768]
    ms = [[14, 20], [50, 75], [200, 300]]

    [steps.decode]             # ms of a step decoding one token for each of `batch` sequences
    batch = [1, 32, 128]
    context = [2048, 32768]
    ms = [[6.2, 7.9], [9.6, 50.4], [18.1, 183.3]]

A ``probe`` table (what ``replay probe`` writes beside the fields it fitted: host, date, points, errors) is
provenance and does not change the profile.

Every error is one line naming the file, the field and what was expected.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import tomllib
from pathlib import Path
from typing import Any

import orjson

from replay.errors import ReplayError
from replay.sim.core.profiles import PROFILES, SimProfile, check_profile, get_profile
from replay.sim.core.step_table import StepTable, TableError

# SimProfile fields a file may set, by the kind of value each takes
_TYPES = {f.name: str(f.type) for f in dataclasses.fields(SimProfile) if f.name != "step_table"}
_KEYS = (*_TYPES, "base", "steps", "probe")


class ProfileFileError(ReplayError, ValueError):
    """A profile file that cannot be read or used."""


def load_profile_file(path: str | Path, base: str = "default") -> SimProfile:
    """The profile a file describes, starting from its ``base`` (else ``base`` here); checked."""
    path = Path(path)
    data = _read(path)
    where = str(path)
    if not isinstance(data.pop("probe", {}), dict):  # what `replay probe` fitted it from: provenance only
        raise ProfileFileError(f"{where}: probe: expected a table (the provenance `replay probe` writes)")
    base_name = data.pop("base", base)
    if not isinstance(base_name, str) or base_name not in PROFILES:
        raise ProfileFileError(f"{where}: base: expected one of {', '.join(PROFILES)}; got {base_name!r}")
    changes: dict[str, Any] = {"name": path.stem}
    if "steps" in data:
        try:
            changes["step_table"] = StepTable.from_dict(data.pop("steps"))
        except TableError as exc:
            raise ProfileFileError(f"{where}: {exc}") from None
    for key, value in data.items():
        changes[key] = _value(where, key, value)
    profile = dataclasses.replace(get_profile(base_name), **changes)
    if profile.step_table is not None and profile.tokens_per_write:
        raise ProfileFileError(f"{where}: tokens_per_write: expected 0 with a step table (it turns pacing off)")
    try:
        check_profile(profile)
    except ValueError as exc:
        raise ProfileFileError(f"{where}: {exc}") from None
    return profile


def resolve_profile(profile: str | SimProfile = "default", profile_file: str | Path | None = None) -> SimProfile:
    """What the sim's entry points run: the file's profile if one is given (its base defaulting to
    ``profile``), else the shipped profile ``profile`` names (or ``profile`` itself)."""
    if profile_file is not None:
        return load_profile_file(profile_file, profile if isinstance(profile, str) else "default")
    return get_profile(profile) if isinstance(profile, str) else profile


def _read(path: Path) -> dict[str, Any]:
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise ProfileFileError(f"{path}: expected a .toml or .json profile file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ProfileFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode()) if suffix == ".toml" else orjson.loads(raw)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, orjson.JSONDecodeError) as exc:
        raise ProfileFileError(f"{path}: not valid {suffix[1:].upper()}: {exc}") from None
    if not isinstance(data, dict):
        raise ProfileFileError(f"{path}: expected a table of profile fields; got {type(data).__name__}")
    for key in data:
        if key not in _KEYS:
            close = difflib.get_close_matches(key, _KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ProfileFileError(
                f"{path}: {key}: unknown field{hint}; expected a SimProfile field, base, steps or probe"
            )
    return data


def _value(where: str, key: str, value: Any) -> Any:
    kind = _TYPES[key]
    if kind == "str":
        if isinstance(value, str) and value:
            return value
        expected = "a non-empty string"
    elif kind == "bool":
        if isinstance(value, bool):
            return value
        expected = "true or false"
    elif kind in ("int", "int | None"):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        expected = "a whole number >= 0"
    else:  # float
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
            return float(value)
        expected = "a number >= 0"
    raise ProfileFileError(f"{where}: {key}: expected {expected}; got {value!r}")
