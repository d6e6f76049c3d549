"""``replay capacity`` against a full sweep, for real: does the adaptive search find the sweep's answer (within one
agent) in fewer runs?

Runs ``replay capacity --slo SLO`` against the embedded simulated host, then ``replay sweep`` over every level from
1 to one past the capacity's first broken level with the same window and warm-up, judges each sweep level against
the same SLO, and prints both answers, their run counts and the time each took.

    python scripts/capacity_vs_sweep.py --profile moe-8gpu --slo 'user_decode_tps_p25>=30' --window 30 \\
        --warmup 10 --out /tmp/cvs
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson


def replay(*args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "replay", *args, "--json", "-q"], stdout=subprocess.PIPE, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"replay {args[0]} failed (exit {proc.returncode})")
    return orjson.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="moe-8gpu")
    parser.add_argument("--slo", default="user_decode_tps_p25>=30")
    parser.add_argument("--window", default="30")
    parser.add_argument("--warmup", default="10")
    parser.add_argument("--power-kw", default="5.6", help="accelerator power for the per-MW figure (8 x 700 W)")
    parser.add_argument("--out", default="replay-runs/capacity-vs-sweep")
    args = parser.parse_args()
    out = Path(args.out)
    common = ["--sim-profile", args.profile, "--window", args.window, "--warmup", args.warmup]
    t0 = time.perf_counter()
    cap = replay("capacity", "--slo", args.slo, *common, "--power-kw", args.power_kw, "--out", str(out / "capacity"))
    t_cap = time.perf_counter() - t0
    top = (cap["first_broken"] or cap["max_concurrency"]) + 1
    t0 = time.perf_counter()
    sweep = replay("sweep", "-c", f"1..{top}", "--slo", args.slo, "--knee", "slo", *common, "--out", str(out / "sweep"))
    t_sweep = time.perf_counter() - t0
    held = [lv["concurrency"] for lv in sweep["levels"] if lv["slo_ok"]]
    first_break = next((lv["concurrency"] for lv in sweep["levels"] if not lv["slo_ok"]), None)
    sweep_answer = max((c for c in held if first_break is None or c < first_break), default=0)
    print(f"SLO {args.slo} on {args.profile}, {args.warmup} s warm-up + {args.window} s window per run")
    print(f"capacity: {cap['max_concurrency']} agents in {cap['runs']} runs ({t_cap:.0f} s);"
          f" per GPU {cap['per_gpu']}, per MW {cap['per_mw']:.0f}; {cap['uncertainty']['text']}")  # fmt: skip
    print(f"full sweep 1..{top}: {sweep_answer} agents in {len(sweep['levels'])} runs ({t_sweep:.0f} s)")
    probes = ", ".join(f"{p['concurrency']}{'' if p['ok'] else 'x'}" for p in cap["probes"])
    print(f"probes in order (x: broke): {probes}")
    levels = ", ".join(
        f"{lv['concurrency']}:{lv['slo_checks'][0]['value']:.1f}{'' if lv['slo_ok'] else 'x'}" for lv in sweep["levels"]
    )
    print(f"sweep levels (first SLO figure; x: broke): {levels}")
    print(f"within one agent: {abs(cap['max_concurrency'] - sweep_answer) <= 1}; fewer runs: "
          f"{cap['runs'] < len(sweep['levels'])}")  # fmt: skip


if __name__ == "__main__":
    main()
