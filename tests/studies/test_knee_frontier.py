"""The knee and frontier rules on synthetic level tables: what each rule picks, and what it refuses to call a knee."""

from __future__ import annotations

import pytest

from replay.studies.frontier import pareto_frontier
from replay.studies.knee import GrowthRule, SloRule, find_knee, parse_rule
from replay.verdict.thresholds import parse_all


def level(total: float | None, ttft_p95: float = 0.1, decode_p25: float = 50.0) -> dict:
    return {
        "requests": 100,
        "errors": 0,
        "throughput": {"total_tps": total, "output_tps": None if total is None else total / 100},
        "ttft_s": {"p95": ttft_p95},
        "user_decode_tps": {"p25": decode_p25},
    }


# The overloaded profile's measured sweep (docs/simulated-host.md): total tok/s rises to 4 sessions, then collapses.
OVERLOADED = {1: 6889, 2: 11203, 3: 17757, 4: 19768, 5: 18146, 6: 12902, 7: 12700, 8: 12653}


def table(totals: dict[int, float | None]) -> list[tuple[int, dict]]:
    return [(c, level(t)) for c, t in totals.items()]


def test_growth_knee_of_the_overloaded_sweep_is_at_its_peak():
    knee = find_knee(table(OVERLOADED), GrowthRule(0.10))
    assert knee["concurrency"] == 4 and knee["kind"] == "growth"
    assert "10%" in knee["rule"] and "per doubling" in knee["rule"]


def test_growth_is_scaled_to_a_doubling_so_uneven_levels_are_judged_alike():
    # +8 % from 16 to 24 sessions is ~14 % per doubling: still growing at a 10 % rule, not at a 20 % one.
    totals = {8: 1000.0, 16: 1800.0, 24: 1944.0, 32: 1950.0}
    assert find_knee(table(totals), GrowthRule(0.10))["concurrency"] == 24
    assert find_knee(table(totals), GrowthRule(0.20))["concurrency"] == 16


def test_a_noisy_dip_is_not_a_knee_when_a_higher_level_grows_again():
    totals = {1: 100.0, 2: 190.0, 3: 185.0, 4: 370.0, 8: 380.0}  # 3 dips, 4 doubles 2: growth goes on
    knee = find_knee(table(totals), GrowthRule(0.10))
    assert knee["concurrency"] == 4


def test_no_knee_while_throughput_still_grows_at_the_top():
    knee = find_knee(table({1: 100.0, 2: 200.0, 4: 400.0}), GrowthRule(0.10))
    assert knee["concurrency"] is None and "still grows" in knee["note"]
    assert find_knee(table({4: 400.0}), GrowthRule())["concurrency"] is None


def test_levels_without_a_throughput_are_left_out_and_order_does_not_matter():
    totals = {8: 300.0, 1: 100.0, 2: None, 4: 300.0}
    assert find_knee(table(totals), GrowthRule(0.10))["concurrency"] == 4


def test_slo_knee_is_the_last_level_before_the_first_break():
    slo = tuple(parse_all(["ttft_p95<=2s,user_decode_tps_p25>=30"]))
    rows = [(1, level(1, 0.2, 80)), (2, level(2, 0.5, 60)), (4, level(3, 1.9, 31)), (8, level(4, 2.5, 40))]
    knee = find_knee(rows, SloRule(slo))
    assert knee["concurrency"] == 4 and knee["kind"] == "slo"
    assert "ttft_p95<=2s" in knee["note"]  # what broke at 8
    assert find_knee(rows[:3], SloRule(slo))["concurrency"] is None  # holds everywhere: beyond the sweep
    assert find_knee([(1, level(1, 3.0))], SloRule(slo))["note"].startswith("the lowest level")


def test_parse_rule_reads_fractions_and_percentages_and_names_bad_input():
    slo = tuple(parse_all(["ttft_p95<2s"]))
    assert parse_rule("growth", ()) == GrowthRule(0.10)
    assert parse_rule("growth:25%", ()) == GrowthRule(0.25)
    assert parse_rule("growth:0.05", ()) == GrowthRule(0.05)
    assert parse_rule("slo", slo) == SloRule(slo)
    for bad in ("slope", "growth:-1", "growth:0"):
        with pytest.raises(ValueError, match="--knee"):
            parse_rule(bad, slo)
    with pytest.raises(ValueError, match="needs --slo"):
        parse_rule("slo", ())


def test_frontier_keeps_only_the_levels_no_other_level_beats_on_both_axes():
    rows = [
        (1, level(100, decode_p25=90)),
        (2, level(180, decode_p25=85)),
        (4, level(170, decode_p25=60)),  # dominated by 2: slower per user and less throughput
        (8, level(300, decode_p25=40)),
        (16, level(300, decode_p25=30)),  # dominated by 8: same throughput, slower
    ]
    front = pareto_frontier(rows, gpus=2)
    assert [p["concurrency"] for p in front] == [1, 2, 8]  # fastest per user first
    assert front[2]["total_tps_per_gpu"] == 150 and front[2]["user_decode_tps_p25"] == 40


def test_frontier_without_gpus_is_per_host_and_skips_levels_missing_a_figure():
    rows = [(1, level(100, decode_p25=90)), (2, level(None, decode_p25=80)), (4, level(250, decode_p25=70))]
    front = pareto_frontier(rows, gpus=None)
    assert [(p["concurrency"], p["total_tps_per_gpu"]) for p in front] == [(1, 100), (4, 250)]
