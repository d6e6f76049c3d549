"""Command line: ``replay run | report | sweep | capacity | compare | claims | export | history | sim | probe | import |
inspect | synth | export-trajectories``, one module per command family."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from typing import Any

import click

from replay import __version__
from replay.cli.capacity_cmd import capacity
from replay.cli.claims_cmd import claims
from replay.cli.compare_cmd import compare
from replay.cli.export_cmd import export
from replay.cli.history_cmd import history
from replay.cli.probe_cmd import probe
from replay.cli.report_cmd import report
from replay.cli.run_cmd import run
from replay.cli.sim_cmd import sim
from replay.cli.sweep_cmd import sweep
from replay.cli.trajectories_cmd import export_trajectories
from replay.cli.workload_cmd import import_cmd, inspect_cmd, synth

_WHOLE = 10_000  # a short-help limit no one-line description reaches: click would cut at ~45 characters


class WholeHelpGroup(click.Group):
    """A group whose command list shows each command's whole one-line description (wrapped, never cut)."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=_WHOLE)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Click's main, with the documented exit codes: 1 for a usage or input error (click would say 2, which
        replay keeps for a breached threshold; see replay/verdict/judge.py)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            exc.show()
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=WholeHelpGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="replay")
def main() -> None:
    """Replay recorded coding-agent trajectories against an LLM host and measure how it serves them."""


for command in (run, report, sweep, capacity, compare, claims, export, sim, probe, import_cmd, inspect_cmd, synth,
                export_trajectories):  # fmt: skip
    main.add_command(command)
main.add_command(history)


def entry() -> None:
    """The console script (``replay``) and ``python -m replay``."""
    interruptible()
    main()


def interruptible() -> None:
    """Ctrl-C (SIGINT) stops a command the same way however it was started. A process started with SIGINT ignored
    (a script's background job, ``replay probe ... &``) kept ignoring it between a command's runs, while each run,
    which takes the signal for its graceful stop, answered it: a probe interrupted between two passes went on to its
    end and exited 0 (the CI rehearsal's probe Ctrl-C test, run in the background)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
