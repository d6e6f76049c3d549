"""``replay run --host A --host B ...``: the same seeded workload against each host, then one comparison."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click

from replay.cli import study_options


def run_hosts(trajectories: tuple[str, ...], out: str | None, as_json: bool, quiet: bool, opts: dict[str, Any]) -> None:
    """One run per host (run files ``OUT.<n>-<host>.jsonl``), the comparison in ``OUT.compare.json``, printed."""
    from replay.reports.studies.study_text import hosts_text
    from replay.reports.text_report import to_json
    from replay.runner.single_run import default_out_path, execute
    from replay.studies.side_by_side import AT_ONCE, ONE_AFTER_ANOTHER, hosts_runs, inputs, run_all, slug
    from replay.studies.study_files import write_json

    targets = study_options.targets(opts, trajectories)
    base = Path(out) if out else default_out_path()
    paths = [base.with_name(f"{base.stem}.{slug(t.label, i)}.jsonl") for i, t in enumerate(targets)]
    for t, p in zip(targets, paths, strict=True):  # each host's truth log (a sim's) beside its own run file
        t.spec.out, t.spec.progress, t.spec.sim_truth_log = str(p), not quiet, None
    agree(targets)
    at_once = opts["hosts_at_once"]
    if not quiet:
        click.echo(f"replay: {opts['concurrency']} sessions against {len(targets)} hosts, "
                   f"{AT_ONCE if at_once else ONE_AFTER_ANOTHER}", err=True)  # fmt: skip
    try:
        results = run_all(targets, lambda t: execute(t.spec), at_once)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP outside a loop's own handling: its own exit code
        from replay.runner.run_error import stopped_by

        name, written = stopped_by(exc), [str(p) for p in paths if p.exists()]
        said = f"every finished request is in {', '.join(written)}" if written else "before a run started: no run file"
        click.echo(f"\ninterrupted ({name}): {said}", err=True)
        sys.exit(128 + int(getattr(signal, name, signal.SIGINT)))
    except study_options.user_errors() as exc:
        raise click.ClickException(str(exc)) from None
    from replay.studies.compare import side_from_file

    sides = [side_from_file(p, t.label, t.hardware) for t, p in zip(targets, paths, strict=True)]
    doc = hosts_runs(sides, AT_ONCE if at_once else ONE_AFTER_ANOTHER)
    index = base.with_name(f"{base.stem}.compare.json")
    names = [p.name for p in paths]
    write_json(index, doc | {"inputs": inputs([t.label for t in targets], names, [t.hardware for t in targets])})
    click.echo(study_options.scrubbed(to_json(doc) if as_json else hosts_text(doc), targets))
    if not quiet:
        click.echo(f"run files: {', '.join(map(str, paths))}; comparison: {index} (replay report {index})", err=True)
    sys.exit(max(r.exit_code for r in results))  # the worst run's verdict (replay.verdict.judge)


def agree(targets: list[Any]) -> None:
    """So that the hosts' answers can be compared (replay.metrics.agreement): every host gets the same prompts (one
    nonce in the run's tags for all: hosts never share a cache) and each run keeps its answers' text, unless the
    answer checks are off."""
    import dataclasses
    import uuid

    if any(t.spec.check_answers is False for t in targets):
        return
    nonce = uuid.uuid4().hex[:12]
    for t in targets:
        t.spec.keep_answers = True
        t.spec.load = dataclasses.replace(t.spec.load, salt_nonce=nonce)
