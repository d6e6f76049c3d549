"""The shipped profiles against aiconfigurator's kernel database: every reference point and the sim's figure.

    python scripts/profiles_vs_reference.py                  # summary per profile (Markdown)
    python scripts/profiles_vs_reference.py --points moe-8gpu # every point of one profile

The mapping of a reference question onto the sim is stated in ``replay/sim/core/reference_check.py``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from replay.sim.core.profiles import get_profile
from replay.sim.core.reference_check import CASES, compare, find_case, load_reference

DEFAULT_REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE, help="directory of the reference file")
    parser.add_argument("--points", metavar="PROFILE", help="print every point of this profile")
    args = parser.parse_args()
    reference = load_reference(args.reference)
    if args.points:
        print("| kind | batch | tokens | cached | reference ms | sim ms | sim / reference |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for p in compare(get_profile(args.points), find_case(reference, args.points)):
            print(f"| {p.kind} | {p.batch} | {p.tokens:,} | {p.cached:,} | {p.reference_ms:,.1f} | "
                  f"{p.sim_ms:,.1f} | {p.ratio:.2f} |")  # fmt: skip
        return
    print("| profile | reference case | prefill: geo. mean, range | decode: geo. mean, range | worst point |")
    print("|---|---|---:|---:|---|")
    for name, (model, gpu, parallel) in CASES.items():
        points = compare(get_profile(name), find_case(reference, name))
        cells = []
        for kind in ("prefill", "decode"):
            r = [p.ratio for p in points if p.kind == kind]
            mean = math.exp(sum(math.log(x) for x in r) / len(r))
            cells.append(f"{mean:.2f}, {min(r):.2f}–{max(r):.2f}")
        w = max(points, key=lambda p: abs(p.ratio - 1))
        what = f"{w.kind} {w.batch} × {w.tokens:,}" + (f" ({w.cached:,} cached)" if w.cached else "")
        where = f"{model.split('/')[-1]}, {gpu}, " + ", ".join(f"{k} {v}" for k, v in parallel.items())
        print(f"| `{name}` | {where} | {cells[0]} | {cells[1]} | {what}: {w.ratio:.2f} |")


if __name__ == "__main__":
    main()
