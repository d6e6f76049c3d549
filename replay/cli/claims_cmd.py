"""``replay claims verify CLAIMS.toml``: published performance claims, each run, converted and judged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from replay.cli import run_options, study_options
from replay.cli.options import parse_duration


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def claims() -> None:
    """Check published performance claims (tokens per minute at N conversations, speeds per user) against a host."""


@claims.command()
@click.argument("claims_file", type=click.Path(exists=True, dir_okay=False))
@click.argument("trajectories", nargs=-1, type=click.Path())
@click.option("--window", help="Steady window of each run (default: the file's [verify] window, else 60s).")
@click.option("--warmup", help="Warm-up of each run (default: the file's [verify] warmup, else 20s).")
@run_options.apply(run_options.HOST, run_options.PACE, run_options.RETRY, run_options.REQUEST, run_options.SIM)
@run_options.apply(study_options.HARDWARE, study_options.VIRTUAL)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    help="Directory for the run files (one per concurrency the claims need). Default: replay-runs/claims-<time>/",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON instead of a table.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
def verify(claims_file: str, trajectories: tuple[str, ...], **opts: Any) -> None:
    """Run what each claim in CLAIMS_FILE needs (one run per concurrency, shared), convert, and judge each claim.

    Prints claimed, measured, ratio and pass or fail at each claim's tolerance, and the conditions (hardware, model,
    workload, output length) the host could not be shown to match.
    """
    from replay.cli.applies import refuse_inapplicable
    from replay.studies.claims import ClaimsError, load_claims
    from replay.studies.claims_verify import report
    from replay.studies.claims_verify import verify as verify_claims

    refuse_inapplicable("claims")
    try:
        defaults, claim_list = load_claims(claims_file)
    except ClaimsError as exc:
        raise click.ClickException(str(exc)) from None
    targets = study_options.targets(opts, trajectories)
    if len(targets) > 1:
        raise click.BadParameter("one host per verification", param_hint="--host")
    t = targets[0]
    opts["window"] = _duration(opts["window"], defaults.window_s, 60.0, "--window")
    opts["warmup"] = _duration(opts["warmup"], defaults.warmup_s, 20.0, "--warmup")
    try:
        workload = study_options.load_spec_workload(t.spec)
        runner = study_options.runner(opts, t.spec, study_options.out_dir(opts, "claims"), workload)
        rows, levels = verify_claims(claim_list, defaults, runner, facts := _facts(t, workload), _seen(opts))
    except study_options.user_errors() as exc:
        raise click.ClickException(str(exc)) from None
    doc = report(claims_file, facts, study_options.mode(opts), rows, levels)
    from replay.reports.studies.study_text import claims_text
    from replay.reports.text_report import to_json

    click.echo(study_options.scrubbed(to_json(doc) if opts["as_json"] else claims_text(doc), targets))


def _duration(given: str | None, from_file: float | None, default: float, option: str) -> str:
    if given is not None:
        try:
            parse_duration(given)
        except click.BadParameter as exc:
            raise click.BadParameter(exc.message, param_hint=option) from None
        return given
    return str(from_file if from_file is not None else default)


def _seen(opts: dict[str, Any]) -> Any:
    def seen(level: Any) -> None:
        if not opts["quiet"]:
            click.echo(f"ran {level.concurrency} agents" + (f": {level.run}" if level.run else ""), err=True)

    return seen


def _facts(t: Any, workload: Any) -> Any:
    from replay.studies.claims_verify import HostFacts

    description, model = None, t.spec.model
    if t.spec.host is None:
        from replay.sim.core.profiles import PROFILES

        profile = PROFILES.get(t.spec.sim_profile)
        description = profile.description if profile else None
    names, mean_out, fingerprint = "", None, ""
    if workload is not None:
        fingerprint = workload.fingerprint
        names = ", ".join(Path(p).name for p in workload.paths)
        outs = [turn.output_tokens for traj in workload.trajectories for turn in traj.turns]
        mean_out = sum(outs) / len(outs) if outs else None
    return HostFacts(t.label, t.hardware, description, model, names, mean_out, fingerprint)
