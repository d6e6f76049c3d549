"""``replay sweep``: the same workload at a list of concurrency levels, one run each; the table, knee and frontier."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from replay.cli import recipe_options, run_options, study_options


def _progress(level: Any, label: str, quiet: bool) -> None:
    if quiet:
        return
    from replay.metrics.level_figures import value
    from replay.reports.studies.study_text import fmt

    s = level.summary
    click.echo(
        f"{label} c={level.concurrency}: total {fmt(value(s, 'throughput.total_tps'), 'tok/s')} tok/s, TTFT p95"
        f" {fmt(value(s, 'ttft_s.p95'), 's')}, decode p25 {fmt(value(s, 'user_decode_tps.p25'), 'tok/s')} tok/s"
        + (f"  ({level.run})" if level.run else ""),
        err=True,
    )


@click.command()
@click.argument("trajectories", nargs=-1, type=click.Path())
@click.option(
    "-c",
    "--concurrency",
    "levels",
    default="1,2,4,8,16",
    show_default=True,
    help="Concurrency levels: 1,2,4,8 or 1..8 or a mix (1..4,8,16).",
)
@run_options.apply(study_options.WINDOW)
@click.option(
    "--knee",
    default="growth:10%",
    show_default=True,
    help="How the knee is found: growth:F (the smallest level from which no higher level gains F more throughput "
    "per doubling of sessions) or slo (the last level before the --slo breaks).",
)
@click.option(
    "--slo",
    multiple=True,
    help="SLO thresholds judged at every level, e.g. 'ttft_p95<=2s,user_decode_tps_p25>=60'; per-call terms "
    "('ttft<=2s,user_decode_tps>=30') are each level's goodput SLO (its summary's goodput, which a threshold such "
    "as 'goodput.calls_met_share>=90%' can judge).",
)
@click.option(
    "--frontier-x",
    default="user_decode_tps_p25",
    show_default=True,
    help="The per-user speed the Pareto frontier is drawn on (y: total tokens/s per GPU): user_decode_tps_p25, "
    "interactivity_e2e_p90 (InferenceX AgentX's x), interactivity_e2e_p75, interactivity_p90, ...",
)
@run_options.apply(run_options.HOST, run_options.PACE, run_options.RETRY, run_options.REQUEST, run_options.SIM)
@run_options.apply(recipe_options.RULES)
@run_options.apply(study_options.HARDWARE, study_options.VIRTUAL, study_options.SIDE_BY_SIDE)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    help="Directory for the run files and sweep.json (several hosts: a directory each, and compare.json). "
    "Default: replay-runs/sweep-<time>/",
)
@click.option("--csv", "csv_dir", type=click.Path(file_okay=False), help="Also write levels.csv (one row per level).")
@run_options.apply(study_options.OUTPUT)
def sweep(
    trajectories: tuple[str, ...], levels: str, knee: str, slo: tuple[str, ...], frontier_x: str, **opts: Any
) -> None:
    """Replay the workload at each concurrency level in turn; the table, the curves, the knee and the frontier.

    Each level is one run: a warm-up, then a steady window of stated length. One run file per level and a sweep
    index (sweep.json) go into --out; `replay report DIR/sweep.json` rebuilds every figure from them. With
    --recipe, each level is that recipe's run (agentx: its own warm-up, then --window counted from its barrier).
    """
    from replay.cli.applies import refuse_inapplicable
    from replay.studies.frontier import Axis, FrontierError
    from replay.studies.knee import parse_rule
    from replay.studies.side_by_side import AT_ONCE, ONE_AFTER_ANOTHER, hosts_sweeps, inputs, run_all, slug
    from replay.studies.study_files import write_json
    from replay.studies.sweep import SweepPlan, run_sweep
    from replay.verdict.thresholds import ThresholdError, parse_all

    refuse_inapplicable("sweep")
    study_options.require_plots(opts)
    concurrency = study_options.parse_levels(levels)
    targets = study_options.targets(opts, trajectories)
    slo = study_options.split_slo(slo, targets)
    try:
        parse_rule(knee, tuple(parse_all(slo)))
    except ThresholdError as exc:
        raise click.BadParameter(str(exc), param_hint="--slo") from None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--knee") from None
    try:
        Axis.parse(frontier_x)
    except FrontierError as exc:
        raise click.BadParameter(str(exc), param_hint="--frontier-x") from None
    base = study_options.out_dir(opts, "sweep")
    several = len(targets) > 1
    window, warmup = study_options.seconds(opts, "window"), study_options.seconds(opts, "warmup")

    def one(i_target: tuple[int, Any]) -> dict[str, Any]:
        i, t = i_target
        out = base / slug(t.label, i) if several else base
        runner = study_options.runner(opts, t.spec, out)
        plan = SweepPlan(concurrency, window, None if runner.barrier else warmup, t.label, study_options.mode(opts),
                         t.hardware, knee, slo, study_options.command_line([t.spec]), frontier_x, tuple(t.spec.slo),
                         t.spec.recipe, t.spec.load.lanes.warmup_per_lane if runner.barrier else None)  # fmt: skip
        return run_sweep(plan, runner, out / "sweep.json", lambda lv: _progress(lv, t.label, opts["quiet"]))

    try:
        results = run_all(list(enumerate(targets)), one, opts["hosts_at_once"])
    except KeyboardInterrupt:
        click.echo(f"\ninterrupted: {base} has the levels finished so far (replay report {base}/sweep.json)", err=True)
        sys.exit(130)
    except study_options.user_errors() as exc:
        raise click.ClickException(str(exc)) from None
    if several:
        mode = AT_ONCE if opts["hosts_at_once"] else ONE_AFTER_ANOTHER
        labels = [t.label for t in targets]
        doc = hosts_sweeps(labels, results, mode)
        doc["inputs"] = inputs(labels, [Path(slug(t.label, i)) / "sweep.json" for i, t in enumerate(targets)])
        write_json(base / "compare.json", doc)
        _emit(doc, opts, [r["levels"] for r in results], base / "compare.json", targets)
    else:
        _emit(results[0], opts, None, base / "sweep.json", targets)
    if opts.get("csv_dir"):
        from replay.reports.studies.study_csv import write_levels_csv

        for i, (t, r) in enumerate(zip(targets, results, strict=True)):
            name = f"levels-{slug(t.label, i)}.csv" if several else "levels.csv"
            click.echo(f"wrote {write_levels_csv(r, Path(opts['csv_dir']) / name)}", err=True)


def _emit(doc: dict[str, Any], opts: dict[str, Any], host_levels: list | None, index: Path, targets: list) -> None:
    from replay.reports.studies.study_text import hosts_text, sweep_text
    from replay.reports.text_report import to_json

    text = to_json(doc) if opts["as_json"] else (hosts_text(doc) if host_levels is not None else sweep_text(doc))
    click.echo(study_options.scrubbed(text, targets))
    if opts.get("html_path"):
        if host_levels is None:
            from replay.reports.studies.sweep_page import sweep_page

            page = sweep_page(doc)
        else:
            from replay.reports.studies.compare_page import compare_page

            page = compare_page(doc, [(host_levels[0], lv) for lv in host_levels[1:]])
        Path(opts["html_path"]).write_text(page, encoding="utf-8")
        click.echo(f"wrote {opts['html_path']}", err=True)
    if not opts["quiet"]:
        click.echo(f"index: {index}  (replay report {index})", err=True)
