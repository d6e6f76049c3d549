"""``replay run``: replay trajectories against a host (or the embedded simulated one)."""

from __future__ import annotations

import sys
from typing import Any

import click

from replay.cli import run_options, study_options


@click.command()
@click.argument("trajectories", nargs=-1, type=click.Path())
@run_options.apply(run_options.HOST, run_options.LOAD, run_options.REQUEST, run_options.SIM)
@run_options.apply(study_options.HARDWARE, study_options.SIDE_BY_SIDE)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="Run file (JSON Lines). Default: replay-runs/run-<time>.jsonl",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON instead of a table.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
def run(trajectories: tuple[str, ...], out: str | None, as_json: bool, quiet: bool, **opts: Any) -> None:
    """Replay TRAJECTORIES (files or directories; default: the shipped coding-agent workload)."""
    from replay.jobs.single_run import RunError, execute
    from replay.results.text_report import to_json, to_text
    from replay.workload.trajectory import TrajectoryError

    if len(run_options.host_values(opts)) > 1:  # hosts side by side: replay.cli.hosts_run
        from replay.cli.hosts_run import run_hosts

        return run_hosts(trajectories, out, as_json, quiet, opts)
    spec = run_options.spec_from(opts, trajectories, out)
    spec.progress = not quiet
    concurrency = opts["concurrency"]
    if not quiet:
        where = spec.host or f"embedded simulated host (profile {spec.sim_profile})"
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
