"""The twin's profile file: what ``replay sim --profile-file`` and ``replay run --sim-profile-file`` read, with
a ``[probe]`` table saying what it was fitted from (host, model, date, every point, the fit's errors).

TOML by default (a ``.json`` name writes the same as JSON). The TOML is written here, since the standard
library reads TOML but does not write it: the values are strings, numbers, booleans, lists of those, and
tables of them, which is all a profile and its provenance need.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import orjson

TWIN_FORMAT = "replay.twin/1"


def write_twin(path: Path, fields: dict[str, Any], provenance: dict[str, Any], header: str = "") -> None:
    """Write the profile ``fields`` and the ``probe`` table to ``path`` (.toml or .json)."""
    data = {"base": "default", **fields, "probe": {"format": TWIN_FORMAT, **provenance}}
    if path.suffix.lower() == ".json":
        path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        return
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    path.write_text(comment + to_toml(data))


def to_toml(data: dict[str, Any]) -> str:
    """TOML for a table of scalars, lists and nested tables (a list of tables becomes ``[[name]]``)."""
    out: list[str] = []
    _table(out, [], data)
    return "\n".join(out).lstrip("\n") + "\n"


def _table(out: list[str], path: list[str], data: dict[str, Any]) -> None:
    nested = []
    for key, value in data.items():
        if value is None:
            continue
        if isinstance(value, dict) or (isinstance(value, list) and value and all(isinstance(v, dict) for v in value)):
            nested.append((key, value))
        else:
            out.append(f"{_key(key)} = {_value(value)}")
    for key, value in nested:
        name = ".".join(_key(k) for k in [*path, key])
        if isinstance(value, dict):
            out += ["", f"[{name}]"]
            _table(out, [*path, key], value)
        else:
            for item in value:
                out += ["", f"[[{name}]]"]
                _table(out, [*path, key], item)


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        text = repr(v)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join("nan" if x is None else _value(x) for x in v) + "]"
    if hasattr(v, "item"):  # a numpy scalar
        return _value(v.item())
    raise TypeError(f"cannot write {type(v).__name__} as TOML")
