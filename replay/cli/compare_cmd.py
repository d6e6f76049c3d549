"""``replay compare A B``: two run files (or two sweeps) side by side, each difference judged against the noise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from replay.cli import run_options, study_options


@click.command()
@click.argument("a", type=click.Path(exists=True, dir_okay=False))
@click.argument("b", type=click.Path(exists=True, dir_okay=False))
@run_options.apply(study_options.HARDWARE)
@click.option(
    "--resamples",
    default=400,
    show_default=True,
    type=click.IntRange(50),
    help="Bootstrap resamples per run for the noise intervals.",
)
@click.option(
    "--seed", default=0, show_default=True, type=click.IntRange(0, (1 << 63) - 1), help="Seed of the bootstrap."
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="Also write the comparison's index here (replay report rebuilds it from A and B).",
)
@run_options.apply(study_options.OUTPUT)
def compare(a: str, b: str, resamples: int, seed: int, out: str | None, **opts: Any) -> None:
    """Compare two runs (or two sweeps): every headline figure side by side with its ratio and a noise verdict.

    A and B are run files, or sweep indexes (sweep.json) compared level by level. --gpus, --power-kw and
    --price-per-hour apply to both, or give them twice: A's, then B's.
    """
    from replay.studies.compare import compare_runs, compare_sweeps, side_from_file
    from replay.studies.side_by_side import inputs
    from replay.studies.study_files import index_format, write_json
    from replay.studies.sweep import load_sweep

    study_options.require_plots(opts)
    kinds = [index_format(p) for p in (a, b)]
    if kinds[0] != kinds[1] or kinds[0] not in (None, "replay.sweep/1"):
        raise click.UsageError("A and B must both be run files or both sweep indexes (sweep.json)")
    names = _names(a, b)
    try:
        if kinds[0] is None:
            hw = study_options.hardware_pair(opts)
            doc = compare_runs(side_from_file(a, names[0], hw[0]), side_from_file(b, names[1], hw[1]), resamples, seed)
            pairs = None
        else:
            sa, sb = load_sweep(a), load_sweep(b)
            doc = compare_sweeps(sa, sb, names, resamples, seed)
            pairs = [(sa["levels"], sb["levels"])]
    except study_options.user_errors() as exc:
        raise click.ClickException(str(exc)) from None
    if out:
        base = Path(out).parent
        rel = [study_options.relative_to(p, base) for p in (a, b)]
        write_json(Path(out), doc | {"inputs": inputs(list(names), rel)})
    _emit(doc, opts, pairs)


def _names(a: str, b: str) -> tuple[str, str]:
    """Short names for the two sides: their file names, or their directories' when the names are the same."""
    pa, pb = Path(a), Path(b)
    if pa.name != pb.name:
        return pa.stem, pb.stem
    return pa.parent.name or "A", pb.parent.name or "B"


def _emit(doc: dict[str, Any], opts: dict[str, Any], pairs: list | None) -> None:
    from replay.reports.studies.study_text import compare_text
    from replay.reports.text_report import to_json

    click.echo(to_json(doc) if opts["as_json"] else compare_text(doc))
    if opts.get("html_path"):
        from replay.reports.studies.compare_page import compare_page

        Path(opts["html_path"]).write_text(compare_page(doc, pairs), encoding="utf-8")
        click.echo(f"wrote {opts['html_path']}", err=True)
