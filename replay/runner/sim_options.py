"""The embedded simulated host's options checked before it starts, so a typo is one clear line, not a dead child."""

from __future__ import annotations

from typing import Any

from replay.runner.run_error import RunError


def check_sim_options(spec: Any) -> None:
    """RunError naming the ``--sim-*`` option whose value the simulated host would refuse."""
    from replay.sim.core.profile_file import resolve_profile
    from replay.sim.core.profiles import get_profile
    from replay.sim.server.dialects import get_dialect
    from replay.sim.server.faults import FaultSpec
    from replay.sim.server.routes import FallbackSpec

    checks = (
        ("--sim-profile", lambda: get_profile(spec.sim_profile)),
        (
            "--sim-profile-file",
            lambda: spec.sim_profile_file and resolve_profile(spec.sim_profile, spec.sim_profile_file),
        ),
        ("--sim-faults", lambda: FaultSpec.parse(spec.sim_faults, spec.sim_fault_seed)),
        ("--sim-dialect", lambda: spec.sim_dialect and get_dialect(spec.sim_dialect)),
        ("--sim-fallback", lambda: spec.sim_fallback and FallbackSpec.parse(spec.sim_fallback)),
    )
    for option, check in checks:
        try:
            check()
        except ValueError as exc:
            raise RunError(f"{option}: {exc}") from None
