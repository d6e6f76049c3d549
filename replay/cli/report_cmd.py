"""``replay report``: rebuild every figure of a run from its run file."""

from __future__ import annotations

import click


@click.command()
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
    from replay.results.metrics import summarize
    from replay.results.recorded_timeline import recorded_timeline
    from replay.results.records import read_run
    from replay.results.text_report import to_json, to_text
    from replay.results.truth_compare import compare, find_truth_log, load_truth

    try:
        data = read_run(run_file)
        summary = summarize(data)
        truth = truth_path or find_truth_log(run_file, data.header)
        if truth:
            summary["truth"] = compare(data.requests, load_truth(truth))
        if "breakdown" in summary:
            summary["breakdown"]["recorded_timeline"], _ = recorded_timeline(data, run_file)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(to_json(summary) if as_json else to_text(summary, data.header))
