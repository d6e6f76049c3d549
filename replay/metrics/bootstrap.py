"""Run-to-run noise of a run's headline figures, by the bootstrap: how much would a figure move if the same run
were made again?

Two resampling units, each the one its figure is made of (docs/studies.md):

- **tasks** for per-call and per-task figures (TTFT, time to first answer token, end-to-end, per-user decode speed,
  host cache hit, error rate, task wall time): the run's tasks are drawn with replacement, each bringing all of
  its calls, and the figure is computed again over the draw. Calls of one task are alike (its context grows
  turn by turn), so tasks, not calls, are the independent units.
- **windows** for throughput: the steady window is cut into equal sub-windows, tokens placed in them as the
  summary places them (input at the first token, output at the reads that carried it), and the sub-windows are
  drawn with replacement. This ignores the correlation between neighbouring sub-windows, so it understates
  the noise of a host whose rate drifts slowly.

Percentiles here are the summary's own (``replay.histogram``: values held at 3 significant digits, ranked by its
``rank``, ⌈p × n / 100⌉), over the draw (weights = how often each task was drawn); the point estimates a comparison
shows are always the summary's own figures.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from replay.histogram import TPS_SCALE, US, equivalent, rank, units
from replay.metrics.recipes.recipe_tally import decode_tps
from replay.metrics.summary import steady_window
from replay.records.run_file import RequestRecord, RunData

RESAMPLES = 400
MAX_WINDOWS = 20
ROWS_PER_CHUNK = 64

CallValue = Callable[[RequestRecord], float | None]


def _ttft(r: RequestRecord) -> float | None:
    return r.t_first_token - r.t_sent if r.t_first_token else None


def _ttfat(r: RequestRecord) -> float | None:
    return r.t_first_answer - r.t_sent if r.t_first_answer else None


def _e2e(r: RequestRecord) -> float | None:
    return r.t_done - r.t_sent if r.t_done else None


PER_CALL: dict[str, tuple[CallValue, float]] = {
    "ttft_s.p50": (_ttft, 50),
    "ttft_s.p95": (_ttft, 95),
    "ttfat_s.p50": (_ttfat, 50),
    "ttfat_s.p95": (_ttfat, 95),
    "e2e_s.p50": (_e2e, 50),
    "user_decode_tps.p25": (decode_tps, 25),
    "user_decode_tps.p50": (decode_tps, 50),
}
WINDOWED = {"throughput.total_tps": 1.0, "throughput.output_tps": 1.0, "throughput.total_tokens_per_min": 60.0}
METHOD = {
    **dict.fromkeys(PER_CALL, "tasks"),
    "cache.host_hit_ratio": "tasks",
    "error_rate": "tasks",
    "tasks.wall_s": "tasks",
    **dict.fromkeys(WINDOWED, "windows"),
}


def _draw_counts(rng: np.random.Generator, groups: int, n: int) -> np.ndarray:
    """(n, groups): how often each group was drawn in each of n resamples of ``groups`` draws."""
    draws = rng.integers(0, groups, size=(n, groups))
    return np.stack([np.bincount(row, minlength=groups) for row in draws])


def _weighted_percentile(values: np.ndarray, codes: np.ndarray, counts: np.ndarray, q: float,
                         scale: float = US) -> np.ndarray:  # fmt: skip
    """Per resample, the percentile ``q`` of ``values`` (positive) with each value weighted by its group's count,
    by the summary's method (``replay.histogram``), vectorised over the resamples."""
    held = units(values, scale)
    order = np.argsort(held, kind="stable")
    v, c = equivalent(held[order]) / scale, codes[order]
    out = np.empty(counts.shape[0])
    for start in range(0, counts.shape[0], ROWS_PER_CHUNK):
        w = counts[start : start + ROWS_PER_CHUNK][:, c]
        cum = np.cumsum(w, axis=1)
        target = np.array([rank(q, int(total)) for total in cum[:, -1]], dtype=np.int64)
        idx = np.argmax(cum >= target[:, None], axis=1)
        out[start : start + ROWS_PER_CHUNK] = v[idx]
    return out


def _ratio_of_sums(num: np.ndarray, den: np.ndarray, counts: np.ndarray) -> np.ndarray:
    n, d = counts @ num, counts @ den
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d > 0, n / np.where(d > 0, d, 1), np.nan)


def _codes(keys: list[int]) -> tuple[np.ndarray, int]:
    uniq, codes = np.unique(np.asarray(keys), return_inverse=True)
    return codes, len(uniq)


def _task_figures(run: RunData, keys: list[str], rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    win = steady_window(run)
    measured = [r for r in run.requests if r.ok and r.t_sent in win]
    tasks = sorted({r.task for r in run.requests})
    if len(tasks) < 2:
        return {}
    index = {t: i for i, t in enumerate(tasks)}
    counts = _draw_counts(rng, len(tasks), n)
    out: dict[str, np.ndarray] = {}
    for key in keys:
        if key in PER_CALL:
            fn, q = PER_CALL[key]
            pairs = [(v, index[r.task]) for r in measured if (v := fn(r)) is not None]
            if pairs:
                values, codes = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
                scale = TPS_SCALE if key.startswith("user_decode") else US
                out[key] = _weighted_percentile(values, codes, counts, q, scale)
        elif key == "cache.host_hit_ratio":
            num, den = np.zeros(len(tasks)), np.zeros(len(tasks))
            for r in measured:
                if r.prompt_tokens is not None and r.cached_tokens is not None:
                    num[index[r.task]] += r.cached_tokens
                    den[index[r.task]] += r.prompt_tokens
            out[key] = _ratio_of_sums(num, den, counts)
        elif key == "error_rate":  # calls that failed after their retries: final attempts only, as the summary
            num, den = np.zeros(len(tasks)), np.zeros(len(tasks))
            for r in run.requests:
                if getattr(r, "final", True):
                    num[index[r.task]] += r.error is not None
                    den[index[r.task]] += 1
            out[key] = _ratio_of_sums(num, den, counts)
    if "tasks.wall_s" in keys:
        walls = np.array([t.t_end - t.t_start for t in run.tasks if t.complete])
        if walls.size >= 2:
            out["tasks.wall_s"] = (_draw_counts(rng, walls.size, n) @ walls) / walls.size
    return out


def window_tokens(run: RunData, bins: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(total tokens, output tokens) per equal sub-window of the steady window, and a sub-window's length (s)."""
    win = steady_window(run)
    width = win.seconds / bins
    total, output = np.zeros(bins), np.zeros(bins)

    def where(t: float) -> int | None:
        return min(bins - 1, int((t - win.start) / width)) if t in win else None

    for r in run.requests:
        if r.t_first_token is not None and (i := where(r.t_first_token)) is not None:
            total[i] += r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_est
        scale = r.output_tokens / r.output_events if (r.output_tokens and r.output_events) else 1.0
        for dt, k in zip(r.chunks[0::2], r.chunks[1::2], strict=True):
            if (i := where(r.t_sent + dt)) is not None:
                total[i] += k * scale
                output[i] += k * scale
    return total, output, width


def _window_figures(run: RunData, keys: list[str], rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    win = steady_window(run)
    bins = min(MAX_WINDOWS, max(2, int(win.seconds)))
    if win.seconds <= 0 or not any(k in WINDOWED for k in keys):
        return {}
    total, output, width = window_tokens(run, bins)
    counts = _draw_counts(rng, bins, n)
    out = {}
    for key in keys:
        if key in WINDOWED:
            per_bin = output if key == "throughput.output_tps" else total
            out[key] = (counts @ per_bin) / (bins * width) * WINDOWED[key]
    return out


def bootstrap(run: RunData, keys: list[str], resamples: int = RESAMPLES, seed: int = 0) -> dict[str, np.ndarray]:
    """Per figure key (those in ``METHOD``), ``resamples`` bootstrap estimates; keys it cannot resample left out."""
    rng = np.random.default_rng(seed)
    known = [k for k in keys if k in METHOD]
    return {**_task_figures(run, known, rng, resamples), **_window_figures(run, known, rng, resamples)}


def describe(resamples: int = RESAMPLES) -> dict[str, Any]:
    """What the noise estimate is, for the output."""
    return {
        "method": "bootstrap: tasks resampled for per-call and per-task figures, sub-windows of the steady window"
        f" (up to {MAX_WINDOWS}) for throughput",
        "resamples": resamples,
        "interval": "95 % percentile interval of the ratio B/A, each run resampled on its own",
    }
