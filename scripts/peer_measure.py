"""How the peer benchmark measures a client: its process tree's CPU over a window the stub defines.

Each client runs in a session of its own (``start_new_session``), so its whole tree (aiperf's services,
inference-perf's workers) shares one session id. A sampler thread reads ``/proc/PID/stat`` of that session
every 50 ms: user + system time of each live process plus what it collected from children it reaped, so the
sum only grows and nothing is counted twice. The CPU over a window is the sampled curve interpolated at the
window's edges. Startup (imports, tokenizers, prompt generation) and the final report fall outside the
window, which the stub's own request log gives (``window``). Linux only.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(session id, CPU seconds of the process and its reaped children), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    rest = raw[raw.rindex(b")") + 2 :].split()
    # After the command: state ppid pgrp session ... utime(11) stime(12) cutime(13) cstime(14).
    return int(rest[3]), (int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14])) / TICK


@dataclass(slots=True)
class TreeSampler:
    """CPU seconds of every process in session ``sid``, sampled in a thread until ``stop``."""

    sid: int
    interval: float = 0.05
    rescan_every: int = 10  # look for new processes in /proc every this many samples
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    _pids: set[int] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TreeSampler:
        self._pids.add(self.sid)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _scan(self) -> None:
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in self._pids:
                st = _stat(int(name))
                if st is not None and st[0] == self.sid:
                    self._pids.add(int(name))

    def _run(self) -> None:
        n = 0
        while True:  # one sample at least, however soon stop() comes
            if n % self.rescan_every == 0:
                self._scan()
            n += 1
            now = time.monotonic()
            total = 0.0
            for pid in list(self._pids):
                st = _stat(pid)
                if st is None or st[0] != self.sid:
                    self._pids.discard(pid)
                    continue
                total += st[1]
            self.times.append(now)
            # Never down: the leader reaped by us at the end, or an orphan reaped by init, takes its CPU along.
            self.cpu.append(max(total, self.cpu[-1] if self.cpu else 0.0))
            if self._stop.wait(self.interval):
                return

    def at(self, t: float) -> float:
        """CPU seconds used by time ``t`` (linear between samples)."""
        i = bisect.bisect_left(self.times, t)
        if i <= 0:
            return self.cpu[0] if self.cpu else 0.0
        if i >= len(self.times):
            return self.cpu[-1]
        t0, t1, c0, c1 = self.times[i - 1], self.times[i], self.cpu[i - 1], self.cpu[i]
        return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1

    def over(self, t0: float, t1: float) -> float:
        return self.at(t1) - self.at(t0)


@dataclass(slots=True)
class Window:
    """The steady stretch of a closed-loop run, from the stub's log: from the first request sent because an
    earlier one finished (the second wave's first arrival) to the last arrival. In a closed loop each arrival
    stands for one answer the client took in, so arrivals in the window / its length is the client's rate."""

    t0: float
    t1: float
    answers: int  # requests that arrived in (t0, t1]
    tokens: int  # the stub's count of what it sent them


def window(stats: dict, requests: int, streams: int) -> Window | None:
    """The window of the last ``requests`` requests the stub saw (earlier ones are probes or warm-ups)."""
    order = sorted(range(len(stats["arrival"])), key=stats["arrival"].__getitem__)[-requests:]
    if len(order) < requests or requests <= streams:
        return None
    first = min(streams, requests - 1)
    arrivals = [stats["arrival"][i] for i in order]
    tokens = sum(stats["per_request_tokens"][i] for i in order[first + 1 :])
    return Window(arrivals[first], arrivals[-1], len(order) - first - 1, tokens)


@dataclass(slots=True)
class Finished:
    returncode: int | None  # None: killed at the timeout
    wall_s: float
    sampler: TreeSampler


def run_client(
    argv: list[str], env: dict[str, str], cwd: str, out: str, err: str, timeout_s: float, *, also: int | None = None
) -> tuple[Finished, TreeSampler | None]:
    """Run ``argv`` in a session of its own, sampled; kill its whole group on any exit. ``also``: a pid
    whose session (the stub's) is sampled over the same time, so the stub's cost can be stated too."""
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, start_new_session=True
        )
        sampler = TreeSampler(proc.pid).start()
        other = TreeSampler(also).start() if also else None
        code: int | None = None
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            kill_group(proc)
            sampler.stop()
            if other is not None:
                other.stop()
    return Finished(code, time.monotonic() - t0, sampler), other


def kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group, SIGKILL what is left after 5 s (its services and workers included)."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        if not _group_alive(proc.pid):
            return


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
