"""``replay report RUN --csv DIR``: the run's calls and its summary as CSV, for spreadsheets.

``requests.csv`` has one row per request record, with times in seconds from the run's start and the
latencies already taken; ``summary.csv`` has one row per summary figure, its key flattened with dots (list
items by their ``bucket`` label where they have one, else by position). Empty cells are figures the run does
not have (a host that sent no usage, a call that failed before its first token). A text cell that would start
like a spreadsheet formula (``=``, ``+``, ``-``, ``@``, a tab or CR) starts with a quote instead: a host writes
some of them (a finish reason, a route).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from replay.metrics.breakdowns import ttft_s
from replay.metrics.recipes.recipe_tally import decode_tps
from replay.metrics.summary import steady_window
from replay.metrics.timeline import run_start
from replay.records.run_file import RequestRecord, RunData

REQUEST_COLUMNS = (
    "id", "session", "task", "trajectory", "parent", "turn", "status", "error", "finish_reason", "retries",
    "in_window", "t_call_s", "t_sent_s", "t_headers_s", "t_first_token_s", "t_first_answer_s", "t_last_token_s",
    "t_done_s", "send_wait_s", "ttft_s", "ttfat_s", "e2e_s", "decode_tps", "prompt_tokens", "cached_tokens",
    "output_tokens", "reasoning_tokens", "prompt_tokens_est", "reusable_prefix_tokens", "max_tokens",
    "output_events",
)  # fmt: skip
STAMPS = ("t_call", "t_sent", "t_headers", "t_first_token", "t_first_answer", "t_last_token", "t_done")


def _since(t: float | None, t0: float) -> float | None:
    return None if t is None else t - t0


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def request_row(r: RequestRecord, t0: float, in_window: bool) -> dict[str, Any]:
    """One call as a flat row (times relative to ``t0``)."""
    row: dict[str, Any] = {
        "id": r.id, "session": r.session, "task": r.task, "trajectory": r.trajectory, "parent": r.parent,
        "turn": r.turn, "status": r.status, "error": r.error, "finish_reason": r.finish_reason,
        "retries": r.retries, "in_window": int(in_window),
        "send_wait_s": _diff(r.t_sent, r.t_call), "ttft_s": ttft_s(r), "ttfat_s": _diff(r.t_first_answer, r.t_sent),
        "e2e_s": _diff(r.t_done, r.t_sent), "decode_tps": decode_tps(r),
        "prompt_tokens": r.prompt_tokens, "cached_tokens": r.cached_tokens, "output_tokens": r.output_tokens,
        "reasoning_tokens": r.reasoning_tokens, "prompt_tokens_est": r.prompt_tokens_est,
        "reusable_prefix_tokens": r.reusable_prefix_tokens, "max_tokens": r.max_tokens,
        "output_events": r.output_events,
    }  # fmt: skip
    for stamp in STAMPS:
        row[f"{stamp}_s"] = _since(getattr(r, stamp), t0)
    return row


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, scalar) pairs of a nested summary; list items keyed by their ``bucket`` label or index."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            label = v.get("bucket", i)
            yield from flatten({k: x for k, x in v.items() if k != "bucket"}, f"{prefix}.{label}")
    elif isinstance(value, list):
        yield prefix, "; ".join(map(str, value))
    else:
        yield prefix, value


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, str):
        return text_cell(v)
    return repr(v) if isinstance(v, float) else v  # repr: the shortest text that reads back the same float


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet runs a cell that starts so as a formula (OWASP)


def text_cell(text: str) -> str:
    """A text cell a spreadsheet shows as text: one a host may have sent (a finish reason, a trajectory's id, a
    route) and that starts like a formula gets a leading quote, as OWASP's CSV injection advice says."""
    return "'" + text if text.startswith(FORMULA_START) else text


def write_csv(run: RunData, summary: dict[str, Any], directory: str | Path) -> list[Path]:
    """Write requests.csv and summary.csv into ``directory`` (made if missing); return their paths."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    t0, win = run_start(run), steady_window(run)
    requests, summary_path = out / "requests.csv", out / "summary.csv"
    with open(requests, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=REQUEST_COLUMNS)
        w.writeheader()
        for r in sorted(run.requests, key=lambda r: r.t_sent):
            w.writerow({k: _cell(v) for k, v in request_row(r, t0, r.t_sent in win).items()})
    with open(summary_path, "w", newline="", encoding="utf-8") as f:
        w2 = csv.writer(f)
        w2.writerow(("key", "value"))
        for key, value in flatten(summary):
            w2.writerow((key, _cell(value)))
    return [requests, summary_path]
