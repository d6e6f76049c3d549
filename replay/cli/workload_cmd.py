"""``replay import``, ``replay inspect``, ``replay synth``: workloads before they are replayed."""

from __future__ import annotations

import sys

import click
import orjson

from replay.workload.words import plural


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--from",
    "fmt",
    default="auto",
    show_default=True,
    help="Source format: auto (detect per file), swe-agent, mini-swe-agent, openhands, claude-code, openai-log, "
    "mooncake, weka, otel, mooncake-agentic, tracelab, hcua, atif, exgentic, rollout.",
)
@click.option(
    "-o",
    "--out",
    required=True,
    type=click.Path(dir_okay=False),
    help="Canonical trajectory file to write (JSON Lines; - for stdout).",
)
@click.option("--salt", help="Mooncake/Weka/rollout: salt of the text generated per block id or group (default: none).")
@click.option("--block-size", type=click.IntRange(1), help="Mooncake: tokens per hashed block (default 512).")
@click.option(
    "--include-discarded",
    is_flag=True,
    help="Also replay the calls a source threw away (mini-swe-agent format errors): exact input, stand-in answer.",
)
@click.option(
    "--screenshot-window",
    type=click.IntRange(0),
    help="Keep each request's last N images, older ones as a placeholder text, as computer-use agents clean their "
    "context (hcua restores up to N screenshots from the requests that carried them).",
)
@click.option("-q", "--quiet", is_flag=True, help="No per-file lines.")
def import_cmd(
    paths: tuple[str, ...],
    fmt: str,
    out: str,
    salt: str | None,
    block_size: int | None,
    include_discarded: bool,
    screenshot_window: int | None,
    quiet: bool,
) -> None:
    """Import recorded agent sessions or traces (files or directories) as canonical trajectories."""
    import os

    from replay.workload.importers import ImportFailure, import_paths, write_canonical

    try:
        result = import_paths(
            paths,
            fmt,
            salt=salt,
            block_size=block_size,
            include_discarded=include_discarded,
            screenshot_window=screenshot_window,
        )
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
            click.echo(
                f"{f.format:>14}  {f.path}: {plural(f.trajectories, 'trajectory')}, {plural(f.turns, 'turn')}", err=True
            )
    if out == "-":
        write_canonical(result.trajectories, sys.stdout.buffer)
    else:
        tmp = f"{out}.tmp"
        with open(tmp, "wb") as fh:
            write_canonical(result.trajectories, fh)
        os.replace(tmp, out)
    turns = sum(len(t.turns) for t in result.trajectories)
    click.echo(f"{plural(len(result.trajectories), 'trajectory')}, {plural(turns, 'turn')} -> {out}", err=True)


@click.command("inspect")
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
    help="Draw the context-growth curves to this PNG (needs the 'plots' extra).",
)
@click.option(
    "--unrecorded-context",
    type=click.Choice(["pad", "omit"]),
    default="omit",
    show_default=True,
    help="pad: show the requests with the context the recordings left out put back, as replay run sends them; "
    "omit: the recordings as they are.",
)
def inspect_cmd(
    paths: tuple[str, ...], fmt: str, as_json: bool, plot_path: str | None, unrecorded_context: str
) -> None:
    """Workload statistics: turns, context growth, prefix reuse, tool time, recorded latency and cache."""
    from replay.workload.stats import load, plot, require_matplotlib, skipped_notes, summarize, to_json, to_text

    if plot_path:
        try:
            require_matplotlib()
        except RuntimeError as exc:
            raise click.ClickException(str(exc)) from None
    try:
        report = summarize(load(paths, fmt, unrecorded_context))
    except ValueError as exc:  # ImportFailure, TrajectoryError: they name the file and what is wrong
        raise click.ClickException(str(exc)) from None
    if plot_path:
        plot(report, plot_path)
    click.echo(to_json(report) if as_json else to_text(report))
    for note in skipped_notes(report):  # like `replay import`: notes on stderr, so stdout stays the report
        click.echo(note, err=True)


@click.command()
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
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=click.IntRange(0, (1 << 63) - 1),
    help="Seed of the draws and of the generated text.",
)
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

    from replay.workload.stats import load
    from replay.workload.synth import ProfileError, figures, fit, load_profile, synthesize

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
    summary = f"{plural(count, 'trajectory')} ({plural(lines, 'line')}) from profile {profile['name']!r}, seed {seed}"
    click.echo(f"{summary} -> {out}", err=True)
    if source is not None and out != "-":
        from replay.workload.trajectory import load_workload

        try:
            made = figures(load_workload([out]).trajectories)
        except ProfileError as exc:  # pragma: no cover - the synthesiser writes valid trajectories
            raise click.ClickException(str(exc)) from None
        was = profile["fitted_from"]
        for key in ("turns_median", "first_prompt_tokens_median", "growth_median", "prefix_reuse_pooled"):
            click.echo(f"  {key:28} source {was[key]:>10g}  synthetic {made[key]:>10g}", err=True)
