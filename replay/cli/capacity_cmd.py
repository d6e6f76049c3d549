"""``replay capacity --slo ...``: the most concurrent agents a host serves within an SLO, by an adaptive search."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from replay.cli import run_options, study_options


@click.command()
@click.argument("trajectories", nargs=-1, type=click.Path())
@click.option(
    "--slo",
    multiple=True,
    help="The tier every level must meet, e.g. 'ttft_p95<=2s,user_decode_tps_p25>=60' (FIGURE OP VALUE, any summary "
    "figure; repeat or comma-separate); per-call terms ('ttft<=2s,user_decode_tps>=30') are each level's goodput SLO, "
    "judged by a figure such as 'goodput.calls_met_share>=90%'.",
)
@click.option(
    "--tier",
    "tiers",
    multiple=True,
    metavar="NAME:TTFT:SPEED",
    help="An SLO tier (AA-AgentPerf's shape: TTFT p75 within TTFT, per-user decode speed p25 at least SPEED tok/s), "
    "e.g. fast:2s:60; repeat it for several, all found in one search that reuses levels between tiers; 'aa' is "
    "replay's AA-AgentPerf tiers (20tps:10:20, 60tps:5:60, 100tps:3:100, 180tps:2:180). Instead of --slo.",
)
@click.option("--max", "limit", default=256, show_default=True, type=click.IntRange(1), help="Largest level tried.")
@click.option("--start", default=1, show_default=True, type=click.IntRange(1), help="First level tried.")
@click.option(
    "--grow",
    default=2.0,
    show_default=True,
    type=click.FloatRange(1, min_open=True),
    help="Factor the level grows by until the SLO breaks (then the search bisects).",
)
@click.option(
    "--repeats",
    default=1,
    show_default=True,
    type=click.IntRange(0),
    help="Times the boundary level is run again; a repeat that breaks moves the answer down.",
)
@run_options.apply(study_options.WINDOW)
@run_options.apply(run_options.HOST, run_options.PACE, run_options.RETRY, run_options.REQUEST, run_options.SIM)
@run_options.apply(study_options.HARDWARE, study_options.VIRTUAL)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    help="Directory for the probes' run files and capacity.json. Default: replay-runs/capacity-<time>/",
)
@run_options.apply(study_options.OUTPUT)
def capacity(
    trajectories: tuple[str, ...], slo: tuple[str, ...], tiers: tuple[str, ...], limit: int, start: int, **opts: Any
) -> None:
    """Find the largest number of concurrent agents that meets an SLO (or each of several tiers), by growing then
    bisecting.

    Each probe is one run (a warm-up, then a steady window); the boundary level is repeated. The answer is also
    given per GPU, per kW and per MW of accelerator power, and per dollar-hour, where those are known. With
    several --tier, one search finds each tier's answer, running each level once for all of them.
    """
    from replay.cli.applies import refuse_inapplicable
    from replay.studies.capacity import CapacityPlan, result, search, write_index
    from replay.verdict.thresholds import ThresholdError, parse_all

    refuse_inapplicable("capacity")
    study_options.require_plots(opts)
    targets = study_options.targets(opts, trajectories)
    if len(targets) > 1:
        raise click.BadParameter("one host per capacity search", param_hint="--host")
    if bool(slo) == bool(tiers):
        raise click.UsageError("give --slo or --tier (one or more), not both")
    if tiers:
        return _tiers(trajectories, tiers, limit, start, targets[0], opts)
    slo = study_options.split_slo(slo, targets)
    if not slo:
        raise click.BadParameter("per-call terms alone judge no level: add a summary figure, e.g. "
                                 "'goodput.calls_met_share>=90%'", param_hint="--slo")  # fmt: skip
    try:
        thresholds = tuple(parse_all(slo))
    except ThresholdError as exc:
        raise click.BadParameter(str(exc), param_hint="--slo") from None
    t = targets[0]
    base = study_options.out_dir(opts, "capacity")
    plan = CapacityPlan(
        tuple(x.expr for x in thresholds),
        study_options.seconds(opts, "window"),
        study_options.seconds(opts, "warmup"),
        t.label,
        start,
        limit,
        opts["grow"],
        0 if opts.get("virtual") else opts["repeats"],  # deterministic: a repeat would be the same run
        study_options.mode(opts),
        t.hardware,
        study_options.command_line([t.spec]),
        tuple(t.spec.slo),
    )
    public = plan.public()
    index = base / "capacity.json"

    def seen(probes: list) -> None:
        write_index(index, public, probes)
        if not opts["quiet"]:
            p = probes[-1]
            figures = ", ".join(f"{c['figure']} {c['value']:.4g}" for c in p.checks if c["value"] is not None)
            verdict = "held" if p.ok else "broke"
            click.echo(f"probe {len(probes)}: {p.level.concurrency} agents ({p.step}) {verdict}: {figures}", err=True)

    stops: tuple[type[Exception], ...] = (ThresholdError, *study_options.user_errors())
    try:
        probes = search(study_options.runner(opts, t.spec, base), thresholds, plan, seen)
    except KeyboardInterrupt:
        click.echo(f"\ninterrupted: {index} has the probes finished so far", err=True)
        sys.exit(130)
    except stops as exc:
        raise click.ClickException(str(exc)) from None
    _emit(result(public, probes), opts, index, targets)


def _tiers(trajectories: tuple[str, ...], texts: tuple[str, ...], limit: int, start: int, t: Any, opts: Any) -> None:
    """Every tier's capacity in one search (replay.studies.tiers)."""
    from replay.studies.capacity import CapacityPlan
    from replay.studies.tiers import parse_tiers, search_tiers, tiers_result, write_tiers_index

    try:
        tiers = parse_tiers(texts)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--tier") from None
    base = study_options.out_dir(opts, "capacity")
    plan = CapacityPlan((), study_options.seconds(opts, "window"), study_options.seconds(opts, "warmup"), t.label,
                        start, limit, opts["grow"], 0 if opts.get("virtual") else opts["repeats"],
                        study_options.mode(opts), t.hardware, study_options.command_line([t.spec]), (),
                        tuple(x.public() for x in tiers))  # fmt: skip
    public = plan.public()
    index = base / "capacity.json"
    ran_so_far: list = []

    def seen(tier: Any, probes: list, ran: bool) -> None:
        if ran:
            ran_so_far.append(probes[-1].level)
            write_tiers_index(index, public, ran_so_far)
        if not opts["quiet"]:
            p = probes[-1]
            how = f"run {len(ran_so_far)}" if ran else "reused"
            verdict = "held" if p.ok else "broke"
            click.echo(f"tier {tier.name}: {p.level.concurrency} agents ({p.step}, {how}) {verdict}", err=True)

    try:
        per_tier, ran = search_tiers(study_options.runner(opts, t.spec, base), tiers, plan, seen)
    except KeyboardInterrupt:
        click.echo(f"\ninterrupted: {index} has the levels finished so far", err=True)
        sys.exit(130)
    except study_options.user_errors() as exc:
        raise click.ClickException(str(exc)) from None
    _emit(tiers_result(public, per_tier, ran), opts, index, [t])


def _emit(doc: dict[str, Any], opts: dict[str, Any], index: Path, targets: list) -> None:
    from replay.reports.studies.study_text import capacity_text, tiers_text
    from replay.reports.text_report import to_json

    text = to_json(doc) if opts["as_json"] else tiers_text(doc) if doc.get("tiers") else capacity_text(doc)
    click.echo(study_options.scrubbed(text, targets))
    if opts.get("html_path"):
        from replay.reports.studies.sweep_page import capacity_page, tiers_page

        page = tiers_page(doc) if doc.get("tiers") else capacity_page(doc)
        Path(opts["html_path"]).write_text(page, encoding="utf-8")
        click.echo(f"wrote {opts['html_path']}", err=True)
    if not opts["quiet"]:
        click.echo(f"index: {index}  (replay report {index})", err=True)
