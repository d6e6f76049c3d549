"""``replay probe``: measure a host for a few minutes and write a profile file for its simulated twin."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from replay.cli import run_options, run_specs
from replay.cli.options import parse_bytes, parse_duration

if TYPE_CHECKING:
    from replay.runner.run_spec import RunSpec

_HELP = """Probe a host for a few minutes and write a profile file for its simulated twin.

The probe replays short passes shaped like TRAJECTORIES (default: the shipped coding-agent workload: its
prompt lengths, new input per call, answer lengths) in three phases that share --duration (180 s by
default; a phase stops when its share is spent and leaves the rest to the next):

\b
  1. prefill (35 %), concurrency 1: TTFT against prompt length and cached share; a lone stream's decode
  2. cache (20 %), concurrency 1: how many tokens the host keeps cached (a sentinel prompt evicted or not)
  3. ladder (45 %), concurrency 1, 2, 4 ... --max-concurrency: decode step against streams, and where
     queueing starts (the host's running cap)

Without --host it probes the embedded simulated host (--sim-profile, --sim-profile-file): a check of the
probe itself. The fit gives the simulated host's roofline (per-step overhead, weight and KV read, prefill per token and
per attended pair), KV budget, running cap and context limit. Use the file with
`replay run --sim-profile-file F` or `replay sim --profile-file F` (docs/twin.md).
"""


@click.command(help=_HELP, short_help="Probe a host for a few minutes and write a profile file for its simulated twin.")
@click.argument("trajectories", nargs=-1, type=click.Path())
@run_options.apply(run_options.HOST, run_options.SIM[:2])
@click.option("--out", type=click.Path(dir_okay=False), help="The profile file to write (.toml, or .json).")
@click.option("--duration", default="180", show_default=True, help="The whole probe's budget (e.g. 90, 3m).")
@click.option("--max-concurrency", default=64, show_default=True, type=click.IntRange(1), help="Highest ladder level.")
@click.option(
    "--max-context",
    type=click.IntRange(64),
    help="Tokens (prompt + answer) a call may hold; default: the workload's own sizes, capped where the host "
    "refuses one as too long.",
)
@click.option(
    "--force-output-length/--no-force-output-length",
    default=True,
    show_default=True,
    help="Send ignore_eos and min_tokens so every answer is as long as asked (the probe times its tokens).",
)
@click.option(
    "--kv-tokens",
    type=click.IntRange(16),
    help="The host's KV cache in its own tokens, when known (e.g. from the engine's start-up log): the cache "
    "phase is skipped.",
)
@click.option("--runs", type=click.Path(file_okay=False), help="Keep every pass's trajectories and run file here.")
@click.option("--json", "as_json", is_flag=True, help="Print what was measured and fitted as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
def probe(
    trajectories: tuple[str, ...],
    out: str | None,
    duration: str,
    max_concurrency: int,
    max_context: int | None,
    kv_tokens: int | None,
    force_output_length: bool,
    runs: str | None,
    as_json: bool,
    quiet: bool,
    **opts: Any,
) -> None:
    from replay.runner.single_run import RunError, check_spec
    from replay.twin.probe import MIN_DURATION_S, ProbeConfig
    from replay.workload.trajectory import TrajectoryError, default_workload_path, load_workload

    path = _profile_path(out)
    seconds = _seconds(duration, "--duration")
    if seconds < MIN_DURATION_S:
        raise click.BadParameter(f"at least {MIN_DURATION_S:.0f} s; got {duration}", param_hint="--duration")
    base, sim = _specs(opts, force_output_length)
    try:
        check_spec(sim or base)
        workload = load_workload(list(trajectories) or [default_workload_path()])
    except (RunError, TrajectoryError) as exc:
        raise click.ClickException(str(exc)) from None
    log = (lambda _: None) if quiet else (lambda line: click.echo(line, err=True))
    config = ProbeConfig(duration_s=seconds, max_concurrency=max_concurrency, max_context=max_context,
                         kv_tokens=kv_tokens, log=log)  # fmt: skip
    result, runner = _measure(base, sim, opts, workload, config, runs)
    if result.kv_source == "at least":  # a bound is never written as a measurement: a twin would predict with it
        click.echo(f"Error: the cache phase ran out of time before the host's cache was full: its KV cache holds at "
                   f"least {result.kv_tokens:,} host tokens, a bound, not a measurement; no twin written. Give a "
                   "longer --duration, or --kv-tokens N (the engine's log states it).", err=True)  # fmt: skip
        sys.exit(3)
    if why := result.fit.untrusted():  # a twin that cannot reproduce its own probe would predict nothing
        click.echo(f"Error: {why}; no twin written. Probe again on a quieter host, or with a longer --duration.",
                   err=True)  # fmt: skip
        sys.exit(3)
    _write(path, result, opts["host"], runner.model or opts["model"], opts["api"], workload, seconds)
    if as_json:
        import orjson

        click.echo(orjson.dumps(result.public(), option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(summary(result, out or "", opts["host"], runner.model or opts["model"]))


def _profile_path(out: str | None) -> Path:
    """--out checked: a .toml or .json file name in a directory that exists."""
    if not out:
        raise click.BadParameter("required: the profile file to write, e.g. twin.toml", param_hint="--out")
    path = Path(out)
    if path.suffix.lower() not in (".toml", ".json"):
        raise click.BadParameter(f"{out}: expected a .toml or .json file name", param_hint="--out")
    if not path.parent.is_dir():
        raise click.BadParameter(f"{out}: no such directory {str(path.parent)!r}", param_hint="--out")
    return path


def _specs(opts: dict[str, Any], force_output_length: bool) -> tuple[RunSpec, RunSpec | None]:
    """The passes' run spec (host, model, API, timeouts) and, without --host, the embedded simulated host's.
    Sets ``opts["host"]`` and ``opts["sim_profile"]`` to the host resolved from --host (sim:PROFILE included)."""
    from replay.runner.single_run import RunSpec

    try:
        max_bytes = parse_bytes(opts["max_response_bytes"])
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--max-response-bytes") from None
    hosts = run_specs.host_values(opts)
    if len(hosts) > 1:
        raise click.BadParameter("one host to probe", param_hint="--host")
    url, sim_profile = run_specs.resolve_host(hosts[0], opts["sim_profile"])  # sim:PROFILE is the embedded one
    opts["host"], opts["sim_profile"] = url, sim_profile
    base = RunSpec(host=opts["host"], model=opts["model"], api=opts["api"], api_key_env=opts["api_key_env"],
                   dialect=opts["dialect"], hosts_file=opts["hosts_file"], force_output_length=force_output_length,
                   request_timeout_s=_seconds(opts["request_timeout"], "--request-timeout"),
                   stall_timeout_s=_seconds(opts["stall_timeout"], "--stall-timeout"),
                   max_response_bytes=max_bytes, progress=False)  # fmt: skip
    sim = None if opts["host"] else RunSpec(sim_profile=opts["sim_profile"], sim_profile_file=opts["sim_profile_file"])
    return base, sim


def _measure(
    base: RunSpec, sim: RunSpec | None, opts: dict[str, Any], workload: Any, config: Any, runs: str | None
) -> tuple[Any, Any]:
    """The probe's passes, against the host or the embedded simulated host (started once for the whole probe);
    returns what was measured and the runner (it knows the host's model). The passes' files are kept under
    --runs, else removed. A failure or an interruption ends the command here, with its exit code."""
    from replay.runner.embedded_host import embedded_host
    from replay.runner.single_run import SIM_MODEL, RunError
    from replay.twin.probe import ProbeError
    from replay.twin.probe import probe as run_probe
    from replay.twin.runners import HttpRunner, ProbeInterrupted

    directory = Path(runs) if runs else Path(tempfile.mkdtemp(prefix="replay-probe-"))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        with contextlib.ExitStack() as stack:
            if sim is not None:  # no --host: the embedded simulated host, started once for the whole probe
                host = stack.enter_context(embedded_host(sim.sim_profile, profile_file=sim.sim_profile_file))
                base.host, base.model = host.base_url, base.model or SIM_MODEL
                opts["host"] = f"simulated:{sim.sim_profile_file or sim.sim_profile}"
            runner = HttpRunner(base, directory)  # resolves the host and its model once
            opts["host"] = runner.scrub.text(opts["host"])  # as printed and written: a key in its path scrubbed
            config.log(f"replay probe: {opts['host']}, up to {config.duration_s:.0f} s")
            return run_probe(runner, workload, directory, config), runner
    except ProbeError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except ProbeInterrupted as exc:
        click.echo("\ninterrupted: no profile written", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:  # between passes (a pass itself stops gracefully: ProbeInterrupted)
        click.echo("\ninterrupted: no profile written", err=True)
        sys.exit(130)
    except (RunError, RuntimeError) as exc:  # RuntimeError: the simulated host did not start
        raise click.ClickException(str(exc)) from None
    finally:
        if not runs:
            shutil.rmtree(directory, ignore_errors=True)


def _seconds(text: str, option: str) -> float:
    try:
        value = parse_duration(text)
    except click.BadParameter as exc:
        raise click.BadParameter(exc.message, param_hint=option) from None
    assert value is not None
    if value <= 0:  # a call, a silence or a probe of no time: refused, never read as the default
        raise click.BadParameter(f"{text!r}: expected more than 0 s", param_hint=option)
    return value


def _write(path: Path, result: Any, host: str, model: str | None, api: str, workload: Any, duration: float) -> None:
    from replay import __version__
    from replay.twin.profile_out import write_twin

    created = datetime.now(UTC).isoformat(timespec="seconds")
    provenance = {"host": host, "model": model or "", "api": api, "created": created, "replay_version": __version__,
                  "duration_s": duration, "workload": workload.paths, "workload_digest": workload.digest,
                  **result.public()}  # fmt: skip
    header = (f"A simulated twin of {host} (model {model or '?'}), fitted by `replay probe` on {created}.\n"
              f"Use it: replay run --sim-profile-file {path}   or   replay sim --profile-file {path}\n"
              "Fields: docs/twin.md. The [probe] table is what it was fitted from (the sim ignores it).")  # fmt: skip
    fields = result.twin_fields() | {"description": f"twin of {host} ({model or '?'}), probed {created[:10]}"}
    write_twin(path, fields, provenance, header)


def summary(result: Any, out: str, host: str, model: str | None) -> str:
    """What a user reads after the probe: the phases, the fitted figures in plain units, the file."""
    c, r = result.fit.coefficients, result.ratio
    ctx = 8192 * r
    step1 = c.decode_s(1, ctx)
    phases = ", ".join(f"{p.name} {p.used_s:.0f} s ({p.calls} calls, {p.stopped})" for p in result.phases)
    found = {"host": "as the host states it", "measured": "measured"}
    kv_note = {"measured": "measured", "given": "given", "host": "as the host states it"}
    lines = [
        f"twin of {host} (model {model or '?'}): {out}",
        f"  probe: {result.elapsed_s:.0f} s: {phases}",
        f"  decode: {1000 * step1:.1f} ms a step for one stream at 8k context ({1 / step1:.0f} tok/s); "
        f"+{1e9 * c.kv_read_s:.1f} ns per KV token read",
        f"  prefill: cold 8k prompt {c.ttft_s(round(ctx), 0):.3f} s; {1e6 * c.prefill_token_s:.2f} µs per token, "
        f"{1e12 * c.attn_pair_s:.1f} ps per attended pair; step overhead {1000 * c.overhead_s:.2f} ms",
        f"  running cap {result.max_num_seqs} ({found.get(result.max_num_seqs_source, 'at least: not reached')}); "
        f"KV cache {result.kv_tokens:,} "
        f"host tokens ({kv_note[result.kv_source]}); {r:.3f} host tokens per client token",
        f"  cache block {result.facts.block_size or 'not stated: 16 client tokens assumed'}, served context "
        f"{result.facts.max_model_len or 'not stated'} (host tokens, as the host says)",
        f"  fit: TTFT rms {100 * result.fit.prefill_rms:.1f} %, decode rms {100 * result.fit.decode_rms:.1f} %, "
        f"worst {100 * result.fit.worst:.1f} % over {len(result.prefill)} + {len(result.decode)} points",
        f"  use it: replay run --sim-profile-file {out}",
    ]
    return "\n".join(lines)
