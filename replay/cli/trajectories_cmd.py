"""``replay export-trajectories PATHS --format atif -o DIR``: trajectories written in another tool's format."""

from __future__ import annotations

from pathlib import Path

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
    """Write trajectories (canonical files, or anything replay import reads) as ATIF files."""
    from replay.workload.atif_export import write_atif
    from replay.workload.importers import ImportFailure, import_paths

    try:
        result = import_paths(paths, source_fmt)
    except (ImportFailure, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    for path, reason, explicit in result.refused:
        if explicit:
            raise click.ClickException(f"{path}: refused: {reason}")
        click.echo(f"skipped {path}: {reason}", err=True)
    if not result.trajectories:
        raise click.ClickException("nothing to export")
    try:
        written = write_atif(result.trajectories, Path(out))
    except OSError as exc:
        raise click.ClickException(f"{out}: {exc.strerror}") from None
    click.echo(f"{plural(len(written), 'trajectory')} -> {out} ({fmt}, one file each)", err=True)
