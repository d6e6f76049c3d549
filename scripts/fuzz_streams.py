#!/usr/bin/env python3
"""The long fuzz run of every flavour's stream reader (the suite runs 150 examples per test; this runs many more).

python scripts/fuzz_streams.py [--examples 20000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=20_000, help="examples per fuzz test")
    args = ap.parse_args()
    test = Path(__file__).resolve().parents[1] / "tests" / "test_flavour_fuzz.py"
    env = {**os.environ, "HYPOTHESIS_PROFILE": "long", "REPLAY_FUZZ_EXAMPLES": str(args.examples)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout", "0", str(test)]
    sys.exit(subprocess.call(cmd, env=env))


if __name__ == "__main__":
    main()
