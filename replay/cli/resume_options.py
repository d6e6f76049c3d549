"""``replay run --resume FILE`` alone: the run's options from the file's header, so a soak killed at 3 a.m. goes on
without the user retyping every option. Options given on the command line win (and must match the run: the resumed
header is checked against the file's, ``runner.resume.check_same``); the rest are the run's own.

The header records the configuration without secrets: a header or body field it holds redacted cannot be restored
and must be given again (said in one line), as must the simulated host's fault seed, which it does not keep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import orjson

REDACTED = "[redacted]"


def read_header(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            header = orjson.loads(f.readline())
    except OSError as exc:
        raise click.BadParameter(f"{path}: {exc.strerror}", param_hint="--resume") from None
    except orjson.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("type") != "header":
        raise click.BadParameter(f"{path}: its first line is not a run header", param_hint="--resume")
    return header


def _text(value: Any) -> str | None:
    return None if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _host(h: dict[str, Any]) -> dict[str, Any]:
    host, sim = h.get("host") or {}, h.get("simulated") or {}
    if h.get("simulated_host"):
        return {"hosts": (), "sim_profile": sim.get("profile") or h["simulated_host"],
                "sim_profile_file": sim.get("profile_file"), "sim_faults": sim.get("faults"),
                "sim_dialect": sim.get("dialect"), "sim_fallback": sim.get("fallback")}  # fmt: skip
    name = host.get("name") or host.get("preset") or host.get("base_url")
    return {"hosts": (name,) if name else (), "model": host.get("model"), "dialect": host.get("dialect"),
            "hosts_file": host.get("hosts_file")}  # fmt: skip


def _load(load: dict[str, Any]) -> dict[str, Any]:
    tool, _, cap = str(load.get("tool_time") or "recorded").partition(",idle-cap:")
    retry = load.get("retry") or {}
    rate = load.get("rate_limit")
    warmup = load.get("warmup_s")
    return {
        "concurrency": load.get("concurrency"), "duration": _text(load.get("duration_s")), "tasks": load.get("tasks"),
        "warmup": None if warmup in (None, "auto") else _text(warmup), "tool_time": tool, "idle_cap": cap or None,
        "seed": load.get("seed"), "salt_tasks": load.get("salt_tasks"), "max_rpm": rate[0] if rate else None,
        "drain_timeout": _text(load.get("drain_timeout_s")), "retries": retry.get("retries"),
        "retry_max_wait": _text(retry.get("max_wait_s")), "retry_partial": retry.get("partial"),
        "on_error": load.get("on_error"), "start_at": (load.get("lanes") or {}).get("start_at"),
    }  # fmt: skip


def _request(h: dict[str, Any]) -> dict[str, Any]:
    req, host = h.get("request") or {}, h.get("host") or {}
    history = req.get("history") or {}
    out = {
        "api": host.get("api"), "api_key_env": host.get("api_key_env"), "history": history.get("output"),
        "reasoning_history": history.get("reasoning"), "tool_calls": history.get("tool_calls"),
        "force_output_length": req.get("force_output_length"), "cache_control": req.get("cache_control"),
        "responses_state": req.get("responses_state"), "connection": host.get("connection"),
        "request_timeout": _text(host.get("request_timeout_s")), "stall_timeout": _text(host.get("stall_timeout_s")),
        "max_response_bytes": _text(host.get("max_response_bytes")),
    }  # fmt: skip
    body, headers = req.get("extra_body") or {}, host.get("headers") or {}
    if REDACTED.encode() in orjson.dumps(body) or REDACTED in headers.values():
        raise click.UsageError("--resume: the run's --extra-body or --header held a secret, which its file keeps"
                               " redacted: give them again")  # fmt: skip
    out["extra_body"] = orjson.dumps(body).decode() if body else None
    out["headers"] = tuple(f"{k}:{v}" for k, v in headers.items())
    return out


def _recipe(h: dict[str, Any]) -> dict[str, Any]:
    recipe, ol, gate = h.get("recipe") or {}, h.get("open_loop") or {}, h.get("baseline") or {}
    tiers = tuple(f"{t['name']}:{t['ttft_s']:g}:{t['speed_tps']:g}" for t in recipe.get("slo_tiers") or ())
    out = {
        "recipe": recipe.get("name"), "gpus": (recipe["gpus"],) if recipe.get("gpus") else (),
        "power_kw": (recipe["power_kw"],) if recipe.get("power_kw") else (),
        "price_per_hour": (recipe["price_per_hour"],) if recipe.get("price_per_hour") else (),
        "slo_tiers": tiers if recipe.get("name") == "aa-agentperf" else (),
        "recipe_min_duration": _text(recipe.get("min_duration_s")) if recipe.get("min_duration_shortened") else None,
        "recipe_fingerprint": (recipe.get("corpus") or {}).get("fingerprint"),
        "arrivals": ol.get("arrivals"), "max_live": ol.get("max_live") if ol else None,
        "thresholds": tuple(h.get("thresholds") or ()), "abort_on_fail": bool(h.get("abort_on_fail")),
        "slo": tuple(h.get("slo") or ()),
        "window": _text(h.get("window_s")), "scrape_metrics": h.get("scrape_metrics"),
        "baseline": gate.get("file"), "baseline_tolerance": _text(gate.get("tolerance")) if gate else None,
        "history_file": (h.get("history_gate") or {}).get("file"),
    }  # fmt: skip
    if recipe.get("name"):
        out["start_at"] = None  # the recipe's lanes bring their own start point
    return out


def run_options(header: dict[str, Any]) -> dict[str, Any]:
    """The ``replay run`` options (by parameter name) a header records; None: the option's default."""
    return {**_host(header), **_load(header.get("load") or {}), **_request(header), **_recipe(header)}


def workload_of(path: str, header: dict[str, Any]) -> tuple[str, ...]:
    """The run's workload files, where they were or beside the run file, checked against the header's digest."""
    from replay.metrics.recorded_timeline import workload_files

    found, note = workload_files(path, header)
    if found is None:
        raise click.UsageError(f"--resume {path}: {note}; give the workload files")
    return tuple(str(p) for p in found)


def fill(given: set[str], opts: dict[str, Any], trajectories: tuple[str, ...], path: str) -> tuple[str, ...]:
    """Put the run's own options into ``opts`` wherever the command line left one at its default; the workload
    files too when none were given. Returns the trajectories."""
    if not Path(path).is_file():
        return trajectories  # read_previous says so, in the run's own words
    header = read_header(path)
    for name, value in run_options(header).items():
        if name not in given and name in opts and value is not None:
            opts[name] = value
    return trajectories or workload_of(path, header)
