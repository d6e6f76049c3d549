"""``replay run``: replay trajectories against a host (or the embedded simulated one)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from replay.cli import run_options, run_specs, study_options
from replay.cli.recipe_options import RECIPE


@click.command()
@click.argument("trajectories", nargs=-1, type=click.Path())
@run_options.apply(
    run_options.HOST,
    run_options.LOAD,
    RECIPE,
    run_options.FAILURES,
    run_options.SOAK,
    run_options.REQUEST,
    run_options.SIM,
)
@run_options.apply(study_options.HARDWARE, study_options.SIDE_BY_SIDE)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="Run file (JSON Lines). Default: replay-runs/run-<time>.jsonl",
)
@click.option(
    "--resume",
    type=click.Path(dir_okay=False),
    help="Go on with this stopped or killed run, into the same file, with the options it was started with (read from"
    " its header; any given must match them).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON instead of a table.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
def run(
    trajectories: tuple[str, ...], out: str | None, resume: str | None, as_json: bool, quiet: bool, **opts: Any
) -> None:
    """Replay TRAJECTORIES (files or directories; default: the shipped coding-agent workload)."""
    from replay.cli.applies import given, refuse_inapplicable

    if resume:  # the options not given are the run's own, from its file's header
        from replay.cli.resume_options import fill

        trajectories = fill(given(click.get_current_context()), opts, trajectories, resume)
    run_specs.history_file_given(opts)  # --history FILE: the nights' history
    refuse_inapplicable("run", opts)
    from replay.records.scrub import Scrubber, header_secrets
    from replay.runner.preflight import footer_on_signals
    from replay.runner.run_error import run_file_of, stopped_by
    from replay.runner.single_run import RunError, check_spec, execute
    from replay.workload.trajectory import TrajectoryError

    if resume and out and out != resume:
        raise click.BadParameter("--resume writes into the run it resumes: give --out the same file or leave it out",
                                 param_hint="--out")  # fmt: skip
    if len(run_specs.host_values(opts)) > 1:  # hosts side by side: replay.cli.hosts_run
        if resume:
            raise click.BadParameter("one host to resume a run", param_hint="--resume")
        from replay.cli.hosts_run import run_hosts

        return run_hosts(trajectories, out, as_json, quiet, opts)
    for name in ("gpus", "power_kw", "price_per_hour"):
        if len(opts.get(name) or ()) > 1:
            flag = "--" + name.replace("_", "-")
            raise click.BadParameter(f"given {len(opts[name])} times for one host", param_hint=flag)
    spec = run_specs.spec_from(opts, trajectories, resume or out)
    spec.progress, spec.resume = not quiet, bool(resume)
    where = spec.host or f"embedded simulated host (profile {spec.sim_profile})"  # as given (before it is resolved)
    try:
        spec = check_spec(spec)  # before anything is printed (a bad --host may hold a key); the run uses it as checked
    except RunError as exc:
        raise click.ClickException(str(exc)) from None
    concurrency = opts["concurrency"]
    start = Scrubber(_secrets(spec.api_key_env) + header_secrets(spec.headers))  # a key in --host's path, say
    if not quiet:
        over = f" over {spec.workers} worker processes" if spec.workers > 1 else ""
        if spec.ray:
            many = f"{spec.workers} Ray actors" if spec.workers else "Ray actors (one per CPU of the cluster)"
            over = f" over {many} at {spec.ray}"
        sessions = f"{concurrency} sessions"
        if spec.arrivals is not None:
            sessions = f"open loop {spec.arrivals}, at most {spec.max_live or concurrency} live sessions"
        click.echo(start.text(f"replay: {sessions}{over} against {where}"), err=True)
    with footer_on_signals() as note:  # SIGTERM and SIGHUP noted, never raised, until the command's end
        try:
            result = execute(spec)
        except TrajectoryError as exc:
            raise click.ClickException(str(exc)) from None
        except RunError as exc:  # 1: nothing was run; 3: the run started and could not complete
            click.echo(start.text(f"Error: {exc}"), err=True)  # (it may name the host's URL)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP outside the loop's own handling
            _interrupted(stopped_by(exc), run_file_of(exc))
        _print(result, spec, as_json, quiet, note)
        if late := note.take():  # while the summary was printed: the run was whole, the command stops as asked
            _interrupted(late[0], result.path)
    sys.exit(result.exit_code)


def _interrupted(name: str, path: Path | None) -> NoReturn:
    """The command stopped by signal ``name``: what is in the run file, and exit 128 + N."""
    said = f"every finished request is in the run file {path}" if path else "before the run started: no run file"
    click.echo(f"\ninterrupted ({name}): {said}", err=True)
    sys.exit(128 + int(getattr(signal, name, signal.SIGINT)))


def _print(result: Any, spec: Any, as_json: bool, quiet: bool, note: Any) -> None:
    """The summary on stdout (scrubbed), and where the run is on stderr; exit 3 when stdout was closed. A signal
    noted on ``note`` before the summary is printed stops the command instead: a verdict is never printed after it."""
    from replay.records.scrub import Scrubber, header_secrets
    from replay.reports.text_report import to_json, to_text
    from replay.runner.preflight import held_signals, signals_held

    key_env = (result.header.get("host") or {}).get("api_key_env") or spec.api_key_env  # a preset's own variable
    scrub = Scrubber(_secrets(key_env) + header_secrets(spec.headers))  # the last guard before the screen
    summary = result.summary.to_dict()
    text = scrub.text(to_json(summary) if as_json else to_text(summary, result.header))
    with signals_held():  # one sent from here on waits for the summary to be out; one sent before stops the command
        if late := note.take() or held_signals():
            _interrupted(late[0], result.path)
        if not print_summary(text):
            click.echo(f"replay: stdout was closed before the summary was printed; the run is in {result.path}",
                       err=True)  # fmt: skip
            sys.exit(max(result.exit_code, 3))  # the run could not complete: its reader did not get it
    if result.footer and result.footer.get("signal"):
        click.echo(f"{result.footer['stop_reason']}: every finished request is in the run file", err=True)
    if not quiet:
        click.echo(f"run file: {result.path}  (replay report {result.path})", err=True)


def print_summary(text: str) -> bool:
    """``text`` on stdout; False when the reader closed it (a pipe to ``head``), with stdout then pointed at
    /dev/null so the interpreter's own flush at exit does not fail again, or when the command was started with it
    closed (``>&-``: Python then has no ``sys.stdout`` at all)."""
    if sys.stdout is None:
        return False
    try:
        click.echo(text)
        sys.stdout.flush()
    except BrokenPipeError:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return False
    return True


def _secrets(key_env: str | None) -> list[str]:
    """The run's API key, when its variable holds one (what the start line and the summary are scrubbed of)."""
    key = os.environ.get(key_env) if key_env else None
    return [key] if key else []
