"""``replay sim``: the simulated host on its own."""

from __future__ import annotations

import click
import orjson


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, help="Port (0: an ephemeral port, printed when ready).")
@click.option(
    "--profile",
    default="default",
    show_default=True,
    help="Simulated engine profile: default, reasoning, fast, instant, moe-8gpu, overloaded, h100-8b, "
    "speculator-warmup (see --list-profiles).",
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
    help="Inject faults at these rates, e.g. '429:0.05@2,500:0.02,503:0.01,drop:0.01,stall:0.01@5,"
    "malformed:0.01,no_usage:0.01,bad_usage:0.01' (KIND:RATE[@SECONDS]).",
)
@click.option("--fault-seed", default=0, show_default=True, help="Seed of the fault draws.")
@click.option("--list-profiles", is_flag=True, help="Print every profile's derived figures as JSON and exit.")
def sim(
    host: str,
    port: int,
    profile: str,
    profile_file: str | None,
    truth_log: str | None,
    faults: str | None,
    fault_seed: int,
    list_profiles: bool,
) -> None:
    """Run the simulated OpenAI- and Anthropic-compatible host on its own."""
    from replay.sim.faults import FaultSpec
    from replay.sim.profile_file import ProfileFileError, load_profile_file
    from replay.sim.profiles import PROFILES, get_profile
    from replay.sim.server import serve

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
        for p in [*PROFILES.values(), *([loaded] if loaded else [])]:
            click.echo(orjson.dumps({"profile": p.name, "description": p.description} | (
                {} if p.instant else p.summary())).decode())  # fmt: skip
        return
    try:
        FaultSpec.parse(faults, fault_seed)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--faults") from None
    serve(host=host, port=port, profile=loaded or profile, truth_log=truth_log, faults=faults, fault_seed=fault_seed)
