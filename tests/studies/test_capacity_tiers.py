"""``replay capacity --tier``: every tier's capacity in one search, each equal to a search for that tier alone, in
fewer runs than separate searches (levels reused between tiers), on the virtual clock; rebuilt by ``replay report``."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.studies.tiers import Tier, parse_tiers

TIERS = ("a:10s:20", "b:10s:60", "c:10s:120")
COMMON = ["--sim-profile", "moe-8gpu", "--virtual", "--window", "20s", "--warmup", "5s", "--power-kw", "10",
          "--json", "-q"]  # fmt: skip


def _capacity(*args: str) -> dict:
    res = CliRunner().invoke(main, ["capacity", *args, *COMMON], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("tiers") / "cap"
    args = [a for t in TIERS for a in ("--tier", t)]
    return _capacity(*args, "--out", str(out)), out / "capacity.json"


def test_each_tier_equals_its_own_search_in_fewer_runs(tiered: tuple[dict, Path], tmp_path: Path) -> None:
    doc, _ = tiered
    assert [t["name"] for t in doc["tiers"]] == ["a", "b", "c"]
    separate = 0
    for tier in doc["tiers"]:
        alone = _capacity("--slo", ",".join(tier["slo"]), "--out", str(tmp_path / tier["name"]))
        assert tier["slo"] == [f"ttft_p75<={tier['ttft_s']:g}s", f"user_decode_tps_p25>={tier['speed_tps']:g}"]
        assert (tier["max_concurrency"], tier["first_broken"]) == (alone["max_concurrency"], alone["first_broken"])
        assert [(p["concurrency"], p["step"], p["ok"]) for p in tier["probes"]] == [
            (p["concurrency"], p["step"], p["ok"]) for p in alone["probes"]
        ]
        assert tier["runs"] == alone["runs"]
        assert tier["per_gpu"] == alone["per_gpu"] and tier["per_mw"] == alone["per_mw"]
        separate += alone["runs"]
    assert doc["separate_runs"] == separate
    assert doc["runs"] == len(doc["levels"]) < separate  # levels reused between the tiers
    assert len({(lv["concurrency"], lv["attempt"]) for lv in doc["levels"]}) == doc["runs"]  # each run once
    bounds = [t["max_concurrency"] for t in doc["tiers"]]
    assert bounds == sorted(bounds, reverse=True) and bounds[0] > bounds[1]  # a faster floor serves fewer agents
    a = doc["tiers"][0]
    assert a["per_gpu"] == a["max_concurrency"] / 8 and a["per_mw"] == pytest.approx(a["max_concurrency"] / 0.01)


def test_the_report_repeats_the_search_over_the_index(tiered: tuple[dict, Path]) -> None:
    doc, index = tiered
    res = CliRunner().invoke(main, ["report", str(index), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    again = orjson.loads(res.stdout)
    assert again["tiers"] == doc["tiers"] and again["runs"] == doc["runs"]
    assert [lv["concurrency"] for lv in again["levels"]] == [lv["concurrency"] for lv in doc["levels"]]
    res = CliRunner().invoke(main, ["report", str(index)], catch_exceptions=False)
    assert res.exit_code == 0 and "max agents" in res.output and f"{doc['runs']} runs for all tiers" in res.output
    page = index.parent / "tiers.html"
    res = CliRunner().invoke(main, ["report", str(index), "--html", str(page)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    html = page.read_text()
    assert "Capacity per SLO tier" in html and html.count("<svg") == 1  # each tier's boundary on one chart
    assert all(f"{t['name']}: {t['max_concurrency']} agents" in html for t in doc["tiers"] if t["max_concurrency"])


def test_tiers_parse_and_the_aa_preset() -> None:
    assert parse_tiers(["fast:2s:60", "slow:500ms:20.5", "x:3:10"]) == [
        Tier("fast", 2.0, 60.0), Tier("slow", 0.5, 20.5), Tier("x", 3.0, 10.0)]  # fmt: skip
    assert [t.name for t in parse_tiers(["aa"])] == ["20tps", "60tps", "100tps", "180tps"]
    for bad in ("fast:2s", "fast:x:60", ":2:60", "a:1:1,a:2:2"):
        with pytest.raises(ValueError, match="NAME:TTFT:SPEED"):
            parse_tiers([bad])
    with pytest.raises(ValueError, match="must differ"):
        parse_tiers(["a:1:1", "a:2:2"])
    res = CliRunner().invoke(main, ["capacity", "--tier", "a:1:1", "--slo", "ttft_p95<1s", "--virtual"])
    assert res.exit_code != 0 and "not both" in res.output
