"""``replay export RUN|SWEEP --format llm-d|inferencex -o FILE``: a run's or a sweep's figures in another tool's format.

The figures are the summary's, rebuilt from the run file (or, for a sweep, from its index and run files) exactly as
``replay report`` rebuilds them; the writers (``replay/reports/llmd_report.py``, ``inferencex_export.py``) only
rename and arrange them. Nothing beyond the core install is needed (docs/reports.md).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import orjson

FORMATS = ("llm-d", "inferencex")


@click.command("export")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    required=True,
    help="llm-d: an llm-d Benchmark Report v0.2 (one per run; a sweep gives a list, one per level). inferencex: "
    "InferenceX's request_metrics (AgentX's aggregates: a run, or a sweep, made with --recipe agentx; a sweep gives "
    "one per level).",
)
@click.option(
    "-o", "--out", required=True, type=click.Path(dir_okay=False), help="The JSON file to write (- for stdout)."
)
def export(path: str, fmt: str, out: str) -> None:
    """Write a run's (or a sweep's) figures in llm-d's Benchmark Report or InferenceX's aggregate format."""
    from replay.reports.inferencex_export import ExportError

    try:
        doc = _exported(Path(path), fmt)
    except (ValueError, ExportError) as exc:  # a file that is no run or sweep, a run without the figures asked for
        raise click.ClickException(f"{path}: {exc}" if not str(exc).startswith(path) else str(exc)) from None
    data = orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"
    if out == "-":
        sys.stdout.buffer.write(data)
        return
    try:
        Path(out).write_bytes(data)
    except OSError as exc:
        raise click.ClickException(f"{out}: {exc.strerror}") from None
    click.echo(f"wrote {out}", err=True)


def _exported(path: Path, fmt: str) -> Any:
    from replay.reports.inferencex_export import inferencex, inferencex_sweep
    from replay.reports.llmd_report import llmd_report, llmd_sweep
    from replay.studies.study_files import index_format

    kind = index_format(path)
    if kind == "replay.sweep/1":
        from replay.studies.sweep import load_sweep

        sweep = load_sweep(path)
        levels = sweep.get("levels") or []
        if fmt == "llm-d":
            return llmd_sweep(levels, f"{path.resolve()}|{sweep.get('created')}")
        return inferencex_sweep(levels)
    if kind is not None:
        raise ValueError(f"a {kind} index: replay export takes a run file or a sweep's index")
    from replay.runner.rebuild import rebuild_run

    summary = rebuild_run(path).summary.to_dict()
    return llmd_report(summary) if fmt == "llm-d" else inferencex(summary)
