"""Probe a host, predict it with its twin at concurrencies the probe did not use, measure those, print the errors.

    python scripts/twin_check.py --virtual h100-8b --set gpu_memory_utilization=0.35 --set max_num_seqs=6 \\
        --concurrency 3,6,12                       # a known profile on the virtual clock: seconds
    python scripts/twin_check.py --sim-profile h100-8b --concurrency 3,6    # the embedded sim, real time
    python scripts/twin_check.py --llama --concurrency 3,6                  # llama-server (scripts/real_engine.py)
    python scripts/twin_check.py --host http://127.0.0.1:8000/v1 --model M --concurrency 6 TRAJ.jsonl

The twin's prediction runs the fitted profile on the virtual clock (``replay.runner.virtual_run``: the run's closed
loop, salted tasks, recorded tool pauses, the engine in this process) over the same window as the measurement, which
is a ``replay run`` against the host (``--virtual``: the true profile on the same clock). ``--llama`` starts
llama-server as the engine tests do (``-np 4 -c 16384``, one thread) and, without trajectories, writes a
small agent workload that fits its 4,096-token slots. Writes OUT.json with everything when ``--out`` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ("total_tps", "output_tps", "ttft_p50_s", "ttft_p95_s", "decode_p50_tps", "host_hit_ratio")


def figures(summary: dict[str, Any]) -> dict[str, float | None]:
    """The compared figures of a run's summary (real time or the virtual clock: the same keys)."""
    return {
        "total_tps": summary["throughput"]["total_tps"],
        "output_tps": summary["throughput"]["output_tps"],
        "ttft_p50_s": summary["ttft_s"]["p50"],
        "ttft_p95_s": summary["ttft_s"]["p95"],
        "decode_p50_tps": summary["user_decode_tps"]["p50"],
        "host_hit_ratio": summary["cache"]["host_hit_ratio"],
    }


def errors(predicted: dict[str, Any], measured: dict[str, Any]) -> dict[str, float | None]:
    """Relative error of each predicted figure (predicted / measured - 1)."""
    return {k: (predicted[k] / measured[k] - 1) if predicted.get(k) and measured.get(k) else None for k in FIGURES}


def predict(profile: Any, workload: Any, concurrency: int, duration: float, warmup: float, ratio: float = 1.0,
            out: Path | None = None) -> dict:  # fmt: skip
    """The twin's figures over the same window as the measurement, its input tokens counted as the host counts
    them (``ratio`` host tokens per client token: the twin counts the client's, a run the host's usage); its run
    file at ``out`` (default: a temporary one, removed)."""
    from replay.loops.load import LoadConfig
    from replay.runner.single_run import RunSpec
    from replay.runner.virtual_run import execute_virtual

    load = LoadConfig(concurrency=concurrency, duration_s=duration, warmup_s=warmup)
    with tempfile.TemporaryDirectory(prefix="twin-predict-") as tmp:
        spec = RunSpec(load=load, out=str(out or Path(tmp) / "predict.jsonl"), progress=False)
        summary = execute_virtual(spec, workload, profile=profile).summary
    tp = summary["throughput"]
    tp["total_tps"] = tp["output_tps"] + ratio * (tp["cached_input_tps"] + tp["new_input_tps"])
    return figures(summary)


def measure(base: Any, paths: list[str], concurrency: int, duration: float, warmup: float, out: Path) -> dict:
    """One ``replay run`` against the host of ``base`` (a RunSpec), the workload's recorded tool pauses."""
    from replay.loops.load import LoadConfig
    from replay.runner.single_run import execute

    load = LoadConfig(concurrency=concurrency, duration_s=duration, warmup_s=warmup, drain_timeout_s=10.0)
    spec = dataclasses.replace(base, trajectories=paths, load=load, out=str(out), progress=False)
    return figures(execute(spec).summary)


def host_speed(runner: Any, directory: Path, key: str, prompt: int = 512) -> dict[str, float]:
    """Three cold prompts of ``prompt`` tokens, one after the other: their median TTFT and decode step. Taken
    before the probe and after the measurements, they say how far the host's own speed drifted meanwhile (a
    shared machine's other jobs): an error larger than the drift cannot be told from it."""
    from replay.histogram import US, percentile
    from replay.twin.plan import Passes
    from replay.twin.points import ok, single_decode_point

    passes = Passes(directory, f"speed-{key}-{time.monotonic_ns()}")
    records = ok(runner.run(passes.workload(f"speed-{key}", [[passes.cold(f"s{i}", prompt, 33) for i in range(3)]]),
                            1, 120.0))  # fmt: skip
    steps = [d.step_s for r in records if (d := single_decode_point(r, 1.0)) is not None]
    return {"ttft_s": percentile([r.t_first_token - r.t_sent for r in records], 50, US),
            "step_s": percentile(steps, 50, US)}  # fmt: skip


def agent_workload(path: Path, n: int = 12, turns: int = 7, output: int = 48, tool_s: float = 1.0) -> Path:
    """n agent trajectories whose context grows by ~300 client tokens a turn to ~2,300 (Python source as tool
    output), each with its own opening words: they fit llama-server's 4,096-token slots."""
    import argparse as source

    text = Path(source.__file__).read_text()
    lines = []
    for i in range(n):
        base = (i * 7919 * 13) % (len(text) - 1200 * turns)
        lines.append({"format": "replay.trajectory/1", "id": f"agent-{i}"})
        rows = [
            {
                "append": [
                    {"role": "system", "content": f"Agent {i}. Work carefully."},
                    {"role": "user", "content": f"Ticket {i}: the option parser mishandles prefixes."},
                ]
            }
        ]
        rows += [{"append": [{"role": "user", "content": "<output>\n" + text[base + k * 1200 : base + (k + 1) * 1200]}]}
                 for k in range(turns - 1)]  # fmt: skip
        for k, row in enumerate(rows):
            row |= {"output": {"content": f"step {k}: read the next part of argparse.py"}, "output_tokens": output,
                    "tool_time_s": tool_s if k < turns - 1 else 0.0}  # fmt: skip
        lines += rows
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in lines) + b"\n")
    return path


@contextlib.contextmanager
def llama_server(log: Path) -> Iterator[str]:
    """llama-server with the engine tests' flags on a free port; stopped on exit, whatever happened."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from real_engine import MODEL_NAME, ensure_model, ensure_server, server_command

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = server_command(ensure_server(), ensure_model(), port, parallel=4, ctx=16384, threads=1)
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            url = f"http://127.0.0.1:{port}/health"
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as resp:
                if json.loads(resp.read()).get("status") == "ok":
                    break
            time.sleep(0.2)
        else:
            raise SystemExit(f"llama-server did not start; see {log}")
        yield f"http://127.0.0.1:{port}/v1|{MODEL_NAME}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def check(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from replay.runner.embedded_host import embedded_host
    from replay.runner.single_run import RunSpec
    from replay.sim.core.profile_file import load_profile_file
    from replay.sim.core.profiles import get_profile
    from replay.twin.probe import ProbeConfig, probe
    from replay.twin.profile_out import write_twin
    from replay.twin.runners import HttpRunner, VirtualRunner
    from replay.workload.trajectory import default_workload_path, load_workload

    paths = args.trajectories or ([str(agent_workload(work / "agents.jsonl"))] if args.llama else
                                  [str(default_workload_path())])  # fmt: skip
    workload = load_workload(paths)
    levels = [int(c) for c in args.concurrency.split(",")]
    config = ProbeConfig(duration_s=args.duration, max_concurrency=args.max_concurrency, nonce=args.nonce,
                         log=lambda line: print(line, file=sys.stderr))  # fmt: skip
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        if args.virtual:
            sets = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
            truth = dataclasses.replace(get_profile(args.virtual), **sets)
            runner: Any = VirtualRunner(truth)
        else:
            host, model = args.host, args.model
            if args.llama:
                host, model = stack.enter_context(llama_server(work / "llama-server.log")).split("|")
            elif not host:
                sim = stack.enter_context(embedded_host(args.sim_profile, profile_file=args.sim_profile_file))
                host, model = sim.base_url, "replay-sim"
            base = RunSpec(host=host, model=model, force_output_length=True, request_timeout_s=300.0)
            runner = HttpRunner(base, work)
        before = None if args.virtual else host_speed(runner, work, "before")
        t0 = time.monotonic()
        result = probe(runner, workload, work, config)
        probe_wall = time.monotonic() - t0
        twin_path = work / "twin.toml"
        write_twin(twin_path, result.twin_fields(), result.public())
        twin = load_profile_file(twin_path)
        for c in levels:
            predicted = predict(twin, workload, c, args.measure, args.warmup, result.ratio, work / f"twin-c{c}.jsonl")
            if args.virtual:
                measured = predict(truth, workload, c, args.measure, args.warmup, out=work / f"truth-c{c}.jsonl")
            else:
                measured = measure(base, paths, c, args.measure, args.warmup, work / f"measure-c{c}.jsonl")
            rows.append({"concurrency": c, "predicted": predicted, "measured": measured,
                         "error": errors(predicted, measured)})  # fmt: skip
        after = None if args.virtual else host_speed(runner, work, "after")
    drift = {k: after[k] / before[k] for k in before} if before and after else None
    return {"probe": result.public(), "probe_wall_s": probe_wall, "host_speed_drift": drift,
            "twin": result.twin_fields(), "rows": rows,
            "probed_levels": [lv["concurrency"] for lv in result.levels], "workload": paths}  # fmt: skip


def table(report: dict[str, Any]) -> str:
    out = ["| concurrency | figure | predicted | measured | error |", "|---:|---|---:|---:|---:|"]
    for row in report["rows"]:
        for k in FIGURES:
            p, m, e = row["predicted"][k], row["measured"][k], row["error"][k]
            cell = lambda v: "" if v is None else f"{v:,.3f}" if abs(v) < 10 else f"{v:,.0f}"  # noqa: E731
            out.append(f"| {row['concurrency']} | {k} | {cell(p)} | {cell(m)} | "
                       f"{'' if e is None else f'{100 * e:+.1f} %'} |")  # fmt: skip
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trajectories", nargs="*")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--host", help="probe and measure this host")
    where.add_argument("--virtual", metavar="PROFILE", help="a shipped profile on the virtual clock (the truth)")
    where.add_argument("--llama", action="store_true", help="start llama-server (scripts/real_engine.py)")
    where.add_argument("--sim-profile", default="default", help="the embedded simulated host, in real time")
    ap.add_argument("--sim-profile-file", help="the embedded simulated host's profile from a file")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=JSON", help="--virtual: change a field")
    ap.add_argument("--model")
    ap.add_argument("--concurrency", default="3,6", help="levels to predict and measure (default 3,6)")
    ap.add_argument("--duration", type=float, default=180.0, help="the probe's budget, s")
    ap.add_argument("--max-concurrency", type=int, default=64)
    ap.add_argument("--measure", type=float, default=90.0, help="each measurement's length, s")
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--nonce", help="seed the probe's prompts (default: random)")
    ap.add_argument("--out", type=Path, help="write the whole report as JSON here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="twin-check-") as tmp:
        report = check(args, Path(tmp))
    p = report["probe"]
    print(f"probe: {p['elapsed_s']:.0f} s (wall {report['probe_wall_s']:.0f} s), ladder levels "
          f"{report['probed_levels']}; fit rms TTFT {100 * p['fit']['prefill_rms']:.1f} %, decode "
          f"{100 * p['fit']['decode_rms']:.1f} %; cap {p['max_num_seqs']} (found {p['max_num_seqs_found']}), "
          f"KV {p['kv_tokens_host']:,} host tokens ({p['kv_source']})")  # fmt: skip
    if report["host_speed_drift"]:
        d = report["host_speed_drift"]
        print(f"host speed after / before: TTFT {d['ttft_s']:.2f}, decode step {d['step_s']:.2f}")
    print(table(report))
    if args.out:
        args.out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
