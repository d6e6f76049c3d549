"""replay against the other load generators, side by side on one stub: tokens/s, CPU per token, timing error.

One stub (``scripts/peer_stub.py``, its own process, 127.0.0.1) serves every client in turn. The peers are
installed from PyPI into throwaway virtualenvs under ``--cache`` (reused) and given a tokenizer built offline
(``scripts/peer_tokenizer.py``). For each cell (a write mode and a number of streams) every client runs once
per repetition, in an order rotated per cell and repetition, so machine noise hits all alike; figures are
medians over repetitions:

- **throughput** (``whole``: each answer in one write; ``event``: one SSE event per write), at ``--streams``:
  tokens/s as the stub counted them, the client's CPU per token (its whole process tree, from /proc), both
  over the steady window the stub's log gives (``peer_measure.window``);
- **timing** (``timed``: first token 200 ms after the request arrives, then one every 10 ms), at
  ``--timed-streams``: each client's own mean TTFT and ITL against that injected truth, beside the stub's own
  lateness.

``raw`` (``scripts/peer_raw_client.py``, counts bytes only) is the ceiling. Results go to ``--out`` (JSON,
every run) and a markdown table on stdout.

    python scripts/bench_peers.py [--quick] [--streams 1,16,64,256] [--reps 3] [--peers vllm,aiperf,inference-perf]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

import peer_stub
import peer_tables
from peer_clients import LAUNCH, PEERS, READ, Cell, Ctx, install, version
from peer_measure import run_client, window

SCRIPTS = Path(__file__).resolve().parent
TTFT_S, ITL_S = 0.2, 0.01
# First guesses of each client's tokens/s, so its first run is sized to about --window seconds; later runs
# are sized from what the same client measured on the same cell.
PRIOR = {"raw": 3e6, "replay": 2e5, "vllm": 2e5, "aiperf": 6e4, "inference-perf": 3e4}
MAX_REQUESTS = 40_000


def levels(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a smoke pass: 1 and 16 streams, 1 repetition, short answers")
    ap.add_argument("--streams", type=levels, help="throughput levels (default 1,16,64,256)")
    ap.add_argument("--timed-streams", type=levels, help="timing levels (default 1,128,256)")
    ap.add_argument("--reps", type=int, help="repetitions (default 3)")
    ap.add_argument("--peers", default=",".join(PEERS), help="peers to run (default: all); 'none' for replay and raw")
    ap.add_argument("--modes", default="whole,event,timed", help="write modes to run (default: all three)")
    ap.add_argument("--tokens", type=int, default=500, help="tokens per answer, throughput cells")
    ap.add_argument("--timed-tokens", type=int, help="tokens per answer, timing cells (default 500)")
    ap.add_argument("--window", type=float, help="seconds of steady window to aim for, throughput cells (default 3)")
    ap.add_argument("--per-stream", type=int, default=4, help="answers per stream at least, throughput cells")
    ap.add_argument("--min-requests", type=int, default=64, help="answers at least, throughput cells")
    ap.add_argument("--waves", type=int, default=2, help="answers per stream, timing cells")
    ap.add_argument("--cache", type=Path, default=Path("~/.cache/replay-bench-peers").expanduser())
    ap.add_argument("--python312", help="a Python >= 3.12 for inference-perf (default: found on the machine)")
    ap.add_argument("--pip-arg", action="append", default=[], help="extra pip install argument (repeatable)")
    ap.add_argument("--replay-arg", action="append", default=[], help="extra `replay run` argument (repeatable)")
    ap.add_argument("--out", type=Path, default=Path("bench-peers.json"), help="every run's figures, as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the clients' work directories (logs, result files)")
    args = ap.parse_args(argv)
    quick = args.quick
    args.streams = args.streams or ([1, 16] if quick else [1, 16, 64, 256])
    args.timed_streams = args.timed_streams or ([1, 16] if quick else [1, 128, 256])
    args.reps = args.reps or (1 if quick else 3)
    args.timed_tokens = args.timed_tokens or (100 if quick else 500)
    args.window = args.window or (1.0 if quick else 3.0)
    return args


def plan(args: argparse.Namespace) -> list[Cell]:
    modes = args.modes.split(",")
    cells = [
        Cell(mode, c, max(args.min_requests, args.per_stream * c), args.tokens)
        for mode in ("whole", "event")
        if mode in modes
        for c in args.streams
    ]
    if "timed" in modes:
        cells += [Cell("timed", c, max(args.waves * c, 2), args.timed_tokens) for c in args.timed_streams]
    return cells


def sized(cell: Cell, client: str, rates: dict[tuple[str, str], float], target_s: float) -> Cell:
    """The cell with as many answers as give the client about ``target_s`` of steady window (throughput)."""
    if cell.mode == "timed":
        return cell
    rate = rates.get((client, cell.key), PRIOR.get(client, 1e5))
    want = int(target_s * rate / cell.tokens) + cell.streams  # the first wave is not in the window
    return replace(cell, requests=min(MAX_REQUESTS, max(cell.requests, want)))


def timeout_for(cell: Cell, target_s: float) -> float:
    """Generous: startup, plus three times the timed schedule, or twenty times the window aimed at."""
    if cell.mode == "timed":
        return 180 + 3 * -(-cell.requests // cell.streams) * (TTFT_S + cell.tokens * ITL_S)
    return 240 + 20 * target_s


def tail(path: Path, lines: int = 4) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    return ""


def measure(ctx: Ctx, client: str, cell: Cell, rep: int, work: Path, stub: tuple[int, int], target_s: float) -> dict:
    """One client on one cell: run it, then read the stub's log, the sampled CPU and the client's own report."""
    stub_pid, port = stub
    work.mkdir(parents=True, exist_ok=True)
    peer_stub.control(port, f"/bench/reset?mode={cell.mode}&tokens={cell.tokens}&ttft={TTFT_S}&itl={ITL_S}")
    launch = LAUNCH[client](ctx, cell, work)
    out, err = work / "stdout", work / "stderr"
    limit = timeout_for(cell, target_s)
    done, stub_cpu = run_client(launch.argv, launch.env, str(work), str(out), str(err), limit, also=stub_pid)
    stats = peer_stub.control(port, "/bench/stats")
    res: dict = {"client": client, "cell": cell.key, **asdict(cell), "rep": rep, "returncode": done.returncode}
    res |= {"wall_s": done.wall_s, "stub_requests": stats["requests"], "stub_tokens": stats["tokens"]}
    res |= {"max_in_flight": stats["max_in_flight"], "max_connections": stats["max_connections"]}
    if done.returncode != 0:
        res["error"] = "timed out" if done.returncode is None else f"exit {done.returncode}: {tail(err)}"
        return res
    try:
        res["reported"] = READ[client](work, out.read_text())
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        res["error"] = f"could not read its result: {type(exc).__name__}: {exc}; {tail(err)}"
        return res
    w = window(stats, cell.requests, cell.streams)
    if w is not None and w.t1 > w.t0 and w.tokens:
        cpu = done.sampler.over(w.t0, w.t1)
        res |= {"window_s": w.t1 - w.t0, "window_answers": w.answers, "window_tokens": w.tokens}
        res |= {"tokens_per_s": w.tokens / (w.t1 - w.t0), "client_cpu_s": cpu, "cores": cpu / (w.t1 - w.t0)}
        res["cpu_us_per_token"] = cpu / w.tokens * 1e6
        if stub_cpu is not None:
            res["stub_cpu_us_per_token"] = stub_cpu.over(w.t0, w.t1) / w.tokens * 1e6
    rep_ = res["reported"]
    summary = rep_.get("summary")
    if summary and cell.mode == "timed":
        res["summary_ttft_n"] = summary.get("ttft_n")
        if summary.get("ttft_mean") is not None:
            res["summary_ttft_err_ms"] = (summary["ttft_mean"] - TTFT_S) * 1e3
    if cell.mode == "timed":
        if rep_.get("ttft_mean") is not None:
            res["ttft_err_ms"] = (rep_["ttft_mean"] - TTFT_S) * 1e3
        if rep_.get("itl_mean") is not None:
            res["itl_err_ms"] = (rep_["itl_mean"] - ITL_S) * 1e3
        last_n = sorted(range(stats["requests"]), key=stats["arrival"].__getitem__)[-cell.requests :]
        late = [stats["first"][i] - stats["arrival"][i] - TTFT_S for i in last_n]
        gaps = [
            (stats["last"][i] - stats["first"][i]) / (stats["per_request_tokens"][i] - 1)
            for i in last_n
            if stats["per_request_tokens"][i] > 1
        ]
        res["stub_ttft_late_ms"] = statistics.fmean(late) * 1e3 if late else None
        res["stub_itl_err_ms"] = (statistics.fmean(gaps) - ITL_S) * 1e3 if gaps else None
    if (rep_.get("ok") or 0) < cell.requests:
        res["note"] = f"the client reports {rep_.get('ok')} of {cell.requests} requests done"
    # Only the timed mode says how many streams a client kept open at once: elsewhere an answer is written in
    # less time than the client takes to read it, so the stub sees fewer at once whatever the client holds.
    if cell.mode == "timed" and stats["max_in_flight"] < cell.streams:
        res["note"] = f"at most {stats['max_in_flight']} streams at once, of {cell.streams} asked"
    return res


def machine(ctx: Ctx, peers: list[str]) -> dict:
    model = ""
    with contextlib.suppress(OSError, StopIteration), open("/proc/cpuinfo") as f:
        model = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    commit = subprocess.run(["git", "-C", str(SCRIPTS), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python", "scripts/bench_peers.py", *sys.argv[1:]]),
        "cpu": model,
        "nproc": os.cpu_count(),
        "memory_gib": round(mem, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "replay_commit": commit.stdout.strip(),
        "peers": {p: version(p, ctx) for p in peers},
    }


def prepare(args: argparse.Namespace, ctx: Ctx, log) -> tuple[list[str], dict[str, str]]:
    """Install the peers asked for; build the tokenizer with one of their Pythons. Returns (ready, skipped)."""
    wanted = [] if args.peers == "none" else [p for p in args.peers.split(",") if p]
    unknown = [p for p in wanted if p not in PEERS]
    if unknown:
        raise SystemExit(f"unknown peer(s) {', '.join(unknown)}; known: {', '.join(PEERS)}")
    ready, skipped = [], {}
    for peer in wanted:
        reason = install(peer, ctx, log)
        if reason:
            skipped[peer] = reason
            log(f"skipping {peer}: {reason}")
        else:
            ready.append(peer)
    if ready and not (ctx.tokenizer / "tokenizer.json").exists():
        py = str(ctx.cache / ready[0] / "bin" / "python")
        subprocess.run([py, str(SCRIPTS / "peer_tokenizer.py"), str(ctx.tokenizer)], check=True, timeout=600)
    return ready, skipped


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - started:6.0f}s] {msg}", file=sys.stderr, flush=True)

    args.cache.mkdir(parents=True, exist_ok=True)
    ctx = Ctx("", args.cache, args.cache / "tokenizer", tuple(args.pip_arg), args.python312, tuple(args.replay_arg))
    peers, skipped = prepare(args, ctx, log)
    clients = ["raw", "replay", *peers]
    cells = plan(args)
    workroot = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    runs: list[dict] = []
    rates: dict[tuple[str, str], float] = {}
    total = len(cells) * len(clients) * args.reps
    try:
        with peer_stub.started("--tokens", str(args.tokens)) as (stub, port):
            ctx.base_url = f"http://127.0.0.1:{port}"
            log(f"stub on {ctx.base_url}; {total} runs: {len(cells)} cells x {len(clients)} clients x {args.reps}")
            for rep in range(args.reps):
                for ci, cell in enumerate(cells):
                    k = (rep + ci) % len(clients)
                    for client in clients[k:] + clients[:k]:
                        work = workroot / f"r{rep}-{cell.mode}-c{cell.streams}-{client}"
                        this = sized(cell, client, rates, args.window)
                        res = measure(ctx, client, this, rep, work, (stub.pid, port), args.window)
                        if res.get("tokens_per_s"):
                            rates[(client, cell.key)] = res["tokens_per_s"]
                        runs.append(res)
                        log(f"[{len(runs)}/{total}] rep {rep + 1} {cell.key} {client}: {peer_tables.brief(res)}")
    finally:
        if args.keep:
            log(f"work directories kept in {workroot}")
        else:
            shutil.rmtree(workroot, ignore_errors=True)
    info = machine(ctx, peers) | {"elapsed_s": round(time.monotonic() - started), "skipped": skipped}
    medians = peer_tables.medians(runs)
    result = {"machine": info, "cells": [asdict(c) for c in cells], "medians": medians, "runs": runs}
    args.out.write_text(json.dumps(result, indent=1))
    print(peer_tables.markdown(info, clients, cells, medians, args.reps))
    log(f"done in {info['elapsed_s']} s; every run in {args.out}")


if __name__ == "__main__":
    main()
