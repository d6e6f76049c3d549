"""``replay sim``: the simulated host on its own."""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from replay.cli.options import parse_duration, profile_names


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, help="Port (0: an ephemeral port, printed when ready).")
@click.option(
    "--profile",
    default="default",
    show_default=True,
    help=f"Simulated engine profile, one of: {profile_names()}. Their figures: --list-profiles.",
)
@click.option(
    "--profile-file",
    type=click.Path(dir_okay=False),
    help="Load the profile from this TOML or JSON file: SimProfile fields over `base` (default: --profile), "
    "or a table of measured step times (docs/simulated-host.md).",
)
@click.option("--truth-log", type=click.Path(dir_okay=False), help="Write the per-request truth log here (JSON Lines).")
@click.option(
    "--faults",
    help="Inject faults at these rates, e.g. '429:0.05@2,503:0.02:retry-after=2,500:0.01:should-retry=false,"
    "overflow:0.01,drop:0.01,stall:0.01@5,midstream:0.01,malformed:0.01,odd_chunk:0.01,no_usage:0.01,"
    "usage_off:0.01,bad_usage:0.01,huge:0.01@4' (KIND:RATE[@PARAM][:name=value...]; KIND an HTTP status "
    "400-599 or a named kind; see docs/simulated-host.md).",
)
@click.option(
    "--fault-seed",
    default=0,
    show_default=True,
    type=click.IntRange(0, (1 << 63) - 1),
    help="Seed of the fault draws (and of the route draws).",
)
@click.option(
    "--dialect",
    default="default",
    show_default=True,
    help="Speak this provider's stream dialect: default, openai, anthropic, groq, cerebras, fireworks, together, "
    "baseten, openrouter, vercel, deepseek, vllm, sglang, llamacpp.",
)
@click.option(
    "--fallback",
    metavar="SHARE:PROFILE",
    help="Serve a seeded share of requests by a second engine with this profile, labelled fallback:PROFILE "
    "(e.g. 0.3:overloaded).",
)
@click.option(
    "--tls",
    is_flag=True,
    help="Serve HTTPS with a self-signed certificate made now (by the openssl command) for 127.0.0.1 and localhost; "
    "its path is printed (REPLAY_SIM_TLS cert=...): give it to replay run as --ca-bundle.",
)
@click.option(
    "--tls-dir",
    type=click.Path(file_okay=False),
    help="With --tls: where the certificate and key are written (default: a new private temporary directory).",
)
@click.option(
    "--ws-limit",
    default="3600",
    show_default=True,
    metavar="SECONDS",
    help="How long one WebSocket of the Responses WebSocket mode lasts (OpenAI: 60 minutes); a turn sent later is "
    "refused with websocket_connection_limit_reached and the socket closed.",
)
@click.option("--exit-with-stdin", is_flag=True, hidden=True, help="Stop when stdin closes (the parent died).")
@click.option("--list-profiles", is_flag=True, help="Print every profile's derived figures as one JSON array and exit.")
def sim(
    host: str,
    port: int,
    profile: str,
    profile_file: str | None,
    truth_log: str | None,
    faults: str | None,
    fault_seed: int,
    dialect: str,
    fallback: str | None,
    tls: bool,
    tls_dir: str | None,
    ws_limit: str,
    exit_with_stdin: bool,
    list_profiles: bool,
) -> None:
    """Run the simulated OpenAI- and Anthropic-compatible host on its own."""
    from replay.sim.core.profile_file import ProfileFileError, load_profile_file
    from replay.sim.core.profiles import PROFILES, get_profile
    from replay.sim.server.app import serve
    from replay.sim.server.dialects import get_dialect
    from replay.sim.server.faults import FaultSpec
    from replay.sim.server.routes import FallbackSpec

    try:
        get_profile(profile)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--profile") from None
    loaded = None
    if profile_file:
        try:
            loaded = load_profile_file(profile_file, profile)
        except ProfileFileError as exc:
            raise click.BadParameter(str(exc), param_hint="--profile-file") from None
    if list_profiles:
        rows = [{"profile": p.name, "description": p.description, **({} if p.instant else p.summary())}
                for p in [*PROFILES.values(), *([loaded] if loaded else [])]]  # fmt: skip
        click.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return
    try:
        FaultSpec.parse(faults, fault_seed)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--faults") from None
    for check, value, hint in ((get_dialect, dialect, "--dialect"), (FallbackSpec.parse, fallback, "--fallback")):
        try:
            check(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint=hint) from None
    try:
        ws_limit_s = parse_duration(ws_limit)
    except click.BadParameter as exc:
        raise click.BadParameter(exc.message, param_hint="--ws-limit") from None
    if ws_limit_s is None or ws_limit_s <= 0:
        raise click.BadParameter("expected a duration above 0, e.g. 3600 or 60m", param_hint="--ws-limit")
    if truth_log:  # a device, a path under a file, a directory that cannot be written: named, before it serves
        from replay.runner.preflight import check_out
        from replay.runner.run_error import RunError

        try:
            check_out(Path(truth_log), "--truth-log")
        except RunError as exc:
            raise click.UsageError(str(exc)) from None
    if tls_dir and not tls:
        raise click.UsageError("--tls-dir does nothing here: it is where --tls writes its certificate; give --tls")
    files = None
    if tls:
        from replay.sim.server.tls import SimTlsError, self_signed

        try:
            files = self_signed(tls_dir)
        except SimTlsError as exc:
            raise click.UsageError(str(exc)) from None
    serve(
        host=host,
        port=port,
        profile=loaded or profile,
        truth_log=truth_log,
        faults=faults,
        fault_seed=fault_seed,
        dialect=dialect,
        fallback=fallback,
        watch_stdin=exit_with_stdin,
        tls=files,
        ws_limit_s=ws_limit_s,
    )
