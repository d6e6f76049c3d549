"""``replay report``: rebuild every figure of a run from its run file, as text, JSON, HTML or CSV."""

from __future__ import annotations

from pathlib import Path

import click

from replay.cli.options import parse_duration


@click.command()
@click.argument("run_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--truth",
    "truth_path",
    type=click.Path(exists=True, dir_okay=False),
    help="A simulated host's truth log to compare with (default: the one the run file names, if present).",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, writable=True),
    help="Also write a self-contained HTML report (figures and pictures) to this file (needs the 'plots' extra).",
)
@click.option(
    "--csv",
    "csv_dir",
    type=click.Path(file_okay=False, writable=True),
    help="Also write requests.csv (one row per call) and summary.csv (one row per figure) into this directory.",
)
@click.option("--from", "from_", help="Summarise only the windows from this long after the start (e.g. 2h).")
@click.option("--to", "to", help="... up to this long after the start (e.g. 3h).")
@click.option(
    "--slo",
    multiple=True,
    metavar="EXPR",
    help="Judge goodput at this per-call SLO instead of the run's own --slo, e.g. 'ttft<=2s,user_decode_tps>=30'.",
)
def report(
    run_file: str,
    as_json: bool,
    truth_path: str | None,
    html_path: str | None,
    csv_dir: str | None,
    from_: str | None,
    to: str | None,
    slo: tuple[str, ...],
) -> None:
    """Rebuild every figure of a run from its run file (and the simulated host's truth log, if any).

    RUN_FILE may also be a study's index (sweep.json, capacity.json, compare.json): its figures are rebuilt from
    the run files it names.
    """
    from replay.reports.plots import PlotsUnavailable, require_matplotlib
    from replay.studies.study_files import index_format

    if html_path:  # before any work: a missing extra is a one-line error, not a traceback or a report cut short
        try:
            require_matplotlib()
        except PlotsUnavailable as exc:
            raise click.ClickException(str(exc)) from None
    if fmt := index_format(run_file):  # a sweep's, a capacity search's or a comparison's index
        from replay.cli.study_report import report_index

        if slo:
            raise click.UsageError("--slo re-judges one run file, not a study's index (give --slo to the study)")
        return report_index(run_file, fmt, as_json, html_path, csv_dir)
    from replay.metrics.goodput import SloError, parse_slo
    from replay.reports.text_report import to_json, to_text
    from replay.runner.rebuild import rebuild_run

    try:
        call_slo = parse_slo(slo)
    except SloError as exc:
        raise click.BadParameter(str(exc), param_hint="--slo") from None
    between = None
    if from_ is not None or to is not None:
        between = (parse_duration(from_), parse_duration(to))
    try:
        built = rebuild_run(run_file, truth_path, records=bool(html_path or csv_dir), between=between, slo=call_slo)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    summary, data = built.summary.to_dict(), built.data
    click.echo(to_json(summary) if as_json else to_text(summary, data.header))
    try:
        if csv_dir:
            from replay.reports.csv_export import write_csv

            written = write_csv(data, summary, csv_dir)
            click.echo(f"wrote {', '.join(map(str, written))}", err=True)
        if html_path:
            from replay.reports.html_report import render
            from replay.reports.report_input import RunReport

            page = render(RunReport(data, summary, built.drift, Path(run_file).name))
            Path(html_path).write_text(page, encoding="utf-8")
            click.echo(f"wrote {html_path}", err=True)
    except OSError as exc:
        raise click.ClickException(f"{exc.filename}: {exc.strerror}") from None
