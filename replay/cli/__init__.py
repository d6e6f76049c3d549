"""Command line: ``replay run | report | sim | import | inspect | synth``, one module per command family."""

from __future__ import annotations

import click

from replay import __version__
from replay.cli.report_cmd import report
from replay.cli.run_cmd import run
from replay.cli.sim_cmd import sim
from replay.cli.workload_cmd import import_cmd, inspect_cmd, synth


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="replay")
def main() -> None:
    """Replay recorded coding-agent trajectories against an LLM host and measure how it serves them."""


for command in (run, report, sim, import_cmd, inspect_cmd, synth):
    main.add_command(command)
