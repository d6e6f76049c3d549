"""``replay history add | list | show``: the nights of a nightly soak in one local file, their figures over time and
the change points where a figure changed regime (docs/nightly.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

_FILE = click.option(
    "--file",
    "history_file",
    required=True,
    type=click.Path(dir_okay=False),
    help="The history (one SQLite file; add makes it).",
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


@click.group()
def history() -> None:
    """Nights over time: add runs to a history, list them, show each figure's series and its change points."""


@history.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@_FILE
def add(runs: tuple[str, ...], history_file: str) -> None:
    """Add finished runs (their headline and window figures, their identity) to the history; a run already in it
    is replaced, not added twice."""
    from replay.history.store import HistoryError, add, connect, night_rows

    try:
        db = connect(history_file, create=True)
        try:
            for run in runs:
                new = add(db, *night_rows(run))
                click.echo(f"{'added' if new else 'already in the history (figures refreshed)'}: {run}", err=True)
        finally:
            db.close()
    except HistoryError as exc:
        raise click.ClickException(str(exc)) from None


def _nights(history_file: str) -> list[Any]:
    from replay.history.store import HistoryError, connect, nights

    try:
        db = connect(history_file)
        try:
            return nights(db)
        finally:
            db.close()
    except HistoryError as exc:
        raise click.ClickException(str(exc)) from None


@history.command(name="list")
@_FILE
@_JSON
def list_cmd(history_file: str, as_json: bool) -> None:
    """The nights of the history in the order they ran."""
    from replay.history.report import build, list_text
    from replay.reports.text_report import to_json

    found = _nights(history_file)
    if as_json:
        doc = build(found, history_file, detect=False)
        click.echo(to_json({"file": doc["file"], "series": doc["series"], "nights": [_row(n) for n in found]}))
    else:
        click.echo(list_text(found))


def _row(n: Any) -> dict[str, Any]:
    return {"run": n.path, "run_id": n.run_id, "created": n.created, "series": n.series, "unjudged": n.unjudged,
            **n.about}  # fmt: skip


@history.command()
@_FILE
@_JSON
@click.option("--html", "html_path", type=click.Path(dir_okay=False), help="Also draw the history's page here.")
def show(history_file: str, as_json: bool, html_path: str | None) -> None:
    """Each figure night by night with its noise band, and the nights where it changed regime (in its better
    direction: the step's size and its confidence), series by series."""
    from replay.history.changes import ChangesUnavailable, require
    from replay.history.report import build, show_text
    from replay.reports.text_report import to_json

    found = _nights(history_file)
    try:
        require()
        detect = True
    except ChangesUnavailable as exc:
        click.echo(f"no change points: {exc}", err=True)
        detect = False
    doc = build(found, history_file, detect=detect)
    click.echo(to_json(doc) if as_json else show_text(doc))
    if html_path:
        from replay.reports.history_page import render

        Path(html_path).write_text(render(doc, html_path), encoding="utf-8")
        click.echo(f"wrote {html_path}", err=True)
