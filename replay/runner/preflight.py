"""What is checked before the first call, so a run that cannot be written, served or sharded fails at once (exit 1,
nothing run) with the option named, never with a traceback after the host was started: the run file's path,
``--prometheus``'s address, ``--workers``, the open-file limit; and the signals that must still write the footer once
the closed loop's own handling is gone (noted, never raised)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from replay.runner.run_error import RunError

STOP_SIGNALS = tuple(s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


def check_out(path: Path, flag: str = "--out") -> None:
    """RunError unless ``path`` can be a run file: a regular file (or none yet) in a directory that is, or can be
    made, and written (a read-only directory, ``--out`` under a file, ``/dev/full`` are refused by name)."""
    if path.exists() and not path.is_file():
        raise RunError(f"{flag}: {path} is not a regular file (replay writes its files only as such)")
    if path.exists() and not os.access(path, os.W_OK):
        raise RunError(f"{flag}: {path} cannot be written (permission denied)")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise RunError(f"{flag}: {parent} is not a directory, so {path} cannot be made")
    if not path.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise RunError(f"{flag}: {path} cannot be made ({parent} is not writable)")


def check_prometheus(address: str) -> None:
    """RunError unless ``--prometheus`` can listen at ``HOST:PORT`` now (a busy port, a port out of range or a host
    this machine does not have fail here, not silently in the middle of a soak)."""
    m = re.fullmatch(r"([\w.\-]*):(\d{1,5})", address)
    if not m or not 1 <= int(m.group(2)) <= 65535:
        raise RunError(f"--prometheus: expected HOST:PORT with a port in 1..65535, such as 127.0.0.1:9464; got"
                       f" {address!r}")  # fmt: skip
    host, port = m.group(1) or "127.0.0.1", int(m.group(2))
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, where = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
            probe.bind(where)
    except OSError as exc:
        raise RunError(f"--prometheus: cannot listen at {address}: {exc.strerror or exc}") from None


class SignalNote:
    """A stop signal noted, never raised: the handler only appends the signal's name. Python runs a handler wherever
    the main thread is (a finaliser, a callback, the middle of a write), and an exception raised there can be lost
    ("Exception ignored ...") with the run going on to pass; the run reads the note at the points it checks: the
    loop's start (``replay.loops.signals``), the footer, and the run's end."""

    __slots__ = ("names",)

    def __init__(self) -> None:
        self.names: list[str] = []

    def __call__(self, signum: int, _frame: object) -> None:
        self.names.append(signal.Signals(signum).name)

    def take(self) -> list[str]:
        """The names noted since the last take, in order (and forgotten here)."""
        names, self.names[:] = list(self.names), []
        return names


@contextlib.contextmanager
def footer_on_signals() -> Iterator[SignalNote]:
    """While inside, SIGTERM and SIGHUP are noted on the ``SignalNote`` yielded (the closed loop installs its own
    graceful handling while it runs, answers those noted before it at its start, and gives these back after), so a
    signal before the loop or just after it still writes the footer, and one after the footer still ends the command
    with its exit code. Nested, the outer note is used (a command that prints after its run keeps one note)."""
    current = signal.getsignal(signal.SIGTERM)
    if isinstance(current, SignalNote):
        yield current
        return
    note = SignalNote()
    if threading.current_thread() is not threading.main_thread():
        yield note
        return
    previous = {}
    for sig in STOP_SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            previous[sig] = signal.signal(sig, note)
    try:
        yield note
    finally:
        for sig, handler in previous.items():
            with contextlib.suppress(ValueError, OSError):
                signal.signal(sig, handler)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Signals held while the footer is written (a signal then arrives, and acts, just after it)."""
    held = {signal.SIGINT, *STOP_SIGNALS}
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def held_signals() -> list[str]:
    """The stop signals sent while ``signals_held`` holds them, not yet delivered (their names)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "sigpending"):
        return []
    return [signal.Signals(s).name for s in sorted(signal.sigpending()) if s in (signal.SIGINT, *STOP_SIGNALS)]


def check_workers(spec: Any) -> None:
    """``--workers``: 1 or more; more than 1 (or ``--ray``) shards the closed loop, so what needs one process is
    refused."""
    if spec.workers < (0 if spec.ray else 1):
        raise RunError(f"--workers: expected 1 or more, not {spec.workers}")
    if spec.workers == 1 and not spec.ray:
        return
    sharded = "--ray" if spec.ray else f"--workers {spec.workers}"
    one_process = [("--resume", spec.resume), ("an open loop (--arrivals)", spec.arrivals is not None),
                   ("--max-rpm (one limiter for every session)", spec.load.rate_limit is not None),
                   ("--start-at and the recipes' lanes (warm-up barrier, background subagents, idle caps)",
                    spec.load.lanes is not None)]  # fmt: skip
    for name, asked in one_process:
        if asked:
            raise RunError(f"{sharded}: {name} runs in one process; leave {sharded.split()[0]} out")
    if spec.ray and importlib.util.find_spec("ray") is None:  # before a byte is written
        raise RunError("--ray needs Ray here and on the cluster: pip install 'agentic-replay[ray]'")
