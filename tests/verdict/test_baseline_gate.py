"""The baseline gate's noise (issue 24): from the full windows inside the steady window, so a night's first window
(warm-up) and its last (the drain, cut short) never widen the allowance.

Nights are made here as their summaries: a steady host's windows drawn from a seeded model (jitter of 15 % a window
around a slow drift that both nights share, as a workload's growing contexts make), a first window half warm-up and
a last one cut short by the stop, as ``replay run --window`` writes them. The tests count outcomes over seeds.
"""

from __future__ import annotations

import math
import random

from replay.verdict.baseline import compare

KEYS = {"total_tps": 30_000.0, "output_tps": 900.0, "user_decode_tps_p25": 60.0, "user_decode_tps_p50": 70.0,
        "ttft_p50_s": 0.5, "ttft_p95_s": 2.0, "host_hit_ratio": 0.9}  # fmt: skip
PATHS = {"total_tps": ("throughput", "total_tps"), "output_tps": ("throughput", "output_tps"),
         "user_decode_tps_p25": ("user_decode_tps", "p25"), "user_decode_tps_p50": ("user_decode_tps", "p50"),
         "ttft_p50_s": ("ttft_s", "p50"), "ttft_p95_s": ("ttft_s", "p95"),
         "host_hit_ratio": ("cache", "host_hit_ratio")}  # fmt: skip


def night(seed: int, speed: float = 1.0, n: int = 20, length: float = 60.0, jitter: float = 0.15) -> dict:
    """A summary of ``n`` steady windows (plus a warm-up one and a short last one) of a host ``speed`` times as fast."""
    rng = random.Random(seed)
    rows = []

    def window(i: int, start: float, end: float, level: float) -> dict:
        drift = 1 + 0.3 * i / n  # the same slow climb every night of this workload
        row = {"index": i, "start_s": start, "end_s": end, "requests": 100}
        for key, base in KEYS.items():
            if key == "host_hit_ratio":
                row[key] = base * (1 + rng.gauss(0, 0.01))
            elif key.startswith("ttft"):
                row[key] = base * math.exp(rng.gauss(0, jitter)) / speed
            else:
                row[key] = base * math.exp(rng.gauss(0, jitter)) * drift * level * speed
        return row

    rows.append(window(0, 0.0, length, 0.4))  # warm-up: the steady window opens 40 s in
    for i in range(1, n + 1):
        rows.append(window(i, i * length + 0.001 * i, (i + 1) * length + 0.001 * (i + 1), 1.0))
    stop = (n + 1) * length + 0.001 * n
    rows.append(window(n + 1, stop + 0.001, stop + 9.0, 0.01))  # the drain after the stop: a few calls
    steady = rows[1:-1]
    summary = {"window": {"start_s": 40.0, "end_s": stop}, "windows": rows, "error_rate": 0.0, "e2e_s": {"p50": 9.0}}
    for key, (a, b) in PATHS.items():
        summary.setdefault(a, {})[b] = sum(r[key] for r in steady) / len(steady)
    return summary


def test_only_the_full_windows_inside_the_steady_window_are_samples():
    from replay.verdict.baseline import steady_windows

    s = night(1)
    chosen = steady_windows(s)
    assert [w["index"] for w in chosen] == list(range(1, 21))  # not the warm-up window, not the drain


def test_a_30_percent_fall_is_flagged_in_every_seed_and_the_same_host_passes_against_itself():
    flagged = passed = 0
    for seed in range(5):
        before = night(100 + seed)
        flagged += "throughput.total_tps" in compare(night(200 + seed, speed=0.7), before, 0.10)["regressed"]
        passed += compare(night(300 + seed), before, 0.10)["regressed"] == []
    assert (flagged, passed) == (5, 5)


def test_the_noise_says_how_many_windows_it_came_from():
    rows = {r["figure"]: r for r in compare(night(1), night(2), 0.10)["figures"]}
    assert rows["throughput.total_tps"]["noise_windows"] == {"current": 20, "baseline": 20}
    assert rows["e2e_s.p50"]["noise_windows"] is None  # no window series: judged on the tolerance alone


def _short_night(values: list[float]) -> dict:
    """The issue's night: -c 2 --duration 10 --window 2, its windows' total tok/s as replay wrote them."""
    ends = [2.0, 4.0, 6.0, 8.0, 10.0, 10.8]
    rows = [{"index": i, "start_s": ends[i - 1] if i else 0.0, "end_s": e, "total_tps": v}
            for i, (e, v) in enumerate(zip(ends, values, strict=True))]  # fmt: skip
    mean = sum(values[1:5]) / 4
    return {"window": {"start_s": 0.71, "end_s": 10.0}, "windows": rows, "throughput": {"total_tps": mean}}


def test_the_issues_74_percent_fall_is_flagged():
    fast = _short_night([40_100, 58_300, 85_900, 112_000, 131_000, 1_100])  # --sim-profile fast
    slow = _short_night([11_189, 15_474, 23_819, 30_797, 36_333, 286])  # --sim-profile default: 74 % less
    result = compare(slow, fast, 0.10)
    assert "throughput.total_tps" in result["regressed"], result["figures"][0]


def test_one_window_closed_late_leaves_the_others_full():
    """Windows are due at fixed times: one closed late by a busy machine is longer and the next shorter. Measured
    against the longest window, every other one had read as short (1-5 usable windows of 20 on a starved night)."""
    from replay.verdict.baseline import steady_windows

    s = night(1)
    late = s["windows"][5]
    late["end_s"] += 0.5 * 60.0  # window 5 closed 30 s late; window 6 starts there and ends when it was due
    s["windows"][6]["start_s"] = late["end_s"]
    chosen = [w["index"] for w in steady_windows(s)]
    assert chosen == [i for i in range(1, 21) if i != 6]  # the late one is a sample; the one cut short is not


def _limited(summary: dict, how: str) -> dict:
    client = {"cpu_share": 0.2, "loop_lag_p99_ms": 180.0, "machine_load": 14.0, "saturated": False, "held_up": False}
    client[how] = True
    return {**summary, "client": client}


def test_a_baseline_set_by_a_busy_client_is_not_judged():
    """A held-up or saturated baseline understates the host, so tonight would be flattered: no verdict either way."""
    for how in ("held_up", "saturated"):
        before = _limited(night(100), how)
        for tonight in (night(300), night(200, speed=0.7)):
            result = compare(tonight, before, 0.10)
            assert not result["judged"] and result["regressed"] == [], how
            assert result["unjudged"].startswith("the baseline run's figures are not the host's"), result["unjudged"]


def test_a_busy_client_tonight_is_judged_only_when_nothing_regressed():
    """Tonight held up makes its own figures worse: a regression may be its own (not judged), but no regression in
    spite of it is a pass."""
    before = night(100)
    fine = compare(_limited(night(300), "held_up"), before, 0.10)
    assert fine["judged"] and fine["regressed"] == []
    slow = compare(_limited(night(200, speed=0.7), "held_up"), before, 0.10)
    assert not slow["judged"] and "tonight's figures are not the host's: its client was held up" in slow["unjudged"]
    assert any(r["regressed"] for r in slow["figures"])  # what the figures alone would say is kept, row by row


def test_an_unjudged_comparison_fails_the_run_with_code_3_and_a_breach_keeps_its_2():
    from replay.verdict.baseline import apply

    result = compare(night(300), _limited(night(100), "held_up"), 0.10)
    for code, expected in ((0, 3), (2, 2)):
        summary = {"verdict": {"passed": code == 0, "exit_code": code, "reasons": []}}
        apply(summary, result, "last-night.jsonl")
        assert summary["verdict"]["exit_code"] == expected and not summary["verdict"]["passed"]
        assert summary["verdict"]["reasons"][-1].startswith("the baseline comparison was not judged")
