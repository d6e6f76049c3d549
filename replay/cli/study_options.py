"""Options the studies share (``sweep``, ``capacity``, ``claims verify``, ``compare``): the levels and their window,
the hardware behind the figures per GPU, kW and dollar, the virtual clock, and where the outputs go.

The run options themselves (host, request, pace, sim) come from ``replay.cli.run_options``, so a study's levels
are the same runs ``replay run`` makes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from replay.cli import run_specs
from replay.cli.options import parse_duration

STUDY_ONLY = ("window", "warmup")  # a study's own: each level's steady window and warm-up (RealRunner sets them)

WINDOW = [
    click.option("--window", default="60s", show_default=True, help="Steady window of each level (after warm-up)."),
    click.option("--warmup", default="20s", show_default=True, help="Warm-up of each level, before its window."),
]

HARDWARE = [
    click.option(
        "--gpus",
        type=click.IntRange(1),
        multiple=True,
        help="GPUs of the host, for the figures per GPU (default for the embedded simulated host: its profile's). "
        "Repeat it in --host order for several hosts.",
    ),
    click.option(
        "--power-kw",
        type=click.FloatRange(0, min_open=True),
        multiple=True,
        help="Accelerator power of the host in kW (the GPUs' board power, not the datacentre's), for the figures "
        "per kW and per MW. Repeat it in --host order for several hosts.",
    ),
    click.option(
        "--price-per-hour",
        type=click.FloatRange(0, min_open=True),
        multiple=True,
        help="What the host costs per hour in USD, for the cost per task and per million tokens. Repeat it in "
        "--host order for several hosts.",
    ),
]

VIRTUAL = [
    click.option(
        "--virtual",
        is_flag=True,
        help="Run each level on a virtual clock instead: the same sessions, run files and figures, with the "
        "simulated engine in this process and no HTTP (seconds per level). Needs the embedded simulated host (no "
        "--host URL).",
    ),
]

SIDE_BY_SIDE = [
    click.option(
        "--hosts-at-once",
        is_flag=True,
        help="With several --host: replay against all of them at the same time (they share the client's CPU; the "
        "output says so) instead of one after the other.",
    ),
]

OUTPUT = [
    click.option("--json", "as_json", is_flag=True, help="Print the result as JSON instead of a table."),
    click.option(
        "--html",
        "html_path",
        type=click.Path(dir_okay=False, writable=True),
        help="Also write a self-contained HTML page of the result (needs the 'plots' extra).",
    ),
    click.option("-q", "--quiet", is_flag=True, help="No progress lines."),
]


def parse_levels(text: str) -> list[int]:
    """'1,2,4,8' or '1..8' or a mix ('1..4,8,16'): distinct concurrency levels, in increasing order."""
    levels: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)\s*(?:\.\.|-)\s*(\d+)", part)
        if m and 1 <= int(m.group(1)) <= int(m.group(2)):
            levels.update(range(int(m.group(1)), int(m.group(2)) + 1))
        elif part.isdigit() and int(part) >= 1:
            levels.add(int(part))
        else:
            raise click.BadParameter(f"{part!r}: expected levels like 1,2,4,8 or 1..8 (each >= 1)", param_hint="-c")
    return sorted(levels)


def seconds(opts: dict[str, Any], name: str) -> float:
    try:
        value = parse_duration(opts[name])
    except click.BadParameter as exc:
        raise click.BadParameter(exc.message, param_hint=f"--{name}") from None
    if not value:
        raise click.BadParameter("must be above 0", param_hint=f"--{name}")
    return value


def _nth(values: tuple[Any, ...], i: int, hosts: int, option: str) -> Any:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    if len(values) != hosts:
        raise click.BadParameter(
            f"given {len(values)} times for {hosts} hosts: once, or once per --host", param_hint=option
        )
    return values[i]


def hardware(opts: dict[str, Any], specs: list[Any]) -> list[Any]:
    """The hardware of each spec's host: the options, else its hosts-file table's or its sim profile's."""
    from replay.hosts.hardware import hardware_for
    from replay.hosts.resolve import HostError

    n = len(specs)
    out = []
    for i, s in enumerate(specs):
        try:
            out.append(
                hardware_for(
                    s,
                    _nth(opts.get("gpus", ()), i, n, "--gpus"),
                    _nth(opts.get("power_kw", ()), i, n, "--power-kw"),
                    _nth(opts.get("price_per_hour", ()), i, n, "--price-per-hour"),
                )
            )
        except HostError as exc:
            raise click.ClickException(str(exc)) from None
    return out


def targets(opts: dict[str, Any], trajectories: tuple[str, ...]) -> list[Any]:
    """One ``Target`` per ``--host`` (label, spec, hardware): the same workload, load and seed for each."""
    from replay.runner.single_run import RunError, check_spec
    from replay.studies.side_by_side import Target

    run_opts = {k: v for k, v in opts.items() if k not in STUDY_ONLY}  # a level's stop and window are the study's
    specs = run_specs.specs_from(run_opts, trajectories)
    try:
        for spec in specs:  # before the workload is read or a level runs: a bad host or option is one line
            check_spec(spec)
    except RunError as exc:
        raise click.ClickException(str(exc)) from None
    # as every output names a host (progress lines, the study's index): a key in a --host's path scrubbed
    labels = [scrubbed_by(run_specs.host_label(h, opts), specs) for h in run_specs.host_values(opts)]
    hws = hardware(opts, specs)
    specs = [with_hardware(s, hw) for s, hw in zip(specs, hws, strict=True)]
    return [Target(lab, s, hw) for lab, s, hw in zip(labels, specs, hws, strict=True)]


def with_hardware(spec: Any, hw: Any) -> Any:
    """``spec`` whose runs record its host's hardware (their summaries' figures per GPU and MW, and hourly cost)."""
    import dataclasses

    facts = dataclasses.replace(spec.recipe_facts, gpus=hw.gpus, power_kw=hw.power_kw, price_per_hour=hw.price_per_hour)
    return dataclasses.replace(spec, recipe_facts=facts)


def split_slo(slo: tuple[str, ...], targets: list[Any]) -> tuple[str, ...]:
    """A study's ``--slo``: its per-call terms (``ttft<=2s``, ``user_decode_tps>=30``) become every level's goodput
    SLO (set on each target's spec); the rest (``ttft_p95<=2s``, ``goodput.calls_met_share>=90%``) are returned, the
    thresholds each level is judged by."""
    from replay.expressions import split_terms
    from replay.metrics.goodput import SloError, is_call_term, parse_slo

    terms = split_terms(slo)
    call = [t for t in terms if is_call_term(t)]
    try:
        parse_slo(call)
    except SloError as exc:
        raise click.BadParameter(str(exc), param_hint="--slo") from None
    rest = tuple(t for t in terms if not is_call_term(t))
    if not call and any(t.startswith("goodput.") for t in rest):
        raise click.BadParameter("goodput is counted against a per-call SLO: add its terms, e.g. 'ttft<=2s,"
                                 "user_decode_tps>=30'", param_hint="--slo")  # fmt: skip
    for t in targets:
        t.spec.slo = call
    return rest


def load_spec_workload(spec: Any) -> Any:
    """The workload a spec names (the shipped one by default), loaded and counted once."""
    from replay.runner.single_run import load_run_workload

    return load_run_workload(spec)


def runner(opts: dict[str, Any], spec: Any, out_dir: Path, workload: Any = None) -> Any:
    """The level runner the options ask for: ``replay run`` per level, or the virtual clock (``--virtual``)."""
    from replay.runner.run_error import RunError
    from replay.runner.virtual_run import check_virtual
    from replay.studies.levels import RealRunner, VirtualRunner

    window, warmup = seconds(opts, "window"), seconds(opts, "warmup")
    if opts.get("virtual") and spec.host:
        raise click.BadParameter("the virtual clock drives the simulated engine: no --host URL", param_hint="--virtual")
    workload = workload or load_spec_workload(spec)
    if not opts.get("virtual"):
        spec.progress = not opts.get("quiet")
        return RealRunner(spec, out_dir, window, warmup, workload=workload)
    try:
        check_virtual(spec)
    except RunError as exc:
        raise click.BadParameter(str(exc), param_hint="--virtual") from None
    return VirtualRunner(spec, out_dir, window, warmup, workload=workload)


def out_dir(opts: dict[str, Any], kind: str) -> Path:
    """``--out DIR``, or replay-runs/KIND-<time>/."""
    given = opts.get("out")
    return Path(given) if given else Path("replay-runs") / f"{kind}-{datetime.now():%Y%m%d-%H%M%S}"


def mode(opts: dict[str, Any]) -> str:
    from replay.studies.levels import REAL_MODE, VIRTUAL_MODE

    return VIRTUAL_MODE if opts.get("virtual") else REAL_MODE


def require_plots(opts: dict[str, Any]) -> None:
    """Stop before any run when --html is asked and matplotlib is missing (one line, not a traceback later)."""
    if opts.get("html_path"):
        from replay.reports.plots import PlotsUnavailable, require_matplotlib

        try:
            require_matplotlib()
        except PlotsUnavailable as exc:
            raise click.ClickException(str(exc)) from None


def command_line(specs: Sequence[Any] = ()) -> str:
    """The command as typed, for the study's index: ``specs``' keys scrubbed (one in a --host's path, say)."""
    import shlex
    import sys

    return scrubbed_by("replay " + " ".join(shlex.quote(a) for a in sys.argv[1:]), list(specs))


def user_errors() -> tuple[type[Exception], ...]:
    """What a study stops on with one line: a bad workload, a host that cannot be run, a bad file or value."""
    from replay.runner.single_run import RunError
    from replay.workload.trajectory import TrajectoryError

    return (TrajectoryError, RunError, ValueError, OSError)


def hardware_pair(opts: dict[str, Any]) -> list[Any]:
    """Two sides' hardware from the options (once for both, or twice: A's then B's); nothing is assumed."""
    from replay.hosts.hardware import Hardware

    keys = ("gpus", "power_kw", "price_per_hour")
    options = ("--gpus", "--power-kw", "--price-per-hour")
    values = [[_nth(opts.get(k, ()), i, 2, o) for k, o in zip(keys, options, strict=True)] for i in range(2)]
    if not any(v is not None for side in values for v in side):
        return [None, None]  # each side's own (a sim profile's GPUs)
    return [Hardware(*side) for side in values]


def relative_to(path: str | Path, base: Path) -> str:
    """``path`` as an index beside ``base`` should name it."""
    from replay.studies.study_files import relative

    return relative(Path(path), base)


def scrubbed(text: str, targets: list[Any]) -> str:
    """``text`` with every host's API key scrubbed: the last guard before the screen, as ``replay run`` has."""
    return scrubbed_by(text, [t.spec for t in targets])


def scrubbed_by(text: str, specs: list[Any]) -> str:
    """``text`` with the API key (and secret headers) of every one of ``specs`` scrubbed."""
    import os

    from replay.records.scrub import Scrubber, header_secrets

    keys = {key for spec in specs if (key := os.environ.get(spec.api_key_env))}
    keys |= {value for spec in specs for value in header_secrets(spec.headers)}
    return Scrubber(sorted(keys)).text(text) if keys else text
