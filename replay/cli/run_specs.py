"""The run options read into ``RunSpec`` values, for every command that runs one (``run``, ``sweep``, ``capacity``,
``claims``, ``probe``; the options themselves: ``run_options``).

``spec_from`` checks what click cannot (durations, sizes, shares, JSON bodies, headers, policies) and names the
option of any bad value; ``--host`` may be repeated: ``specs_from`` gives one spec per host, and ``resolve_host``
reads each value (a URL, or ``sim:PROFILE``). A spec is made group by group (``runner/run_spec.py``): the load, the
soak's jobs, the gates, the host and how calls are sent, the loop, the simulated host, the workload; then the
recipe, start points and arrivals are folded in (``recipe_options.with_recipe``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import orjson

from replay.cli.options import parse_bytes, parse_duration
from replay.clients.host import header_problem


def _json_object(text: str | None, option: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=option) from None
    if not isinstance(body, dict):
        raise click.BadParameter("expected a JSON object", param_hint=option)
    return body


def _fraction(text: str, option: str) -> float:
    """'10%' or '0.1' → 0.1."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected a share such as 10% or 0.1", param_hint=option) from None
    if not 0 <= value < 10:
        raise click.BadParameter(f"{text!r}: expected a share such as 10% or 0.1", param_hint=option)
    return value


def _headers(values: tuple[str, ...]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition(":")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected NAME:VALUE, not {value!r}", param_hint="--header")
        if problem := header_problem(name.strip(), text.strip()):  # (the value is not echoed: it may be a key)
            raise click.BadParameter(f"{name.strip()!r}: {problem}", param_hint="--header")
        headers[name.strip()] = text.strip()
    return headers


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()] if text else []


# Options whose 0 could only mean "not given" (a run of no time, a call that may not take any, a window of nothing):
# refused, never read as their default.
POSITIVE_SECONDS = ("duration", "window", "request_timeout", "stall_timeout")


def _seconds(opts: dict[str, Any], name: str) -> float | None:
    flag = "--" + name.replace("_", "-")
    try:
        value = parse_duration(opts.get(name))
    except click.BadParameter as exc:
        raise click.BadParameter(exc.message, param_hint=flag) from None
    if value is not None and value <= 0 and name in POSITIVE_SECONDS:
        raise click.BadParameter(f"{opts[name]!r}: expected more than 0 s (leave {flag} out for its default)",
                                 param_hint=flag)  # fmt: skip
    return value


def _thresholds(texts: tuple[str, ...]) -> list[str]:
    """``--threshold`` as given; an empty one (``--threshold ''``, a variable that was not set) is refused: it would
    silently leave the run ungated."""
    from replay.expressions import split_terms

    for text in texts:
        if not split_terms([text]):
            raise click.BadParameter(f"{text!r}: no threshold in it, such as 'ttft.p95<2'", param_hint="--threshold")
    return list(texts)


# What a command without the run's stop, windows, thresholds or soak options stands for (a study's levels).
RUN_ONLY_DEFAULTS: dict[str, Any] = {
    "concurrency": 1,
    "source_addresses": (),
    "duration": None,
    "tasks": None,
    "warmup": None,
    "window": None,
    "retries": None,
    "retry_max_wait": "60",
    "retry_partial": False,
    "on_error": "continue",
    "thresholds": (),
    "slo": (),
    "abort_on_fail": False,
    "prometheus": None,
    "scrape_metrics": None,
    "baseline": None,
    "baseline_tolerance": "10%",
    "history_file": None,
}


SIM_HOST = "sim:"


def resolve_host(value: str | None, sim_profile: str) -> tuple[str | None, str]:
    """(the host to run against, or None for the embedded simulated host; its profile) for one ``--host`` value.

    ``sim:PROFILE`` (or ``sim``) is the embedded simulated host with that profile; anything else (a URL, a preset,
    a hosts-file name) is the run's host, which ``replay.hosts.resolve.resolve`` reads and checks."""
    if value is None or value.strip() == "sim":
        return None, sim_profile
    text = value.strip()
    if text.startswith(SIM_HOST):
        from replay.sim.core.profiles import PROFILES  # stdlib only

        name = text[len(SIM_HOST) :]
        if name not in PROFILES:
            raise click.BadParameter(
                f"{value!r}: no sim profile {name!r}; known: {', '.join(PROFILES)}", param_hint="--host"
            )
        return None, name
    return text, sim_profile


def host_values(opts: dict[str, Any]) -> tuple[str | None, ...]:
    """The ``--host`` values given (one None: the embedded simulated host)."""
    hosts = opts.get("hosts")
    if hosts is None:  # a caller that still passes a single "host"
        hosts = (opts["host"],) if opts.get("host") else ()
    return tuple(hosts) or (None,)


def host_label(value: str | None, opts: dict[str, Any]) -> str:
    """How a host is named in outputs: its URL, sim:PROFILE, or sim:FILE for a profile from a file."""
    url, profile = resolve_host(value, opts["sim_profile"])
    if url is None and opts.get("sim_profile_file"):
        return f"{SIM_HOST}{Path(opts['sim_profile_file']).name}"
    return url or f"{SIM_HOST}{profile}"


HISTORY_OUTPUTS = ("recorded", "live")  # what --history appends after each call; any other value is a history FILE


def history_file_given(opts: dict[str, Any]) -> None:
    """``replay run --history FILE``: a history of earlier nights (``--history-file``), the conversation's history
    left recorded; refused where both name a file."""
    value = opts.get("history")
    if value is None or value in HISTORY_OUTPUTS:
        return
    if opts.get("history_file") and opts["history_file"] != value:
        raise click.BadParameter("give the history of nights once (--history FILE or --history-file FILE)",
                                 param_hint="--history")  # fmt: skip
    opts["history_file"], opts["history"] = value, "recorded"


def spec_from(opts: dict[str, Any], trajectories: tuple[str, ...] = (), out: str | None = None) -> Any:
    """The RunSpec the options describe, for one host; a bad value raises click.BadParameter naming its option."""
    hosts = host_values(opts)
    if len(hosts) > 1:
        raise click.BadParameter("one host here (several: specs_from)", param_hint="--host")
    return _spec(opts, hosts[0], trajectories, out)


def specs_from(opts: dict[str, Any], trajectories: tuple[str, ...] = ()) -> list[Any]:
    """One RunSpec per ``--host`` value, the same workload, load and seed for each (``out`` left for the caller)."""
    return [_spec(opts, host, trajectories, None) for host in host_values(opts)]


def _spec(opts: dict[str, Any], host: str | None, trajectories: tuple[str, ...], out: str | None) -> Any:
    from replay.cli.recipe_options import with_recipe
    from replay.runner.run_spec import GateSpec, LoopSpec, RunSpec, SimSpec, SoakSpec, WorkloadSpec
    from replay.workload.history import HistoryPolicy

    base_url, sim_profile = resolve_host(host, opts["sim_profile"])
    policy = _tool_time(opts)
    try:
        max_bytes = parse_bytes(opts["max_response_bytes"])
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--max-response-bytes") from None
    opts = {**RUN_ONLY_DEFAULTS, **opts}  # a study takes PACE and RETRY, not the stop, windows, thresholds, soak
    load = _load(opts, policy)
    soak = SoakSpec(window_s=_seconds(opts, "window"), prometheus=opts.get("prometheus"),
                    scrape_metrics=opts.get("scrape_metrics"))  # fmt: skip
    gate = GateSpec(
        thresholds=_thresholds(opts["thresholds"]),
        slo=list(opts["slo"]),
        abort_on_fail=opts["abort_on_fail"],
        baseline=opts.get("baseline"),
        baseline_tolerance=_fraction(opts.get("baseline_tolerance") or "10%", "--baseline-tolerance"),
        history_file=opts.get("history_file"),
    )
    loop = LoopSpec(workers=opts.get("workers") or (0 if opts.get("ray") else 1), ray=opts.get("ray"),
                    ray_listen=opts.get("ray_listen"))  # fmt: skip
    sim = SimSpec(profile=sim_profile, profile_file=opts["sim_profile_file"], truth_log=opts["sim_truth_log"],
                  faults=opts["sim_faults"], fault_seed=opts["sim_fault_seed"], dialect=opts["sim_dialect"],
                  fallback=opts["sim_fallback"])  # fmt: skip
    if opts["history"] not in HISTORY_OUTPUTS:
        raise click.BadParameter(f"{opts['history']!r} is not one of recorded, live (a history FILE is replay run's)",
                                 param_hint="--history")  # fmt: skip
    history = HistoryPolicy(output=opts["history"], reasoning=opts["reasoning_history"], tool_calls=opts["tool_calls"])
    workload = WorkloadSpec(trajectories=list(trajectories), tokenizer=opts["tokenizer"], history=history,
                            unrecorded_context=opts["unrecorded_context"])  # fmt: skip
    spec = RunSpec(workload=workload, endpoint=_endpoint(opts, base_url, max_bytes), load=load, loop=loop, sim=sim,
                   soak=soak, gate=gate, out=out)  # fmt: skip
    return with_recipe(spec, opts)


def _tool_time(opts: dict[str, Any]) -> Any:
    """``--tool-time`` (with ``--idle-cap``) as the sessions' pause policy."""
    from replay.sessions.tool_time import ToolTimePolicy

    try:
        return ToolTimePolicy.parse(opts["tool_time"], _seconds(opts, "idle_cap"))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--tool-time") from None


def _load(opts: dict[str, Any], tool_time: Any) -> Any:
    """The load: sessions, stop, warm-up, pace, retries (``LOAD``, ``PACE``, ``RETRY``)."""
    from replay.loops.load import LoadConfig
    from replay.sessions.retry import RetryPolicy

    retry = RetryPolicy(max_wait_s=_seconds(opts, "retry_max_wait") or 0.0, partial=opts["retry_partial"])
    return LoadConfig(
        concurrency=opts["concurrency"] or 1,
        duration_s=_seconds(opts, "duration"),
        tasks=opts["tasks"],
        warmup_s=_seconds(opts, "warmup"),
        tool_time=tool_time,
        seed=opts["seed"],
        salt_tasks=opts["salt_tasks"],
        rate_limit=(opts["max_rpm"], 60.0) if opts["max_rpm"] else None,
        drain_timeout_s=_seconds(opts, "drain_timeout") or 0.0,
        retry=retry,
        on_error=opts["on_error"],
        ramp_up_s=None if opts.get("ramp_up", "auto") == "auto" else _seconds(opts, "ramp_up"),
    )


def _endpoint(opts: dict[str, Any], base_url: str | None, max_bytes: int) -> Any:
    """The host and how every call is sent to it (``HOST``, ``REQUEST``)."""
    from replay.runner.run_spec import HostSpec

    extra_body = _json_object(opts["extra_body"], "--extra-body")
    return HostSpec(
        host=base_url,
        model=opts["model"],
        api=opts["api"],
        api_key_env=opts["api_key_env"],
        dialect=opts["dialect"],
        hosts_file=opts["hosts_file"],
        retries=opts["retries"],
        source_addresses=list(opts.get("source_addresses") or ()),
        force_output_length=opts["force_output_length"],
        check_answers=opts.get("check_answers"),
        extra_body=extra_body,
        request_timeout_s=_seconds(opts, "request_timeout") or 600.0,  # (0 refused: the default only when unset)
        stall_timeout_s=_seconds(opts, "stall_timeout") or 120.0,
        max_response_bytes=max_bytes,
        follow_redirects=bool(opts.get("follow_redirects")),
        ca_bundle=opts.get("ca_bundle"),
        insecure=bool(opts.get("insecure")),
        transport=opts.get("transport") or "http",
        cache_control=opts["cache_control"],
        responses_state=opts["responses_state"],
        headers=_headers(opts["headers"]),
        connection=opts["connection"],
        service_tier=opts["service_tier"],
        speed=opts["speed"],
        route_sort=opts["route_sort"],
        route_order=_names(opts["route_order"]),
        route_only=_names(opts["route_only"]),
        fallbacks=False if opts["no_fallbacks"] else None,
        rate_card=opts["rate_card"],
    )
