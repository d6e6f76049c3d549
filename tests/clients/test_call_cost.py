"""The work a call costs, counted: Python and C function calls per call and per output token, and the memory blocks
a call leaves behind, against stated budgets, so a change that makes the per-call path dearer fails here with the
count that grew.

Counts, not times: the same calls make the same calls on a busy machine. A run of replay (sessions, client,
records, figures) against ``scripts/peer_stub.py`` (its own process; each answer in one write) is counted twice,
with ``--tasks`` ``SMALL`` and ``LARGE`` one-call tasks: the difference over the difference in calls is the work of
one call (its task's loading, session, client, record and figures), start-up and the end-of-run summary left out;
a second pair with shorter answers gives the work per token. The budgets hold the counts measured when they were
set (docs/benchmarks.md, "Work per call") with about 10 % headroom for the reads a socket splits differently.
"""

from __future__ import annotations

import collections
import gc
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import peer_stub  # noqa: E402

SHORT, LONG = 100, 500  # output tokens of each answer (one write) in the two pairs of counted runs
SMALL, LARGE = 20, 50  # one-call tasks in each pair's runs
# Budgets, per call (of LONG output tokens) and per output token.
# Measured 614-616 Python and 699-701 C calls a call (d23109b: 664 and 792; 692e1c2: 553 and 631), under 0.06 of
# each a token; blocks kept after the run -1 to 3 a call (none: what a call allocates is freed). A per-token step in
# Python adds one call a token or more; a per-call step a few; a record kept, a handful of blocks.
PER_CALL = {"python_calls": 680, "c_calls": 770, "blocks_kept": 5}
PER_TOKEN = {"python_calls": 0.25, "c_calls": 0.25}


@pytest.fixture(scope="module")
def stub() -> Iterator[int]:
    with peer_stub.started("--tokens", str(LONG), "--mode", "whole") as (_, port):
        yield port


def _workload(path: Path, tasks: int, tokens: int) -> Path:
    lines = []
    for i in range(tasks):
        lines.append(json.dumps({"format": "replay.trajectory/1", "id": f"cost/{i}"}))
        turn = {"append": [{"role": "user", "content": f"task {i}: " + "word " * 200}],
                "output": {"content": "the " * tokens}, "output_tokens": tokens, "tool_time_s": 0}  # fmt: skip
        lines.append(json.dumps(turn))
    path.write_text("\n".join(lines) + "\n")
    return path


def _counted(port: int, tmp: Path, tasks: int, tokens: int) -> tuple[collections.Counter[str], dict[str, Any]]:
    peer_stub.control(port, f"/bench/reset?mode=whole&tokens={tokens}")
    traj = _workload(tmp / f"w{tasks}.jsonl", tasks, tokens)
    argv = ["run", str(traj), "--host", f"http://127.0.0.1:{port}/v1", "--model", "stub", "-c", "4", "--tool-time",
            "none", "--tasks", str(tasks), "--out", str(tmp / f"run{tasks}.jsonl"), "--json", "-q"]  # fmt: skip
    counts: collections.Counter[str] = collections.Counter()

    def profile(_frame: Any, event: str, _arg: Any) -> None:
        counts[event] += 1

    gc.collect()
    gc.disable()  # no collection (nor the run's own gc callbacks) at a time the machine decides
    blocks = sys.getallocatedblocks()
    threading.setprofile(profile)  # the run's event loop has a thread of its own
    sys.setprofile(profile)
    try:
        res = CliRunner().invoke(main, argv)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        gc.enable()
    gc.collect()
    counts["blocks_kept"] = sys.getallocatedblocks() - blocks
    summary = json.loads(res.stdout)
    assert summary["errors"] == 0 and summary["requests"] == tasks, res.output
    return counts, summary


def _per_call(port: int, tmp: Path, tokens: int) -> dict[str, float]:
    """The counts of one call of ``tokens`` output tokens: two runs' difference over their difference in calls."""
    small, s_sum = _counted(port, tmp, SMALL, tokens)
    large, l_sum = _counted(port, tmp, LARGE, tokens)
    calls = l_sum["requests"] - s_sum["requests"]
    assert l_sum["totals"]["output_tokens"] - s_sum["totals"]["output_tokens"] == calls * tokens
    names = {"python_calls": "call", "c_calls": "c_call", "blocks_kept": "blocks_kept"}
    return {name: (large[key] - small[key]) / calls for name, key in names.items()}


def test_the_work_of_a_call_and_of_a_token_stay_within_their_budgets(stub: int, tmp_path: Path) -> None:
    _counted(stub, tmp_path, 4, SHORT)  # imports and lazy tables: no call's work
    short, long = _per_call(stub, tmp_path, SHORT), _per_call(stub, tmp_path, LONG)
    per_token = {name: (long[name] - short[name]) / (LONG - SHORT) for name in PER_TOKEN}
    over = {f"{name} per call": (round(long[name], 2), budget) for name, budget in PER_CALL.items()
            if long[name] > budget}  # fmt: skip
    over |= {f"{name} per token": (round(per_token[name], 3), budget) for name, budget in PER_TOKEN.items()
             if per_token[name] > budget}  # fmt: skip
    assert not over, f"dearer than the budget (counted, budget): {over}; per call {long}, per token {per_token}"
