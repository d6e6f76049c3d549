"""Concurrency sweep figures for the docs: ``replay sweep`` against the simulated host, then a table and a plot.

The sweep itself is ``replay sweep`` (one run per level, each in its own embedded simulated host, and a sweep
index with the knee and the frontier); this script adds what the docs show: a PNG, a CSV and a Markdown table.
``--virtual`` is ``replay sweep --virtual``: the same runs on a virtual clock (``replay.runner.virtual_run``: the
same sessions, run files and figures, the engine in this process, no sockets), seconds of CPU for the whole sweep.

    python scripts/sweep.py --profile moe-8gpu --concurrency 1,2,4,8,16,24,32,48,64 \\
        --duration 90 --warmup 20 --out docs/img/sweep-moe-8gpu
    python scripts/sweep.py --profile overloaded --concurrency 1,2,3,4,5,6,8,12,16 --virtual --out /tmp/o

Writes OUT.json (the rows and how they were made), OUT.csv and OUT.png (needs matplotlib: the ``plots``
extra); the runs and the sweep index go to ``--runs-dir``. ``--duration`` is the whole of a level (warm-up
included), as before: the window is ``duration - warmup``. ``--plot-only OUT.json`` redraws the picture.
Like ``replay run``, every task is salted (distinct conversations) unless ``--no-salt-tasks``; the virtual
clock's ``--unique`` is now that default.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

COLUMNS = (
    ("concurrency", ("concurrency",)),
    ("requests", ("requests",)),
    ("errors", ("errors",)),
    ("total_tps", ("throughput", "total_tps")),
    ("output_tps", ("throughput", "output_tps")),
    ("new_input_tps", ("throughput", "new_input_tps")),
    ("ttft_p50_s", ("ttft_s", "p50")),
    ("ttft_p95_s", ("ttft_s", "p95")),
    ("decode_p25_tps", ("user_decode_tps", "p25")),
    ("decode_p50_tps", ("user_decode_tps", "p50")),
    ("host_hit_ratio", ("cache", "host_hit_ratio")),
)


def _get(summary: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = summary
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def row(summary: dict[str, Any], concurrency: int) -> dict[str, Any]:
    out = {name: _get(summary, path) for name, path in COLUMNS}
    out["concurrency"] = concurrency
    return out


def run_sweep(args: argparse.Namespace, levels: list[int], run_dir: Path) -> dict[str, Any]:
    """``replay sweep`` over ``levels`` (real time, or the virtual clock); its JSON."""
    cmd = [
        sys.executable, "-m", "replay", "sweep", *args.trajectories,
        "--sim-profile", args.profile, "-c", ",".join(map(str, levels)),
        "--window", str(args.duration - args.warmup), "--warmup", str(args.warmup), "--seed", str(args.seed),
        "--drain-timeout", str(args.drain_timeout), "--json", "--out", str(run_dir),
        *(["--virtual"] if args.virtual else []),
        *(["--no-salt-tasks"] if args.no_salt_tasks else []),
    ]  # fmt: skip
    limit = len(levels) * (args.duration + args.drain_timeout + 120)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, timeout=limit, check=False)  # progress goes to stderr
    if proc.returncode != 0:
        raise SystemExit(f"replay sweep failed (exit {proc.returncode})")
    return orjson.loads(proc.stdout)


def write_table(rows: list[dict[str, Any]], out: Path, meta: dict[str, Any]) -> None:
    out.with_suffix(".json").write_bytes(orjson.dumps({**meta, "rows": rows}, option=orjson.OPT_INDENT_2))
    with out.with_suffix(".csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[name for name, _ in COLUMNS])
        writer.writeheader()
        writer.writerows(rows)


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""

    def fmt(v: Any, digits: int) -> str:
        return "" if v is None else f"{v:,.{digits}f}"

    lines = [
        "| sessions | total tok/s | output tok/s | new input tok/s | TTFT p50 s | TTFT p95 s "
        "| decode p25 tok/s | decode p50 tok/s | host cache hit | errors |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['concurrency']} | {fmt(r['total_tps'], 0)} | {fmt(r['output_tps'], 0)} | "
            f"{fmt(r['new_input_tps'], 0)} | {fmt(r['ttft_p50_s'], 2)} | {fmt(r['ttft_p95_s'], 2)} | "
            f"{fmt(r['decode_p25_tps'], 1)} | {fmt(r['decode_p50_tps'], 1)} | {fmt(r['host_hit_ratio'], 2)} | "
            f"{r.get('errors') or 0} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], out: Path, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[plots]'): no picture", file=sys.stderr)
        return
    c = [r["concurrency"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    ax.plot(c, [(r["total_tps"] or 0) / 1000 for r in rows], "o-", label="total (cached + new input + output)")
    ax.plot(c, [(r["new_input_tps"] or 0) / 1000 for r in rows], "s--", label="new input")
    ax.set_ylabel("k tokens/s")
    ax2 = ax.twinx()
    ax2.plot(c, [r["output_tps"] or 0 for r in rows], "^-", color="tab:red", label="output (right axis)")
    ax2.set_ylabel("output tokens/s", color="tab:red")
    ax.set_title("aggregate throughput")
    lines = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(lines, [str(h.get_label()) for h in lines], fontsize=8, loc="upper left")
    ax = axes[1]
    ax.plot(c, [r["ttft_p50_s"] for r in rows], "o-", label="p50")
    ax.plot(c, [r["ttft_p95_s"] for r in rows], "s--", label="p95")
    ax.set_ylabel("seconds")
    ax.set_title("time to first token")
    ax.legend(fontsize=8)
    ax = axes[2]
    ax.plot(c, [r["decode_p25_tps"] for r in rows], "o-", label="p25 (headline)")
    ax.plot(c, [r["decode_p50_tps"] for r in rows], "s--", label="p50")
    ax.set_ylabel("tokens/s per user")
    ax.set_title("per-user decode speed")
    ax.legend(fontsize=8)
    for ax in axes:
        ax.set_xlabel("concurrent sessions")
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trajectories", nargs="*", default=[], help="default: the shipped coding-agent workload")
    parser.add_argument("--profile", default="moe-8gpu")
    parser.add_argument("--concurrency", default="1,2,4,8,16,24,32,48,64")
    parser.add_argument("--duration", type=float, default=90.0)
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--drain-timeout", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--virtual", action="store_true", help="virtual clock: the same runs in seconds")
    parser.add_argument(
        "--no-salt-tasks", action="store_true", help="copies of a trajectory share their prefixes (not distinct agents)"
    )
    parser.add_argument("--out", default="sweep", help="output path without extension")
    parser.add_argument("--runs-dir", help="where the run files and sweep.json go (default: replay-runs/sweep-NAME)")
    parser.add_argument("--plot-only", help="redraw OUT.png from this sweep JSON")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.plot_only:
        data = orjson.loads(Path(args.plot_only).read_bytes())
        plot(data["rows"], out, data["title"])
        return
    if args.warmup >= args.duration:
        raise SystemExit("--duration is a level's whole length: it must be longer than --warmup")
    levels = [int(x) for x in args.concurrency.split(",")]
    mode = "virtual clock" if args.virtual else "replay sweep, embedded sim"
    if args.no_salt_tasks:
        mode += ", copies share prefixes"
    title = f"profile {args.profile}: {args.duration:g} s runs, {args.warmup:g} s warm-up ({mode})"
    run_dir = Path(args.runs_dir) if args.runs_dir else Path("replay-runs") / f"sweep-{out.name}"
    t0 = time.perf_counter()
    sweep = run_sweep(args, levels, run_dir)
    rows = [row(level, level["concurrency"]) for level in sweep["levels"]]
    meta = {
        "title": title,
        "command": " ".join(sys.argv),
        "profile": args.profile,
        "virtual": args.virtual,
        "sweep_index": str(run_dir / "sweep.json"),
        "knee": sweep["knee"],
        "frontier": [p["concurrency"] for p in sweep["frontier"]],
    }
    write_table(rows, out, meta)
    plot(rows, out, title)
    print(markdown(rows))
    print(f"knee: {sweep['knee']['concurrency']} ({sweep['knee']['rule']}); {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
