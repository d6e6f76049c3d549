"""``replay report INDEX``: a study rebuilt from its index and the run files it names (sweep, capacity, compare)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click


def rebuild(path: str, fmt: str) -> tuple[dict[str, Any], list | None]:
    """The study's JSON, and for compared sweeps each pair's level rows (for their curves)."""
    from replay.studies.capacity import load_capacity
    from replay.studies.sweep import load_sweep

    if fmt == "replay.sweep/1":
        return load_sweep(path), None
    if fmt == "replay.capacity/1":
        from replay.studies.study_files import read_index
        from replay.studies.tiers import load_tiers

        index = read_index(Path(path), fmt)
        return (load_tiers(Path(path), index) if index.get("tiers") else load_capacity(path)), None
    from replay.studies.side_by_side import load_comparison

    return load_comparison(path)


def report_index(path: str, fmt: str, as_json: bool, html_path: str | None, csv_dir: str | None) -> None:
    from replay.reports.studies import study_text
    from replay.reports.text_report import to_json

    try:
        doc, sweep_levels = rebuild(path, fmt)
    except (ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(to_json(doc))
    elif fmt == "replay.sweep/1":
        click.echo(study_text.sweep_text(doc))
    elif fmt == "replay.capacity/1":
        click.echo(study_text.tiers_text(doc) if doc.get("tiers") else study_text.capacity_text(doc))
    else:
        click.echo(study_text.compare_text(doc) if doc["kind"] in ("runs", "sweeps") else study_text.hosts_text(doc))
    if csv_dir and fmt == "replay.sweep/1":
        from replay.reports.studies.study_csv import write_levels_csv

        click.echo(f"wrote {write_levels_csv(doc, Path(csv_dir) / 'levels.csv')}", err=True)
    elif csv_dir:
        click.echo("--csv: a sweep's levels only; for a run's calls, replay report RUN_FILE --csv DIR", err=True)
    if html_path:
        Path(html_path).write_text(page(doc, fmt, sweep_levels), encoding="utf-8")
        click.echo(f"wrote {html_path}", err=True)


def page(doc: dict[str, Any], fmt: str, sweep_levels: list | None) -> str:
    """The study's HTML page (needs matplotlib)."""
    from replay.reports.plots import PlotsUnavailable

    try:
        if fmt == "replay.sweep/1":
            from replay.reports.studies.sweep_page import sweep_page

            return sweep_page(doc)
        if fmt == "replay.capacity/1":
            from replay.reports.studies.sweep_page import capacity_page, tiers_page

            return tiers_page(doc) if doc.get("tiers") else capacity_page(doc)
        from replay.reports.studies.compare_page import compare_page

        return compare_page(doc, sweep_levels)
    except PlotsUnavailable as exc:
        raise click.ClickException(str(exc)) from None
