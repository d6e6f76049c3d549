"""Which host a run talks to: a URL, a preset (``--host groq:MODEL``), or a name from a hosts file.

``resolve(spec)`` turns a RunSpec's ``host`` into a ``ResolvedHost``: URL, API flavour, model, key variable,
headers, body fields, dialect, and the facts reports need (GPUs, power, rate card). It runs inside
``check_spec`` and ``execute``, so every command that runs a RunSpec takes names as ``--host`` does. Anything
wrong (an unknown name, a key variable that is not set, a bad field) fails here, before any request, naming the
file and field (or the option). Keys are never read into anything written: a hosts file names the variable.

Hosts file (TOML, ``--hosts FILE``, default ``replay.toml`` in the working directory when present)::

    [hosts.fw-flash]
    preset = "fireworks"                  # or url = "https://..." (both: the preset's terms at that URL)
    model = "accounts/fireworks/models/deepseek-v4p1-flash"
    key_env = "FIREWORKS_API_KEY"         # the variable's name, never the key
    headers = { "x-session-affinity" = "{session}" }
    body = { prompt_cache_key = "replay-{task}" }
    gpus = 8
    accelerator = "H200"
    power_kw = 10.2
    price = "fireworks/deepseek-v4.1-flash-1017/standard"   # or a [hosts.fw-flash.price] table
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replay.clients.flavours.base import API_FLAVOURS
from replay.clients.host import check_url, header_problem
from replay.errors import ReplayError
from replay.hosts.presets import PRESETS, Preset, SpeedOptions, speed_fields
from replay.metrics.host.cost import CardError, for_endpoint, parse_card
from replay.records.scrub import redact_fields, redact_headers

DEFAULT_HOSTS_FILE = "replay.toml"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"  # --api-key-env's default: a preset's own variable wins over it
HOST_FIELDS = {"url", "preset", "dialect", "model", "api", "key_env", "headers", "body", "gpus", "accelerator",
               "power_kw", "price", "description"}  # fmt: skip


class HostError(ReplayError, ValueError):
    """A host that cannot be used; the message names the option, or the file and field."""


@dataclass(frozen=True, slots=True)
class ResolvedHost:
    """A run's host with everything from its preset and hosts file applied (no key: only its variable)."""

    base_url: str | None  # None: the embedded simulated host
    model: str | None = None
    api: str = "chat"
    key_env: str = DEFAULT_KEY_ENV
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)
    dialect: str | None = None
    preset: str | None = None
    name: str | None = None  # the hosts file's name for it
    hosts_file: str | None = None
    gpus: int | None = None
    accelerator: str | None = None
    power_kw: float | None = None
    price: dict[str, Any] | None = None

    def public(self) -> dict[str, Any]:
        """What the run header records of it (no key; secret-named headers and fields redacted)."""
        return {
            "name": self.name,
            "preset": self.preset,
            "hosts_file": self.hosts_file,
            "dialect": self.dialect,
            "gpus": self.gpus,
            "accelerator": self.accelerator,
            "power_kw": self.power_kw,
            "price": self.price,
            "headers": redact_headers(self.headers),
            "body": redact_fields(self.body),
        }


def hosts_path(spec: Any) -> Path | None:
    """The hosts file a spec uses: as named, else ./replay.toml when it exists."""
    if getattr(spec, "hosts_file", None):
        return Path(spec.hosts_file)
    default = Path(DEFAULT_HOSTS_FILE)
    return default if default.is_file() else None


def load_hosts(path: Path) -> dict[str, dict[str, Any]]:
    """The checked ``[hosts.NAME]`` tables of a hosts file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise HostError(f"--hosts {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise HostError(f"{path}: not valid TOML: {exc}") from None
    extra = sorted(set(data) - {"hosts"})
    if extra:
        raise HostError(f"{path}: unknown table [{extra[0]}] (a hosts file holds [hosts.NAME] tables)")
    hosts = data.get("hosts", {})
    if not isinstance(hosts, dict):
        raise HostError(f"{path}: hosts: expected [hosts.NAME] tables")
    for name, table in hosts.items():
        _check_table(path, name, table)
    return hosts


def _check_table(path: Path, name: str, t: Any) -> None:
    where = f"{path}: hosts.{name}"
    if not isinstance(t, dict):
        raise HostError(f"{where}: expected a table")
    unknown = sorted(set(t) - HOST_FIELDS)
    if unknown:
        raise HostError(f"{where}.{unknown[0]}: unknown field (known: {', '.join(sorted(HOST_FIELDS))})")
    if "url" not in t and "preset" not in t:
        raise HostError(f"{where}: needs url or preset")
    for key in ("url", "preset", "dialect", "model", "api", "key_env", "accelerator", "description"):
        if key in t and (not isinstance(t[key], str) or not t[key]):
            raise HostError(f"{where}.{key}: expected a non-empty string")
    for key in ("preset", "dialect"):
        if key in t and t[key] not in PRESETS:
            raise HostError(f"{where}.{key}: unknown preset {t[key]!r}; one of {', '.join(PRESETS)}")
    if "api" in t and t["api"] not in API_FLAVOURS:
        raise HostError(f"{where}.api: {t['api']!r} is not one of {', '.join(API_FLAVOURS)}")
    if "url" in t:
        try:
            check_url(t["url"])
        except ValueError as exc:
            raise HostError(f"{where}.url: {exc}") from None
    for key in ("headers", "body"):
        if key in t and not isinstance(t[key], dict):
            raise HostError(f"{where}.{key}: expected a table")
    for hname, value in t.get("headers", {}).items():
        if not isinstance(value, str):
            raise HostError(f"{where}.headers.{hname}: expected a string")
        if problem := header_problem(hname, value):  # (the value is not echoed)
            raise HostError(f"{where}.headers.{hname!r}: {problem}")
    if "gpus" in t and (isinstance(t["gpus"], bool) or not isinstance(t["gpus"], int) or t["gpus"] < 1):
        raise HostError(f"{where}.gpus: expected a whole number of GPUs (1 or more)")
    kw = t.get("power_kw")
    if kw is not None and (isinstance(kw, bool) or not isinstance(kw, int | float) or not math.isfinite(kw) or kw <= 0):
        raise HostError(f"{where}.power_kw: expected a positive number of kilowatts")
    if "price" in t:
        try:
            parse_card(t["price"], f"{where}.price")
        except CardError as exc:
            raise HostError(str(exc)) from None


def resolve(spec: Any) -> ResolvedHost:
    """``spec.host`` (None, a URL, a hosts-file name or a preset, each ``NAME[:MODEL]``) with everything applied."""
    speed = SpeedOptions(spec.service_tier, spec.speed, spec.route_sort, tuple(spec.route_order),
                         tuple(spec.route_only), spec.fallbacks)  # fmt: skip
    dialect = spec.dialect
    if dialect is not None and dialect not in PRESETS:
        raise HostError(f"--dialect: unknown dialect {dialect!r}; one of {', '.join(PRESETS)}")
    host = spec.host
    if not host or "://" in host:
        if host:
            try:
                check_url(host)
            except ValueError as exc:
                raise HostError(f"--host: {exc}") from None
        preset = PRESETS.get(dialect or (spec.sim_dialect if not host else None) or "")
        return _build(spec, host or None, preset, {}, speed, explicit=dialect is not None)
    name, _, model = host.partition(":")
    path = hosts_path(spec)
    hosts = load_hosts(path) if path is not None else {}
    if path is not None and name in hosts:  # (no hosts file: no names in it)
        return _from_table(spec, name, model or None, hosts[name], path, speed)
    if name in PRESETS:
        preset = PRESETS[name]
        resolved = _build(spec, preset.base_url, PRESETS[dialect] if dialect else preset, {}, speed, explicit=True,
                          model=model or None)  # fmt: skip
        _require_key(resolved.key_env, preset.local, f"--host {name}: the preset's key variable")
        return _with(resolved, preset=name)
    known = f"presets: {', '.join(PRESETS)}" + (f"; hosts in {path}: {', '.join(hosts) or 'none'}" if path else "")
    raise HostError(f"--host {host!r}: not a URL, a preset or a host in a hosts file ({known})")


def _from_table(spec: Any, name: str, model: str | None, t: dict[str, Any], path: Path,
                speed: SpeedOptions) -> ResolvedHost:  # fmt: skip
    preset = PRESETS.get(spec.dialect or t.get("dialect") or t.get("preset") or "")
    url = t.get("url") or PRESETS[t["preset"]].base_url
    resolved = _build(spec, url, preset, t, speed, explicit=True, model=model or t.get("model"))
    where = f"{path}: hosts.{name}.key_env" if "key_env" in t else f"--host {name}: the preset's key variable"
    local = "key_env" not in t and (preset is None or preset.local or "url" in t)
    _require_key(resolved.key_env, local, where)
    price = parse_card(t["price"], f"{path}: hosts.{name}.price") if "price" in t else None
    return _with(resolved, name=name, hosts_file=str(path), preset=t.get("preset"), gpus=t.get("gpus"),
                 accelerator=t.get("accelerator"), power_kw=t.get("power_kw"), price=price)  # fmt: skip


def _build(spec: Any, url: str | None, preset: Preset | None, t: dict[str, Any], speed: SpeedOptions,
           explicit: bool, model: str | None = None) -> ResolvedHost:  # fmt: skip
    """The host from a preset's terms, a hosts-file table over them, and the command line over both."""
    try:
        speed_body, speed_headers = speed_fields(preset, speed)
    except ValueError as exc:
        raise HostError(str(exc)) from None
    api = spec.api
    if api == "chat" and explicit:  # --api's default: the table's or the preset's flavour wins over it
        api = t.get("api") or (preset.api if preset else "chat")
    key_env = spec.api_key_env
    if key_env == DEFAULT_KEY_ENV and url is not None:  # the simulated host takes no key
        key_env = t.get("key_env") or (preset.key_env if preset and preset.key_env else DEFAULT_KEY_ENV)
    body = {**(preset.body_for(api) if preset else {}), **speed_body, **t.get("body", {}), **spec.extra_body}
    headers = {**(preset.headers if preset else {}), **speed_headers, **t.get("headers", {}), **spec.headers}
    return ResolvedHost(url, spec.model or model, api, key_env, headers, body, preset.name if preset else None)


def _require_key(key_env: str, optional: bool, where: str) -> None:
    if not optional and not os.environ.get(key_env):
        raise HostError(f"{where}: {key_env} is not set (export it, or name another with --api-key-env)")


def _with(r: ResolvedHost, **changes: Any) -> ResolvedHost:
    from dataclasses import replace

    return replace(r, **changes)


def host_facts(spec: Any) -> dict[str, Any]:
    """The hosts file's facts of a spec's host for capacity and cost figures: ``gpus``, ``power_kw`` and ``price``
    (the rate card dict, or None). A ``--rate-card`` on the command line wins over the file's. Against the
    simulated host, ``gpus`` is its profile's."""
    r = resolve(spec)
    price = r.price
    if getattr(spec, "rate_card", None):
        price = rate_card_option(spec.rate_card)
    price = for_endpoint(price, r.base_url)
    gpus = r.gpus
    if r.base_url is None and gpus is None and not getattr(spec, "sim_profile_file", None):
        from replay.sim.core.profiles import get_profile

        try:
            gpus = get_profile(spec.sim_profile).gpus
        except ValueError:
            gpus = None  # an unknown profile is check_spec's to name
    return {"gpus": gpus, "power_kw": r.power_kw, "price": price}


def rate_card_option(text: str) -> dict[str, Any]:
    """``--rate-card``: a shipped card's name, ``input=0.3,cached_input=0.006,output=1.2``, or ``0.3:0.006:1.2``
    (USD per million: input, cached input, output)."""
    value: Any = text
    parts = text.split(":")
    if len(parts) == 3 and "=" not in text and "/" not in text:
        try:
            value = dict(zip(("input", "cached_input", "output"), map(float, parts), strict=True))
        except ValueError:
            raise HostError(f"--rate-card: {text!r} is not IN:CACHED:OUT (USD per million tokens)") from None
    elif "=" in text:
        value = {}
        for part in text.split(","):
            k, _, v = part.partition("=")
            try:
                value[k.strip()] = float(v)
            except ValueError:
                raise HostError(f"--rate-card: {part.strip()!r} is not NAME=USD_PER_MILLION") from None
    try:
        return parse_card(value, "--rate-card")
    except CardError as exc:
        raise HostError(str(exc)) from None
