"""What a run of many sessions needs from this machine, checked before it starts: open files, and local ports for
its connections (``--source-address``). A run that would run out is refused, naming the limit and the way round it,
instead of failing thousands of calls half way (4,096 agents from one machine, 40,000 from a fleet)."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from pathlib import Path

from replay.errors import ReplayError


class LimitError(ReplayError, RuntimeError):
    """The run would pass a limit of this machine: what, and the way round it (the run is refused)."""


FILES_PER_SESSION = 2  # its connection, and room for one being replaced (a stale keep-alive resent on a fresh one)
FILES_SPARE = 64  # the run file, logs, the interpreter's own, a worker's link
PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORTS_USABLE = 0.9  # of the range: connections closed by the client wait in TIME_WAIT, holding their port a minute


def ensure_open_files(sessions: int, where: str = "this process") -> None:
    """Raise the soft open-file limit to cover ``sessions`` connections, or say before the run why it cannot (256
    sessions under a limit of 128 would otherwise fail thousands of calls)."""
    import resource

    need = FILES_PER_SESSION * sessions + FILES_SPARE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    target = need if hard == resource.RLIM_INFINITY else min(need, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < need:
        raise LimitError(
            f"{sessions} sessions need about {need} open files, and {where} may open only {soft} (hard limit "
            f"{hard}): raise it (ulimit -n {need}), lower --concurrency, or shard the run (--workers, --ray)"
        )


def local_ports() -> int:
    """How many local ports one source address has for connections (Linux: ``ip_local_port_range``)."""
    try:
        low, high = (int(x) for x in PORT_RANGE.read_text().split())
    except (OSError, ValueError):
        return 28_232  # Linux's default range, 32768-60999
    return high - low + 1


def check_source_addresses(addresses: list[str]) -> None:
    """Each ``--source-address`` an IP address this machine can send from (LimitError naming the one that is not)."""
    for address in addresses:
        try:
            family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
        except ValueError:
            raise LimitError(f"--source-address {address!r}: not an IP address") from None
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.bind((address, 0))
        except OSError as exc:
            raise LimitError(f"--source-address {address}: not an address of this machine ({exc.strerror})") from None


def check_ports(sessions: int, addresses: list[str]) -> None:
    """Refuse a run whose connections (one per session, on this machine) would use up the local ports of its source
    addresses: connect() would fail with EADDRNOTAVAIL once they are gone."""
    per_address = local_ports()
    usable = int(PORTS_USABLE * per_address) * max(len(addresses), 1)
    if sessions <= usable:
        return
    need = -(-sessions // int(PORTS_USABLE * per_address))
    raise LimitError(
        f"--concurrency {sessions} needs {sessions} connections from this machine, and "
        f"{'one source address has' if not addresses else f'{len(addresses)} source addresses have'} about "
        f"{usable:,} local ports ({per_address:,} each, net.ipv4.ip_local_port_range): give --source-address "
        f"{need} times or more (for a host on 127.0.0.1: 127.0.0.2, 127.0.0.3, ...; else addresses of this machine), "
        "or shard the run over machines (--ray)"
    )
