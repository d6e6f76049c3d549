"""Routes and speed modes: a host serving 30 % of requests through a slower fallback route, against the truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from replay.loops.closed_loop import LoadConfig
from replay.metrics.host.host_tally import tally_of
from replay.metrics.host.routes import speed_modes as _modes
from replay.metrics.summary import summarize
from replay.records.reader import read_run
from replay.records.run_file import RequestRecord
from replay.reports.text_report import to_text
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from tests.support.trajectories import simple_turns, write_trajectory


def _run(tmp: Path, fallback: str | None, dialect: str | None = None) -> tuple[Any, list[dict]]:
    work = tmp / "w.jsonl"
    for i in range(30):
        write_trajectory(work, f"w{i}", simple_turns(10, output_tokens=24))
    spec = RunSpec(
        trajectories=[str(work)],
        load=LoadConfig(concurrency=8, tool_time=ToolTimePolicy.parse("none")),
        out=str(tmp / "run.jsonl"),
        sim_profile="fast",
        sim_fallback=fallback,
        sim_dialect=dialect,
        progress=False,
    )
    result = execute(spec)
    truth = [orjson.loads(line) for line in (tmp / "run.truth.jsonl").read_bytes().splitlines()]
    return result, truth


@pytest.fixture(scope="module")
def fallback_run(tmp_path_factory) -> tuple[Any, list[dict]]:
    return _run(tmp_path_factory.mktemp("fallback"), "0.3:default", dialect="openrouter")


def test_route_shares_match_the_truth_and_the_fallback_share(fallback_run) -> None:
    result, truth = fallback_run
    routes = result.summary["routes"]
    assert set(routes) == {"primary", "fallback:default"}
    served = [t["route"] for t in truth if t["status"] == "ok"]
    true_share = served.count("fallback:default") / len(served)
    assert routes["fallback:default"] == pytest.approx(true_share, abs=1e-9)
    assert abs(routes["fallback:default"] - 0.3) <= 0.03
    assert len(served) == 300


def _host_timed(result: Any, truth: list[dict]) -> tuple[Any, dict]:
    """The run's records with each call's first and last token at the host's engine times (its truth log: the end
    of the step that sampled the first token, and the decode's engine time after it), and their summary. Engine
    times follow the step model, anchored to the schedule however late the machine runs; read times, and the sim's
    own write times, do not: a call whose tokens came in one read after a stall of the whole (shared) machine gives
    an absurd speed (p50 680,103 tok/s was seen under `pytest -n 4` beside a CPU hog per core), and the detector,
    which issue 29 reworks, then finds a second mode on one route. So the detector is judged here on the speeds the
    host's engine served; the live figures are checked to equal the report's (below)."""
    run = read_run(result.path)
    by_id = {t["request_id"]: t for t in truth}
    for rec in run.requests:
        t = by_id[rec.id]
        rec.t_first_token, rec.t_last_token = t["prefill_end"], t["prefill_end"] + t["decode_time"]
    return run, summarize(run)


def test_two_speed_modes_are_found_with_the_fallback_as_the_slow_one(fallback_run) -> None:
    result, truth = fallback_run
    run, summary = _host_timed(result, truth)
    modes = summary["speed_modes"]
    assert len(modes) == 2
    slow, fast = modes
    assert slow["route"] == "fallback:default" and fast["route"] == "primary"
    assert slow["route_share"] > 0.95 and fast["route_share"] > 0.95
    measured_share = summary["routes"]["fallback:default"]
    assert abs(slow["share"] - measured_share) <= 0.03
    assert fast["user_decode_tps_p50"] > 2 * slow["user_decode_tps_p50"]
    assert sum(m["share"] for m in modes) == pytest.approx(1.0)
    text = to_text(summary, run.header)
    assert "two speed modes" in text and "routes: primary" in text


def test_the_report_rebuilds_them_from_the_run_file(fallback_run) -> None:
    result, _ = fallback_run
    again = summarize(read_run(result.path))
    assert again["routes"] == result.summary["routes"]
    assert again["speed_modes"] == result.summary["speed_modes"]


def test_one_route_one_mode(tmp_path: Path) -> None:
    result, truth = _run(tmp_path, None)
    _, summary = _host_timed(result, truth)
    assert result.summary["routes"] == summary["routes"] == {"primary": 1.0}
    assert len(summary["speed_modes"]) == 1  # on the host engine's own times (the client's may hold a stall)
    assert result.summary["served"]["models"] == {"replay-sim": 1.0}
    assert "fallback" not in result.summary and "fallback" not in to_text(result.summary, result.header)
    rows = result.summary["speed_by_load"]["rows"]
    assert rows and sum(r["requests"] for r in rows) <= result.summary["window"]["requests"]


def _rec(tps: float, n: int = 101, route: str = "a") -> RequestRecord:
    rec = RequestRecord(id="x", session=0, task=0, trajectory="t", turn=0, t_sent=0.0)
    rec.t_first_token, rec.t_last_token, rec.output_tokens = 0.1, 0.1 + (n - 1) / tps, n
    rec.headers = {"x-replay-route": route}
    return rec


def speed_modes(records: list[RequestRecord]) -> list:
    return _modes(tally_of(records))


def test_the_detector_on_made_up_speeds() -> None:
    rng = np.random.default_rng(1)
    one = [_rec(float(v)) for v in rng.normal(100, 8, 200)]
    assert len(speed_modes(one)) == 1
    two = [_rec(float(v), route="fast") for v in rng.normal(300, 20, 140)]
    two += [_rec(float(v), route="base") for v in rng.normal(90, 8, 60)]
    modes = speed_modes(two)
    assert [m["route"] for m in modes] == ["base", "fast"]
    assert modes[0]["share"] == pytest.approx(0.3) and modes[0]["user_decode_tps_p50"] == pytest.approx(90, rel=0.05)
    few = [_rec(300.0)] * 99 + [_rec(50.0)]  # one odd call is not a mode
    assert len(speed_modes(few)) == 1


def test_host_sent_route_and_tier_names_are_bounded() -> None:
    """Issue 25: a host that names a new route every call (and a long one) once made a 935 KB report line."""
    from replay.metrics.host.routes import MAX_NAME, MAX_NAMES, OTHER

    records = [
        RequestRecord(id=f"r{i}", session=0, task=0, trajectory="t", turn=i, t_sent=0.0, t_first_token=0.1,
                      t_last_token=0.2 + i * 1e-3, t_done=0.3, output_tokens=20,
                      served={"provider": f"route-{i}-" + "x" * 5000, "service_tier": "\x1b[31m" + "t" * (i % 300)},
                      headers={"x-ratelimit-limit-" + "".join(chr(97 + int(d)) for d in str(i)): "10"})
        for i in range(1000)
    ]  # fmt: skip
    t = tally_of(records)
    assert len(t.routes) == MAX_NAMES + 1 and t.routes[OTHER] == 1000 - MAX_NAMES
    assert len(t.tiers) <= MAX_NAMES + 1 and all(len(k) <= MAX_NAME and k.isprintable() for k in t.tiers)
    assert all(len(k) <= MAX_NAME for k in t.routes) and len(t.limits) == MAX_NAMES
    assert sum(sum(b.values()) for b in t.speeds.values()) == 1000
    assert all(len(b) <= MAX_NAMES + 1 for b in t.speeds.values())


def test_the_fallback_share_is_found_from_the_host_fields_and_tied_to_the_served_route(fallback_run) -> None:
    result, truth = fallback_run
    served = [t["route"] for t in truth if t["status"] == "ok"]
    fb = result.summary["fallback"]
    assert fb["share"] == pytest.approx(served.count("fallback:default") / len(served), abs=1e-9)
    assert abs(fb["share"] - 0.3) <= 0.03 and fb["requests"] == served.count("fallback:default")
    assert fb["served"]["route"] == "fallback:default"
    # the simulated host's route header, OpenRouter's router metadata (the preset opts in), and the slower
    # speed mode on a route of its own all say it
    assert {"x-replay-route", "openrouter_metadata", "route"} <= set(fb["by"])
    assert result.summary["served"]["routes"] == result.summary["routes"]
    assert "fallback: " in to_text(result.summary, result.header)
    assert summarize(read_run(result.path))["fallback"] == fb


def test_vercel_routing_metadata_says_which_calls_fell_back(tmp_path: Path) -> None:
    result, truth = _run(tmp_path, "0.3:default", dialect="vercel")
    served = [t["route"] for t in truth if t["status"] == "ok"]
    fb = result.summary["fallback"]
    assert "gateway.routing" in fb["by"] and fb["served"]["route"] == "fallback:default"
    assert fb["requests"] == served.count("fallback:default")


def _load_rec(tps: float, inflight: int, route: str = "primary", model: str = "m", tier: str | None = None):
    rec = _rec(tps, route=route)
    rec.inflight = inflight
    rec.served = {"model": model, **({"service_tier": tier} if tier else {})}
    return rec


def test_two_speed_clusters_from_load_are_no_fallback() -> None:
    """One model, route and tier; speed halves when many calls are in flight (the batch grows): two clear
    clusters, which the report calls load, with speed by calls in flight, and neither two modes nor a fallback."""
    rng = np.random.default_rng(2)
    recs = [_load_rec(float(v), 1) for v in rng.normal(200, 10, 80)]
    recs += [_load_rec(float(v), 12) for v in rng.normal(100, 5, 120)]
    t = tally_of(recs)
    assert len(_modes(t)) == 1
    from replay.metrics.host import routes

    assert routes.fallback(t) is None
    load = routes.speed_by_load(t)
    assert load["split"] is True
    assert [r["inflight"] for r in load["rows"]] == ["1", "8-15"]
    assert load["rows"][0]["user_decode_tps_p50"] == pytest.approx(200, rel=0.05)
    assert load["rows"][1]["user_decode_tps_p50"] == pytest.approx(100, rel=0.05)


def test_two_speed_clusters_on_two_tiers_are_a_fallback_by_tier() -> None:
    rng = np.random.default_rng(3)
    recs = [_load_rec(float(v), 4, tier="priority") for v in rng.normal(300, 15, 140)]
    recs += [_load_rec(float(v), 4, tier="default") for v in rng.normal(100, 5, 60)]
    from replay.metrics.host import routes

    t = tally_of(recs)
    modes = _modes(t)
    assert len(modes) == 2 and modes[0]["served"]["tier"]["value"] == "default"
    fb = routes.fallback(t)
    assert fb is not None and fb["by"] == ["tier"] and fb["served"] == {"tier": "default"}
    assert fb["share"] == pytest.approx(0.3) and fb["requests"] == 60
    assert routes.speed_by_load(t)["split"] is False


def test_a_burst_read_at_once_is_no_speed() -> None:
    """Tokens read microseconds apart after a client stall give a speed no host decodes at: left out."""
    burst = _load_rec(100.0, 1)
    burst.t_last_token = burst.t_first_token + 34e-6  # 100 tokens in 34 µs
    t = tally_of([burst] + [_load_rec(100.0, 1)] * 10)
    assert sum(sum(b.values()) for b in t.speeds.values()) == 10


def test_identity_tallies_merge_and_travel() -> None:
    from replay.metrics.host.host_tally import HostTally

    a = tally_of([_load_rec(100.0, 2, tier="flex")] * 3)
    b = tally_of([_load_rec(300.0, 5, route="fallback:x")] * 2)
    a.merge(HostTally.decode(orjson.loads(orjson.dumps(b.encode()))))
    assert sum(a.idents.values()) == 5
    assert a.fallbacks == {"m\x1ffallback:x\x1f": 2} and a.fallback_by == {"x-replay-route": 2}  # the sim's label
    assert sorted(a.load) == [2, 3]


def test_an_answered_tier_is_not_a_route(tmp_path: Path) -> None:
    """A Responses host that names no route (vLLM, OpenAI) answers ``service_tier: auto``: a tier, not a route. The
    embedded host's run file with its route header taken out stands for it."""
    work = tmp_path / "w.jsonl"
    for i in range(3):
        write_trajectory(work, f"w{i}", simple_turns(3, output_tokens=12))
    spec = RunSpec(trajectories=[str(work)], api="responses", load=LoadConfig(concurrency=2, tool_time=ToolTimePolicy
                   .parse("none")), out=str(tmp_path / "run.jsonl"), sim_profile="fast", progress=False)  # fmt: skip
    execute(spec)
    lines = []
    for line in (tmp_path / "run.jsonl").read_bytes().splitlines():
        rec = orjson.loads(line)
        if rec.get("type") == "request":
            rec["headers"].pop("x-replay-route")
        lines.append(orjson.dumps(rec))
    (tmp_path / "norouted.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    raw = [orjson.loads(line) for line in lines]
    ok = [r for r in raw if r.get("type") == "request" and r.get("error") is None]
    tiers = {r["served"]["service_tier"] for r in ok}
    assert ok and tiers == {"auto"}  # counted here from the raw records
    summary = summarize(read_run(tmp_path / "norouted.jsonl"))
    assert summary["routes"] == {} and summary["served"]["routes"] == {}
    assert summary["service_tiers"] == {"auto": 1.0} and summary["served"]["tiers"] == {"auto": 1.0}
    assert all("route" not in m for m in summary["speed_modes"])
    text = to_text(summary)
    assert "routes:" not in text and "service tier answered: auto" in text
