"""The host a run talks to: the URL it was given, or the embedded simulated host started for it (its options
checked before it starts, so a typo is one clear line, not a dead child), and where that host writes its truth."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from replay.runner.embedded_host import embedded_host
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
    if spec.sim_truth_log:  # one the host could not open (a device, a path under a file) fails here, not in the host
        from replay.runner.preflight import check_out

        check_out(Path(spec.sim_truth_log), "--sim-truth-log")


@contextlib.contextmanager
def run_host(spec: Any, truth_log: Path | None) -> Iterator[tuple[str, dict[str, Any] | None]]:
    if spec.host:
        yield spec.host, None
        return
    truth = str(truth_log) if truth_log else None
    with contextlib.ExitStack() as stack:
        try:
            sim = stack.enter_context(embedded_host(spec.sim_profile, truth, spec.sim_faults, spec.sim_fault_seed,
                                                    dialect=spec.sim_dialect, fallback=spec.sim_fallback,
                                                    profile_file=spec.sim_profile_file))  # fmt: skip
        except RuntimeError as exc:
            raise RunError(str(exc)) from None
        yield sim.base_url, {"profile": sim_profile_name(spec), "profile_file": spec.sim_profile_file,
                             "faults": spec.sim_faults, "dialect": spec.sim_dialect, "fallback": spec.sim_fallback,
                             "pid": sim.pid}  # fmt: skip


def sim_profile_name(spec: Any) -> str:
    if not spec.sim_profile_file:
        return spec.sim_profile
    from replay.sim.core.profile_file import resolve_profile

    return resolve_profile(spec.sim_profile, spec.sim_profile_file).name


def truth_log_path(spec: Any, out: Path, segment: int = 0) -> Path | None:
    """Where the embedded host writes its truth log: as asked, or next to the run file (a real host has none);
    a resumed run's later segments each write their own. Every run against the sim can then say how far the
    client's times are from the host's own."""
    if spec.host:
        return None
    path = Path(spec.sim_truth_log) if spec.sim_truth_log else out.with_suffix(".truth.jsonl")
    return path.with_suffix(f".{segment}.jsonl") if segment else path
