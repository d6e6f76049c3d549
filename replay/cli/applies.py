"""No silent options: an option given to a run, sweep, capacity search or claims check where it does nothing is refused
(exit code 1) with the reason, before anything runs.

Each rule names the options it covers and says, for a ``Mode`` (what the command line asks for: which hosts, the
virtual clock, an open loop, a recipe, retries), why they would do nothing there, or None where they apply. Only
options the user gave count (click's ``ParameterSource``: a default is never an error). What depends on the host's
resolved API or URL (``--cache-control``, ``--responses-state``, ``--transport websocket``, ``--ca-bundle`` and
``--insecure`` against a http:// host) is checked with the host (``runner.single_run.check_spec``),
and what a preset cannot take (``--speed``, ``--route-*``) where presets are read (``hosts.presets``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
from click.core import ParameterSource


@dataclass(frozen=True, slots=True)
class Mode:
    """What a command line asks for, as far as the options' applicability goes."""

    command: str  # run | sweep | capacity | claims
    urls: int  # --host values that are a real host (a URL, a preset, a hosts-file name)
    names: int  # of them, names (a preset's or the hosts file's), looked up in the hosts file
    sims: int  # --host values that are the embedded simulated host (none given: one)
    sims_named: int  # of them, given as sim:PROFILE (their own profile)
    virtual: bool
    open_loop: bool
    max_live: bool  # --max-live given
    recipe: str | None
    tool_time_none: bool
    retries: int | None  # as given (None: the default, 3 against a real host and 0 against the simulated one)
    ray: bool
    thresholds: bool
    baseline: bool
    faults: bool
    fallback: bool

    @property
    def hosts(self) -> int:
        return self.urls + self.sims

    @property
    def no_retries(self) -> bool:
        return self.retries == 0 or (self.retries is None and self.urls == 0)

    @property
    def study(self) -> bool:
        return self.command != "run"


Why = Callable[[Mode], str | None]
VIRTUAL = "the virtual clock drives the simulated engine alone (no client, no HTTP)"


def _sim_only(m: Mode) -> str | None:
    if m.sims == 0:
        return "an option of the embedded simulated host, and every --host here is a real host"
    return None


def _sim_profile(m: Mode) -> str | None:
    if m.sims and m.sims == m.sims_named:
        return "every simulated --host here is sim:PROFILE, which names its own"
    return _sim_only(m)


def _sim_server(m: Mode) -> str | None:
    if m.virtual:
        return f"{VIRTUAL}: no faults, dialect, fallback route or truth log"
    return _sim_only(m)


def _fault_seed(m: Mode) -> str | None:
    if m.faults or m.fallback:
        return _sim_server(m)
    return _sim_server(m) or "it seeds --sim-faults and --sim-fallback, and neither is given"


def _truth_log(m: Mode) -> str | None:
    if m.study or m.hosts > 1:
        return _sim_server(m) or "each run's truth log goes beside its own run file"
    return _sim_server(m)


def _sends(m: Mode) -> str | None:
    return f"{VIRTUAL}: it sends no request" if m.virtual else None


def _history(m: Mode) -> str | None:
    return f"{VIRTUAL}: there is no live answer to append" if m.virtual else None


def _fails(m: Mode) -> str | None:
    return f"{VIRTUAL}: no call fails" if m.virtual else None


def _retried(m: Mode) -> str | None:
    if m.no_retries and not m.virtual:
        return "no call is retried in this run (--retries 0, the simulated host's default: give --retries N)"
    return _fails(m)


def _needs(test: Callable[[Mode], bool], reason: str) -> Why:
    return lambda m: None if test(m) else reason


REQUESTS = ("dialect", "hosts_file", "model", "api", "api_key_env", "request_timeout", "stall_timeout",
            "max_response_bytes", "force_output_length", "extra_body", "headers", "connection", "service_tier",
            "speed", "route_sort", "route_order", "route_only", "no_fallbacks", "cache_control", "responses_state",
            "rate_card", "max_rpm", "drain_timeout", "check_answers", "follow_redirects",
            "source_addresses", "ca_bundle", "insecure", "transport")  # fmt: skip

RULES: tuple[tuple[tuple[str, ...], Why], ...] = (
    (("sim_profile",), _sim_profile),
    (("sim_profile_file",), _sim_only),
    (("sim_faults", "sim_dialect", "sim_fallback"), _sim_server),
    (("sim_fault_seed",), _fault_seed),
    (("sim_truth_log",), _truth_log),
    (REQUESTS, _sends),
    (
        ("hosts_file",),
        _needs(
            lambda m: m.names > 0,
            "only a --host NAME is looked up in it, and every --host here is a URL or the simulated host",
        ),
    ),
    (
        ("ca_bundle", "insecure"),
        _needs(
            lambda m: m.urls > 0,
            "TLS settings of a https host, and the embedded simulated host speaks plain HTTP (start `replay sim "
            "--tls` and give its https:// URL as --host)",
        ),
    ),
    (("history",), _history),
    (("retries", "on_error"), _fails),
    (("retry_max_wait", "retry_partial"), _retried),
    (("hosts_at_once",), _needs(lambda m: m.hosts > 1, "it runs several --host values at once; there is one")),
    (("max_live",), _needs(lambda m: m.open_loop, "the open loop's cap on live sessions: give --arrivals")),
    (
        ("concurrency",),
        _needs(
            lambda m: not (m.open_loop and m.max_live),
            "in an open loop --max-live caps the live sessions (--concurrency is only its default)",
        ),
    ),
    (("slo_tiers",), _needs(lambda m: m.recipe == "aa-agentperf", "AA-AgentPerf's tiers: give --recipe aa-agentperf")),
    (
        ("warmup",),
        _needs(
            lambda m: m.recipe != "agentx",
            "AgentX's warm-up is its own (10 calls per lane at max_tokens 1, then a barrier that opens the measured "
            "window: a run's --duration and a sweep level's --window count from it)",
        ),
    ),
    (
        ("recipe_min_duration",),
        _needs(lambda m: m.recipe == "agentx", "it shortens AgentX's minimum duration (900 s): give --recipe agentx"),
    ),
    (
        ("ramp_up",),
        _needs(
            lambda m: not m.open_loop, "it spreads the closed loop's lanes' starts; an open loop's arrivals set them"
        ),
    ),
    (("recipe_fingerprint",), _needs(lambda m: bool(m.recipe), "the corpus a recipe run requires: give --recipe")),
    (("idle_cap",), _needs(lambda m: not m.tool_time_none, "--tool-time none takes no pause to cap")),
    (("ray_listen",), _needs(lambda m: m.ray, "where Ray's actors connect back: give --ray")),
    (("baseline_tolerance",), _needs(lambda m: m.baseline, "the baseline gate's tolerance: give --baseline")),
    (("abort_on_fail",), _needs(lambda m: m.thresholds, "it stops at a breached --threshold: give one")),
    (
        ("repeats",),
        _needs(
            lambda m: not m.virtual,
            "the virtual clock is deterministic: a repeat is the same run, which shows no noise",
        ),
    ),
)


def _flag(ctx: click.Context, name: str) -> str:
    for p in ctx.command.params:
        if p.name == name and isinstance(p, click.Option):
            longs = [o for o in p.opts if o.startswith("--")]
            if isinstance(p, click.Option) and p.is_flag and p.secondary_opts and ctx.params.get(name) is False:
                return p.secondary_opts[0]
            return longs[0] if longs else p.opts[0]
    return "--" + name.replace("_", "-")


def given(ctx: click.Context) -> set[str]:
    """The options the user gave (on the command line or from the environment), not left at their defaults."""
    return {
        name
        for name in ctx.params
        if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)
    }


def mode_of(command: str, opts: dict[str, Any]) -> Mode:
    from replay.cli.run_specs import SIM_HOST, host_values

    hosts = host_values(opts)
    sims = [h for h in hosts if h is None or h.strip() == "sim" or h.strip().startswith(SIM_HOST)]
    return Mode(
        command=command,
        urls=len(hosts) - len(sims),
        names=sum(h is not None and h not in sims and "://" not in h for h in hosts),
        sims=len(sims),
        sims_named=sum(h is not None and h.strip().startswith(SIM_HOST) for h in sims),
        virtual=bool(opts.get("virtual")),
        open_loop=bool(opts.get("arrivals")),
        max_live=opts.get("max_live") is not None,
        recipe=opts.get("recipe"),
        tool_time_none=(opts.get("tool_time") or "").strip() == "none",
        retries=opts.get("retries"),
        ray=bool(opts.get("ray")),
        thresholds=bool(opts.get("thresholds")),
        baseline=bool(opts.get("baseline")),
        faults=bool(opts.get("sim_faults")),
        fallback=bool(opts.get("sim_fallback")),
    )


def refuse_inapplicable(command: str, params: dict[str, Any] | None = None) -> None:
    """Raise click.UsageError (exit code 1) for the first option given that does nothing in this command's mode
    (``params``: the options as they will run, when more than the command line gave: a resumed run's own)."""
    ctx = click.get_current_context()
    mode = mode_of(command, {**ctx.params, **(params or {})})
    asked = given(ctx)
    for names, why in RULES:
        for name in names:
            if name in asked and (reason := why(mode)):
                raise click.UsageError(f"{_flag(ctx, name)} does nothing here: {reason}")
