"""Thousands of agents from one machine: ``replay run`` at 1,024 and 4,096 sessions against the stub host,
every call's TTFT checked against the stub's own truth, the client's memory, CPU and connections per process.

The workload: ``--trajectories`` small agent trajectories (default 256) of ``--turns`` calls (20), contexts growing
from ~1.5k to ~6k tokens, 100-token answers, lognormal tool pauses (median 5 s), written once into ``--work``. The
host: ``scripts/peer_stub.py`` in ``timed`` mode (its own process, 127.0.0.1): the first token 200 ms after a
request arrives, then one every 50 ms, each write a timer callback, each request logged with its X-Request-Id,
arrival and first write (``time.monotonic``: the clock replay's stamps read on Linux). So, per call:

- TTFT error = replay's TTFT (``t_first_token - t_sent``) minus the stub's (first write - arrival), split into the
  way up (arrival - t_sent) and the way down (t_first_token - first write);
- the stub's own lateness = first write - (arrival + 200 ms): how far the host itself was from its schedule (if
  that stays small, the host is not the limit; its CPU is sampled too).

``/proc`` is sampled every 0.5 s for every process of the run (the parent, which collects every worker's records
and alone writes the run file, and each worker): RSS, and CPU over the steady window. Results: JSON to ``--out``
and a markdown table on stdout.

    python scripts/bench_agents.py [--sessions 1024,4096] [--workers 2] [--duration 60] [--reps 1]
        [--source-address 127.0.0.2 ...] [--replay-arg=--ramp-up=10]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))
import peer_stub  # noqa: E402

TTFT_S, ITL_S, TOKENS = 0.2, 0.05, 100
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
WORDS = [
    *("the", "file", "test", "value", "error", "line", "return", "function", "module", "import", "class", "self"),
    *("data", "path", "result", "config", "check", "build", "run", "output", "input", "list", "type", "name"),
    *("index", "count", "time", "state", "case", "call", "user", "agent", "tool", "code"),
]


def workload(path: Path, n: int, turns: int, seed: int) -> Path:
    """``n`` trajectories of ``turns`` calls: a ~1,500-word start, ~235 words of tool output per turn (~6k tokens
    by the last call), 100-token answers, lognormal tool pauses of median 5 s."""
    rng = random.Random(seed)

    def text(words: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(words))

    with open(path, "wb") as f:
        for i in range(n):
            f.write(orjson.dumps({"format": "replay.trajectory/1", "id": f"agents/{i:04d}"}) + b"\n")
            for t in range(turns):
                append = ([{"role": "system", "content": "You are a coding agent. " + text(1200)},
                           {"role": "user", "content": f"Task {i}: " + text(300)}] if t == 0
                          else [{"role": "user", "content": f"<output>{text(235)}</output>"}])  # fmt: skip
                turn = {"append": append, "output": {"content": text(90)}, "output_tokens": TOKENS,
                        "tool_time_s": round(rng.lognormvariate(1.609, 0.5), 3)}  # fmt: skip
                f.write(orjson.dumps(turn) + b"\n")
    return path


def _proc(pid: int) -> tuple[float, int, str] | None:
    """(CPU seconds, RSS bytes, command line) of a live process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    rest = stat[stat.rindex(b")") + 2 :].split()
    return (int(rest[11]) + int(rest[12])) / TICK, rss, cmd


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


class Sampler(threading.Thread):
    """Every ``every`` s: each process of the run (the parent and its workers), its CPU seconds and RSS."""

    def __init__(self, pid: int, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.every, self.stopped = pid, every, threading.Event()
        self.samples: list[tuple[float, dict[str, tuple[float, int]]]] = []

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            now, seen = time.monotonic(), {}
            for pid in [self.pid, *_children(self.pid)]:
                got = _proc(pid)
                if got is None:
                    continue
                if pid == self.pid:
                    seen["parent"] = got[:2]
                elif "replay.scale.worker_proc" in got[2]:
                    seen[f"worker {pid}"] = got[:2]
            self.samples.append((now, seen))

    def over(self, t0: float, t1: float) -> dict[str, dict[str, float]]:
        """Per process: CPU share over [t0, t1] (cores) and peak RSS (MiB) over the run."""
        inside = [(t, s) for t, s in self.samples if t0 <= t <= t1]
        out: dict[str, dict[str, float]] = {}
        names = {k for _, s in self.samples for k in s}
        for name in sorted(names):
            peak = max(s[name][1] for _, s in self.samples if name in s) / 2**20
            pts = [(t, s[name][0]) for t, s in inside if name in s]
            cores = (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0]) if len(pts) > 1 else None
            out[name] = {"cores": cores, "rss_peak_mib": peak}
        return out

    def rss_by_minute(self, t0: float) -> list[float]:
        """The run's total RSS (every process, MiB), the mean of each whole minute after ``t0``: flat memory is a
        last minute within 5 % of the second (the first holds the start-up)."""
        minutes: dict[int, list[float]] = {}
        for t, seen in self.samples:
            if t >= t0:
                minutes.setdefault(int((t - t0) // 60), []).append(sum(rss for _, rss in seen.values()) / 2**20)
        whole = sorted(minutes)[:-1] if len(minutes) > 1 else sorted(minutes)  # the last one is partial
        return [sum(minutes[m]) / len(minutes[m]) for m in whole]


def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s)) - 1))]


def run_once(args: argparse.Namespace, traj: Path, port: int, stub_pid: int, sessions: int, work: Path) -> dict:
    peer_stub.control(port, f"/bench/reset?mode=timed&tokens={TOKENS}&ttft={TTFT_S}&itl={ITL_S}")
    out = work / f"run-c{sessions}.jsonl"
    cmd = [sys.executable, "-m", "replay", "run", str(traj), "--host", f"http://127.0.0.1:{port}/v1", "--model",
           "stub", "-c", str(sessions), "--workers", str(args.workers), "--duration", str(args.duration),
           "--retries", "0", "--out", str(out), "--json", "-q", *args.replay_arg]  # fmt: skip
    for address in args.source_address:
        cmd += ["--source-address", address]
    stub_cpu0 = _proc(stub_pid)
    t_start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    sampler = Sampler(proc.pid)
    sampler.start()
    try:
        stdout, stderr = proc.communicate(timeout=args.duration + 600)
    finally:
        sampler.stopped.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stub_cpu1 = _proc(stub_pid)
    wall = time.monotonic() - t_start
    stats = peer_stub.control(port, "/bench/stats")
    res: dict = {"sessions": sessions, "workers": args.workers, "exit": proc.returncode, "wall_s": wall}
    if not out.exists():
        return res | {"error": stderr.decode(errors="replace")[-2000:]}
    from replay.records.reader import read_run

    run = read_run(out)
    summary = orjson.loads(stdout) if stdout.strip() else {}
    truth = {rid: (a, f) for rid, a, f in zip(stats["ids"], stats["arrival"], stats["first"], strict=True) if rid}
    err, up, down, late = [], [], [], []
    for r in run.requests:
        if r.error is None and r.t_first_token is not None and r.id in truth:
            arrival, first = truth[r.id]
            err.append(((r.t_first_token - r.t_sent) - (first - arrival)) * 1e3)
            up.append((arrival - r.t_sent) * 1e3)
            down.append((r.t_first_token - first) * 1e3)
    late = [(f - a - TTFT_S) * 1e3 for a, f in zip(stats["arrival"], stats["first"], strict=True) if f]
    phases = run.phases
    window = (phases.get("steady_start"), phases.get("stop"))
    clock = run.header["clock"]  # perf_counter ↔ our monotonic: the same CLOCK_MONOTONIC
    w0 = window[0] if window[0] is not None else phases.get("start", 0.0)
    w1 = window[1] if window[1] is not None else phases.get("end", w0)
    procs = sampler.over(w0, w1)
    by_worker: dict[int, dict[str, int]] = {}
    for r in run.requests:
        w = by_worker.setdefault(r.session % args.workers, {"calls": 0, "errors": 0})
        w["calls"] += 1
        w["errors"] += r.error is not None
    errors: dict[str, int] = {}
    for r in run.requests:
        if r.error:
            errors[r.error] = errors.get(r.error, 0) + 1
    res |= {
        "calls": len(run.requests),
        "calls_matched": len(err),
        "sessions_with_calls": len({r.session for r in run.requests}),
        "errors": errors,
        "connection_errors": errors.get("connect", 0) + errors.get("disconnect", 0),
        "ttft_err_ms": {p: pct(err, p) for p in (50, 99, 100)},
        "way_up_ms": {p: pct(up, p) for p in (50, 99, 100)},
        "way_down_ms": {p: pct(down, p) for p in (50, 99, 100)},
        "stub_late_ms": {p: pct(late, p) for p in (50, 99, 100)},
        "stub_cores": ((stub_cpu1[0] - stub_cpu0[0]) / wall) if stub_cpu0 and stub_cpu1 else None,
        "stub_max_connections": stats["max_connections"],
        "stub_max_in_flight": stats["max_in_flight"],
        "peers": stats["peers"],
        "window_s": (w1 - w0),
        "processes": procs,
        "rss_total_peak_mib": sum(p["rss_peak_mib"] for p in procs.values()),
        "rss_total_by_minute_mib": (by_minute := sampler.rss_by_minute(t_start)),
        "rss_last_over_second": by_minute[-1] / by_minute[1] if len(by_minute) > 2 else None,
        "per_worker": by_worker,
        "summary_ttft_p50_ms": (summary.get("ttft_s") or {}).get("p50", 0) * 1e3 if summary else None,
        "client_saturated": (summary.get("client") or {}).get("saturated"),
        **client_pauses(summary),
        "verdict": summary.get("verdict"),
        "clock_anchor": clock,
    }
    return res


def client_pauses(summary: dict) -> dict:
    """What the run's summary says of the client's own pauses: each process's collections (``client.workers[].gc``,
    or ``client.gc`` for one process), its loop lag p99 and the share of calls whose timing includes a pause."""
    cl = summary.get("client") or {}
    workers = cl.get("workers") or [{"worker": None, "gc": cl.get("gc"), "loop_lag_p99_ms": cl.get("loop_lag_p99_ms")}]
    return {
        "client_gc": cl.get("gc"),
        "client_gc_by_worker": {str(w["worker"]): w.get("gc") for w in workers},
        "client_loop_lag_p99_ms": cl.get("loop_lag_p99_ms"),
        "client_lag_by_worker": {str(w["worker"]): w.get("loop_lag_p99_ms") for w in workers},
        "client_held_up": cl.get("held_up"),
        "paused_calls": {k: v for k, v in (cl.get("paused_calls") or {}).items() if k != "clean"} or None,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", default="1024,4096", help="session counts, comma-separated")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--trajectories", type=int, default=256)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--source-address", action="append", default=[])
    ap.add_argument("--replay-arg", action="append", default=[], help="extra `replay run` argument (repeatable)")
    ap.add_argument("--work", type=Path, help="where the workload and run files go (default: a temporary directory)")
    ap.add_argument("--out", type=Path, default=Path("bench-agents.json"))
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-agents-"))
    work.mkdir(parents=True, exist_ok=True)
    traj = workload(work / "agents.jsonl", args.trajectories, args.turns, args.seed)
    runs = []
    with peer_stub.started("--mode", "timed", "--tokens", str(TOKENS)) as (stub, port):
        for rep in range(args.reps):
            for sessions in (int(x) for x in args.sessions.split(",")):
                res = run_once(args, traj, port, stub.pid, sessions, work) | {"rep": rep}
                runs.append(res)
                print(json.dumps({k: v for k, v in res.items() if k not in ("peers", "clock_anchor")}), flush=True)
    info = {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "command": " ".join(["python", "scripts/bench_agents.py", *(argv if argv is not None else sys.argv[1:])]),
            "nproc": os.cpu_count(), "python": platform.python_version(), "load_avg": os.getloadavg()}  # fmt: skip
    args.out.write_text(json.dumps({"machine": info, "runs": runs}, indent=1))
    print(table(runs))


HEAD = (
    "| sessions | calls (sessions with calls) | conn. errors | TTFT err p50 / p99 / max ms | stub late p50 / p99 ms "
    "| stub cores | RSS total MiB peak (minute 2 -> last) | parent cores | worker cores "
    "| collections (full, longest ms) per worker | loop lag p99 ms | paused calls |"
)
COLUMNS = 12


def _flat(by_minute: list[float]) -> str:
    """The second whole minute's RSS and the last's: flat memory is the last within 5 % of the second."""
    return f" ({by_minute[1]:.0f} -> {by_minute[-1]:.0f})" if len(by_minute) > 2 else ""


def table(runs: list[dict]) -> str:
    rows = [HEAD, "|" + "---|" * COLUMNS]
    for r in runs:
        if "calls" not in r:
            rows.append(f"| {r['sessions']} | failed: exit {r['exit']} |" + " |" * (COLUMNS - 2))
            continue
        e, s, p = r["ttft_err_ms"], r["stub_late_ms"], r["processes"]
        workers = ", ".join(f"{v['cores']:.2f}" for k, v in p.items() if k.startswith("worker") and v["cores"])
        parent = p.get("parent", {}).get("cores")
        cells = [
            str(r["sessions"]),
            f"{r['calls']:,} ({r['sessions_with_calls']})",
            str(r["connection_errors"]),
            f"{e[50]:+.1f} / {e[99]:+.1f} / {e[100]:+.1f}",
            f"{s[50]:.1f} / {s[99]:.1f}",
            f"{r['stub_cores']:.2f}",
            f"{r['rss_total_peak_mib']:.0f}" + _flat(r.get("rss_total_by_minute_mib") or []),
            "-" if parent is None else f"{parent:.3f}",
            workers,
            _collections(r.get("client_gc_by_worker") or {}),
            "-" if r.get("client_loop_lag_p99_ms") is None else f"{r['client_loop_lag_p99_ms']:.1f}",
            _paused(r.get("paused_calls")),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _collections(by_worker: dict) -> str:
    """Each process's collections: count (full ones, the longest pause in ms)."""
    said = [f"{g['collections']:,} ({g['full']}, {g['pause_max_ms']:.0f})" for g in by_worker.values()
            if g and g.get("collections") is not None]  # fmt: skip
    return ", ".join(said) or "-"


def _paused(p: dict | None) -> str:
    if not p or p.get("share") is None:
        return "-"
    return f"{100 * p['share']:.1f}% ({p['n']:,}, {p['pause_s']:.1f} s)"


if __name__ == "__main__":
    main()
