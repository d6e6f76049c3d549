"""Every unit conversion a claim can need, the verdict rules, the what-if arithmetic and the claims file's errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.studies.claim_units import UnitError, from_base, parse_unit, parse_value, project_wall
from replay.studies.claims import ClaimsError, Defaults, levels_needed, load_claims
from replay.studies.claims_verify import _what_if_row, measure, verdict

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("5.14M", 5_140_000),
        ("20.23M", 20_230_000),
        ("29,300", 29_300),
        ("1k", 1_000),
        ("45%", 0.45),
        ("0.52", 0.52),
        (611, 611.0),
        (51.5, 51.5),
        ("1_000", 1_000),
        ("2G", 2e9),
    ],
)
def test_claimed_values_with_scales_separators_and_percent(text, value):
    assert parse_value(text) == pytest.approx(value)


@pytest.mark.parametrize("bad", ["fast", "5 million", "1.2.3", True, "12x"])
def test_unreadable_values_say_what_is_expected(bad):
    with pytest.raises(UnitError, match="expected a number"):
        parse_value(bad)


def test_tokens_per_minute_is_tokens_per_second_times_sixty():
    u = parse_unit("tokens/min")
    assert (u.kind, u.seconds, u.per) == ("rate", 60.0, "host")
    assert from_base(337_166.7, u) == pytest.approx(20.23e6, rel=1e-6)  # 20.23M/min is 337,167 tokens/s


def test_tokens_per_second_and_per_hour():
    assert from_base(1234.5, parse_unit("tokens/s")) == 1234.5
    assert from_base(100.0, parse_unit("tokens/h")) == 360_000.0
    assert from_base(100.0, parse_unit("tok/sec")) == 100.0


def test_per_gpu_divides_the_host_rate_by_its_gpus():
    assert from_base(234_400.0, parse_unit("tokens/s/gpu"), gpus=8) == 29_300.0
    assert from_base(1000.0, parse_unit("tokens/min/gpu"), gpus=4) == 15_000.0
    with pytest.raises(UnitError, match="GPU count is unknown"):
        from_base(1000.0, parse_unit("tokens/s/gpu"), gpus=None)


def test_per_user_and_per_request_are_the_per_call_speed_as_it_is():
    for text in ("tokens/s/user", "tokens/s/request", "tokens/s / request"):
        u = parse_unit(text)
        assert u.per in ("user", "request")
        assert from_base(41.0, u, gpus=8) == 41.0  # never divided by GPUs
    assert from_base(41.0, parse_unit("tokens/min/user")) == 2460.0


def test_latencies_in_seconds_and_milliseconds():
    assert from_base(0.52, parse_unit("s")) == 0.52
    assert from_base(0.52, parse_unit("ms")) == pytest.approx(520.0)


def test_a_share_is_a_fraction():
    assert from_base(0.45, parse_unit("share")) == 0.45


@pytest.mark.parametrize("bad", ["tokens/fortnight", "tokens/s/node", "requests/s", "kg"])
def test_unknown_units_say_what_is_expected(bad):
    with pytest.raises(UnitError, match="expected tokens/s"):
        parse_unit(bad)


def test_verdict_rules_at_their_tolerance():
    assert verdict(100, 90, "at_least", 0.1) == "pass"
    assert verdict(100, 89.9, "at_least", 0.1) == "fail"
    assert verdict(0.52, 0.572, "at_most", 0.1) == "pass"
    assert verdict(0.52, 0.58, "at_most", 0.1) == "fail"
    assert verdict(3000, 2701, "within", 0.1) == "pass"
    assert verdict(3000, 3301, "within", 0.1) == "fail"
    assert verdict(1000, None, "at_least", 0.1) == "not measured"


def test_the_seeds_what_if_arithmetic():
    # 1,000 output tokens at 100 tok/s = 10 s of decode, + 2 s overhead + 8 s tools = 20 s; at 1,000 tok/s 11 s.
    assert project_wall(20.0, 10.0, 10.0) == pytest.approx(11.0)
    _defaults, claims = load_claims(ROOT / "docs" / "claims-example.toml")
    (what_if,) = [c for c in claims if c.kind == "what-if"]
    row = _what_if_row(what_if)
    assert row["details"]["turn_from_s"] == pytest.approx(20.0)
    assert row["details"]["turn_to_s"] == pytest.approx(11.0)
    assert row["measured"] == pytest.approx(0.45)
    assert row["verdict"] == "pass"


def test_measure_reads_the_claims_percentile_and_falls_back_to_the_nearest_one():
    _defaults, claims = load_claims(ROOT / "docs" / "claims-example.toml")
    by_name = {c.name: c for c in claims}
    summary = {
        "throughput": {"total_tps": 80_000.0, "output_tps": 800.0},
        "ttft_s": {"p50": 0.4, "p95": 2.0},
        "user_decode_tps": {"p25": 30.0, "p50": 40.0, "p75": 50.0},
    }
    total = by_name["BLACKBOX 8xB300: total tokens/min at 48 conversations"]
    assert measure(total, summary, gpus=8)[:2] == (4_800_000.0, "throughput.total_tps")
    ttft = by_name["BLACKBOX 8xB300: median TTFT at 32"]
    assert measure(ttft, summary, gpus=8)[:2] == (0.4, "ttft_s.p50")
    verda = by_name["Verda SGLang DeepSeek V4.1 Flash: output tokens/s per GPU at peak"]
    assert measure(verda, summary, gpus=8)[0] == 100.0
    speed = by_name["BLACKBOX 8xB300: median output speed per request at 32"]
    speed.percentile = "p90"  # replay reports p25, p50, p75 for speeds
    value, key, unmatched = measure(speed, summary, gpus=8)
    assert (value, key) == (50.0, "user_decode_tps.p75") and "used p75" in unmatched[0]


def test_claims_that_share_a_concurrency_share_one_run():
    defaults, claims = load_claims(ROOT / "docs" / "claims-example.toml")
    # 8, 16, 32 (five claims), 48, 64, 1 (seven claims), and peak: the peak levels
    assert levels_needed(claims, defaults) == [1, 2, 4, 8, 16, 32, 48, 64]
    no_peak = [c for c in claims if c.concurrency != "peak"]
    assert levels_needed(no_peak, Defaults()) == [1, 8, 16, 32, 48, 64]


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "claims.toml"
    path.write_text(body)
    return path


CLAIM = """
[[claim]]
name = "x"
metric = "{metric}"
value = "1M"
unit = "{unit}"
conditions = {{ concurrency = {concurrency} }}
"""


@pytest.mark.parametrize(
    ("metric", "unit", "concurrency", "message"),
    [
        ("total_tokens", "tokens/s/user", "8", "does not fit metric total_tokens"),
        ("output_speed", "tokens/min", "8", "does not fit metric output_speed"),
        ("ttft", "tokens/s", "8", "does not fit metric ttft"),
        ("total_tokens", "tokens/week", "8", "unit 'tokens/week'"),
        ("speed", "tokens/s", "8", "metric 'speed'"),
        ("total_tokens", "tokens/s", "0", "conditions.concurrency"),
        ("total_tokens", "tokens/s", '"most"', "conditions.concurrency"),
    ],
)
def test_a_bad_claim_names_the_file_the_claim_and_the_field(tmp_path, metric, unit, concurrency, message):
    path = write(tmp_path, CLAIM.format(metric=metric, unit=unit, concurrency=concurrency))
    with pytest.raises(ClaimsError) as err:
        load_claims(path)
    text = str(err.value)
    assert text.startswith(f"{path}: claim 1 (x): ") and message in text and "\n" not in text


def test_a_file_that_is_not_toml_or_has_no_claims(tmp_path):
    with pytest.raises(ClaimsError, match="not TOML"):
        load_claims(write(tmp_path, "[[claim]\nname = 1"))
    with pytest.raises(ClaimsError, match=r"no \[\[claim\]\] tables"):
        load_claims(write(tmp_path, "[verify]\ntolerance = '5%'\n"))
    with pytest.raises(ClaimsError, match=r"\[verify\]: duration"):
        load_claims(
            write(tmp_path, "[verify]\nwindow = 'soon'\n" + CLAIM.format(metric="ttft", unit="s", concurrency=1))
        )
