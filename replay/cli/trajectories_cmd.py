"""``replay export-trajectories PATHS --format atif -o DIR``: trajectories written in another tool's format: the
trajectories themselves (canonical files, or anything ``replay import`` reads), or the conversations a
``--history live`` run had (its run file: ``replay.reports.live_conversation``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from replay.workload.words import plural

FORMATS = ("atif",)


@click.command("export-trajectories")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    required=True,
    help="atif: the Agent Trajectory Interchange Format (Harbor's RFC 0001), one JSON file per trajectory.",
)
@click.option(
    "--from",
    "source_fmt",
    default="auto",
    show_default=True,
    help="Format of PATHS that are not canonical trajectory files (as replay import --from).",
)
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False), help="Directory to write the files to.")
def export_trajectories(paths: tuple[str, ...], fmt: str, source_fmt: str, out: str) -> None:
    """Write trajectories (canonical files, or anything replay import reads), or a --history live run's
    conversations (its run file), as ATIF files."""
    from replay.workload.atif_export import write_atif

    runs = [p for p in paths if _is_run_file(Path(p))]
    if runs and len(runs) != len(paths):
        raise click.UsageError("give either run files or trajectories, not both")
    trajectories = _from_runs(runs) if runs else _imported(paths, source_fmt)
    if not trajectories:
        raise click.ClickException("nothing to export")
    try:
        written = write_atif(trajectories, Path(out))
    except OSError as exc:
        raise click.ClickException(f"{out}: {exc.strerror}") from None
    click.echo(f"{plural(len(written), 'trajectory')} -> {out} ({fmt}, one file each)", err=True)


def _is_run_file(path: Path) -> bool:
    from replay.records.run_file import RUN_FORMAT

    if not path.is_file():
        return False
    with path.open("rb") as fh:
        head = fh.read(200)
    return head.startswith(b'{"type":"header"') and f'"format":"{RUN_FORMAT}"'.encode() in head


def _from_runs(runs: list[str]) -> list[Any]:
    from replay.reports.live_conversation import live_conversations

    out = []
    for run in runs:
        try:
            out.extend(live_conversations(Path(run)))
        except ValueError as exc:  # LiveExportError, TrajectoryError: they name the file and what is wrong
            raise click.ClickException(str(exc)) from None
    return out


def _imported(paths: tuple[str, ...], source_fmt: str) -> list[Any]:
    from replay.workload.importers import ImportFailure, import_paths

    try:
        result = import_paths(paths, source_fmt)
    except (ImportFailure, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    for path, reason, explicit in result.refused:
        if explicit:
            raise click.ClickException(f"{path}: refused: {reason}")
        click.echo(f"skipped {path}: {reason}", err=True)
    return result.trajectories
