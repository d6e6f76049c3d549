"""Cost: rate cards applied to the host's token counts, checked against an independent recomputation."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from replay.hosts.resolve import HostError, rate_card_option
from replay.loops.closed_loop import LoadConfig
from replay.metrics.host.cost import CardError, for_endpoint, parse_card, request_cost
from replay.metrics.host.cost import run_cost as _run_cost
from replay.metrics.host.host_tally import tally_of
from replay.metrics.host.rate_cards import RATE_CARDS
from replay.records.run_file import RequestRecord, TaskRecord
from replay.runner.single_run import RunError, RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from tests.support.trajectories import simple_turns, write_trajectory


def _rec(
    prompt: int | None,
    cached: int = 0,
    output: int = 100,
    write: int | None = None,
    tier: str | None = None,
    task: int = 0,
) -> RequestRecord:
    r = RequestRecord(id="r", session=0, task=task, trajectory="t", turn=0)
    r.prompt_tokens, r.cached_tokens, r.output_tokens, r.cache_write_tokens = prompt, cached, output, write
    r.served = {"service_tier": tier} if tier else None
    return r


def test_a_request_is_priced_by_uncached_cached_written_and_output_tokens() -> None:
    card = parse_card({"input": 2.0, "cached_input": 0.1, "cache_write": 2.5, "output": 10.0}, "t")
    usd = request_cost(card, _rec(10_000, cached=6_000, write=1_000, output=500))
    assert usd == pytest.approx((3_000 * 2.0 + 6_000 * 0.1 + 1_000 * 2.5 + 500 * 10.0) / 1e6)


def test_missing_cached_rate_bills_cached_as_input_and_no_usage_is_unpriced() -> None:
    card = parse_card("cerebras/gpt-oss-120b", "t")
    assert card["cached_input"] is None
    assert request_cost(card, _rec(1_000_000, cached=400_000, output=0)) == pytest.approx(0.35)
    assert request_cost(card, _rec(None)) is None


def test_long_context_tiers_and_markup() -> None:
    card = parse_card(
        {
            "input": 2.0,
            "cached_input": 0.1,
            "output": 10.0,
            "markup": 1.5,
            "long_context": {"above": 272_000, "input": 4.0, "output": 15.0},
            "tiers": {"priority": {"input": 12.0, "cached_input": 0.6, "output": 60.0}},
        },
        "t",
    )
    assert request_cost(card, _rec(1000, output=0)) == pytest.approx(1000 * 2.0 / 1e6 * 1.5)
    assert request_cost(card, _rec(300_000, output=1000)) == pytest.approx((300_000 * 4.0 + 1000 * 15.0) / 1e6 * 1.5)
    assert request_cost(card, _rec(1000, output=0, tier="priority")) == pytest.approx(1000 * 12.0 / 1e6 * 1.5)


def run_cost(card, reqs, tasks):
    return _run_cost(tally_of(reqs, card), {t.task: not t.start_turn for t in tasks if t.complete}, card)


def test_run_cost_per_task_and_per_million() -> None:
    card = parse_card({"input": 1.0, "output": 2.0}, "t")
    reqs = [_rec(1_000_000, output=0, task=0), _rec(0, output=1_000_000, task=1), _rec(None, task=1)]
    tasks = [
        TaskRecord(
            task=i,
            session=0,
            trajectory="t",
            t_start=0,
            t_end=1,
            turns=1,
            turns_total=1,
            model_time_s=1,
            tool_time_s=0,
            complete=True,
        )
        for i in (0, 1)
    ]
    cost = run_cost(card, reqs, tasks)
    assert cost["total_usd"] == pytest.approx(3.0) and cost["per_task_usd"] == pytest.approx(1.5)
    assert cost["per_mtok_usd"] == pytest.approx(1.5) and cost["unpriced"] == 1
    assert run_cost(None, reqs, tasks)["total_usd"] is None


def test_per_task_cost_is_the_same_in_any_order_of_tasks() -> None:
    """A run's figures from its windows equal those from its records exactly (tests/metrics/test_windows.py), and the
    two visit tasks in different orders: the per-task mean must not depend on it (0.1 + 0.2 + 0.3 in floats does)."""
    card = parse_card({"input": 1.0, "output": 0.0}, "t")
    ahead = SimpleNamespace(
        reported=[0, 0], cost=[6 * 10**11, 1, 3, 0], task_usd={0: 10**11, 1: 2 * 10**11, 2: 3 * 10**11}
    )
    behind = SimpleNamespace(reported=[0, 0], cost=ahead.cost, task_usd=dict(reversed(ahead.task_usd.items())))
    for complete in ({0: True, 1: True, 2: True}, {2: True, 1: True, 0: True}, {}):
        got = {_run_cost(t, complete, card)["per_task_usd"] for t in (ahead, behind)}
        assert got == {0.2}, (complete, got)


@pytest.mark.parametrize(
    ("card", "field"),
    [
        ({"output": 1.0}, "input"),
        ({"input": -1, "output": 1}, "input"),
        ({"input": 1, "output": 1, "x": 1}, "x"),
        ({"input": 1, "output": 1, "long_context": {"input": 2}}, "long_context.above"),
        ("nope/none", "unknown"),
    ],
)
def test_bad_cards_name_the_field(card, field) -> None:
    with pytest.raises(CardError, match=field):
        parse_card(card, "hosts.x.price")


def test_the_shipped_cards_are_dated_and_valid() -> None:
    assert RATE_CARDS["fireworks/deepseek-v4.1-flash-1017/standard"]["input"] == 0.30
    assert RATE_CARDS["groq/gpt-oss-20b"]["cached_input"] == 0.037
    for name in RATE_CARDS:
        assert parse_card(name, "t")["date"] == "2026-11"
    assert rate_card_option("input=0.3,cached_input=0.006,output=1.2")["cached_input"] == 0.006
    with pytest.raises(HostError, match="--rate-card"):
        rate_card_option("input=cheap")


def _recompute(run_file: Path, card: dict) -> float:
    """Straight from the run file's lines: no replay code."""
    total = 0.0
    for line in run_file.read_bytes().splitlines():
        rec = orjson.loads(line)
        if rec["type"] != "request" or rec["prompt_tokens"] is None or rec["output_tokens"] is None:
            continue
        cached = rec["cached_tokens"] or 0
        cached_rate = card.get("cached_input") if card.get("cached_input") is not None else card["input"]
        total += (
            (rec["prompt_tokens"] - cached) * card["input"]
            + cached * cached_rate
            + rec["output_tokens"] * card["output"]
        ) / 1e6
    return total


def _spec(tmp: Path, **kw) -> RunSpec:
    work = tmp / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(4, output_tokens=20))
    return RunSpec(
        trajectories=[str(work)],
        load=LoadConfig(concurrency=4, tool_time=ToolTimePolicy.parse("none")),
        out=str(tmp / "run.jsonl"),
        sim_profile="fast",
        progress=False,
        **kw,
    )


def test_the_run_cost_equals_an_independent_recomputation_to_the_cent(tmp_path: Path) -> None:
    result = execute(_spec(tmp_path, rate_card="openai/gpt-6.1-sol/ultrafast"))
    card = RATE_CARDS["openai/gpt-6.1-sol/ultrafast"]
    assert result.header["host"]["price"]["name"] == "openai/gpt-6.1-sol/ultrafast"
    cost = result.summary["cost"]
    assert cost["total_usd"] > 0.01
    assert round(cost["total_usd"], 2) == round(_recompute(result.path, card), 2)
    assert abs(cost["total_usd"] - _recompute(result.path, card)) < 1e-9


def test_host_reported_cost_beside_the_computed_one(tmp_path: Path) -> None:
    """The OpenRouter dialect prices at $0.50 / $0.05 / $1.50: the same card computes the same total."""
    result = execute(_spec(tmp_path, sim_dialect="openrouter", rate_card="input=0.5,cached_input=0.05,output=1.5"))
    cost = result.summary["cost"]
    assert cost["host_reported_requests"] == 16
    assert cost["host_reported_usd"] == pytest.approx(cost["total_usd"], abs=1e-8)


def test_a_bad_rate_card_fails_before_the_run(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="--rate-card"):
        execute(_spec(tmp_path, rate_card="nope"))
    assert not (tmp_path / "run.jsonl").exists()


# GPT-6.1 Sol as its model page states it (developers.openai.com/api/docs/models/gpt-6.1-sol), written out here so
# that the check shares nothing with replay's cards or its pricing: USD per million, short and long context.
SOL_SHORT = {"input": 2.00, "cached": 0.10, "write": 2.50, "output": 10.00}
SOL_LONG = {"input": 4.00, "cached": 0.20, "write": 5.00, "output": 15.00}  # 2x input and cache, 1.5x output


def _sol_cost(rec: dict, regional: bool = False, rates: dict | None = None) -> float:
    """One request line of a run file priced by hand: the whole request at the long rates past 272,000 input."""
    rates = rates or (SOL_LONG if rec["prompt_tokens"] > 272_000 else SOL_SHORT)
    cached, written = rec["cached_tokens"] or 0, rec.get("cache_write_tokens") or 0
    usd = (rec["prompt_tokens"] - cached - written) * rates["input"] + cached * rates["cached"]
    usd += written * rates["write"] + rec["output_tokens"] * rates["output"]
    return usd / 1e6 * (1.10 if regional else 1.0)


def test_the_openai_card_has_long_context_cache_write_and_regional_rates() -> None:
    card = parse_card("openai/gpt-6.1-sol/standard", "t")
    assert card["source"].startswith("developers.openai.com") and card["date"]
    at_bound = {"prompt_tokens": 272_000, "cached_tokens": 2_000, "cache_write_tokens": 10_000, "output_tokens": 900}
    past = at_bound | {"prompt_tokens": 272_001}
    for line in (at_bound, past):
        rec = _rec(line["prompt_tokens"], cached=2_000, write=10_000, output=900)
        assert request_cost(card, rec) == pytest.approx(_sol_cost(line), rel=1e-12)
    assert _sol_cost(past) > 1.4 * _sol_cost(at_bound)  # one token more: the whole request at the long rates
    eu = for_endpoint(card, "https://eu.api.openai.com/v1")
    assert eu is not None and eu["regional"] is True
    assert request_cost(eu, _rec(300_000, cached=0, output=100)) == pytest.approx(
        _sol_cost({"prompt_tokens": 300_000, "cached_tokens": 0, "output_tokens": 100}, regional=True), rel=1e-12
    )
    assert for_endpoint(card, "https://api.openai.com/v1") is card  # the global endpoint: no premium
    with pytest.raises(CardError, match="regional_hosts"):
        parse_card({"input": 1, "output": 1, "regional_hosts": "eu.api.openai.com"}, "t")


def test_a_call_over_272k_input_tokens_is_priced_at_the_long_context_rate(tmp_path: Path) -> None:
    """A live run against the simulated host (its context raised to 400k): the second call's prompt passes 272,000
    tokens and the run's cost equals the page's rates applied by hand to the run file, short and long."""
    work = tmp_path / "long.jsonl"
    turns = simple_turns(2, output_tokens=20)
    turns[1]["append"] = [{"role": "user", "content": "<output>" + " x" * 280_000 + "</output>"}]
    write_trajectory(work, "long", turns)
    profile = tmp_path / "long.toml"
    profile.write_text('base = "fast"\nmax_model_len = 400000\n')
    spec = RunSpec(
        trajectories=[str(work)],
        load=LoadConfig(concurrency=1, tool_time=ToolTimePolicy.parse("none")),
        out=str(tmp_path / "run.jsonl"),
        sim_profile_file=str(profile),
        rate_card="openai/gpt-6.1-sol/standard",
        progress=False,
    )
    result = execute(spec)
    lines = [orjson.loads(x) for x in result.path.read_bytes().splitlines()]
    reqs = [r for r in lines if r["type"] == "request"]
    assert [r["error"] for r in reqs] == [None, None]
    assert reqs[0]["prompt_tokens"] < 272_000 < reqs[1]["prompt_tokens"]
    expected = sum(_sol_cost(r) for r in reqs)
    assert result.summary["cost"]["total_usd"] == pytest.approx(expected, rel=1e-9)
    assert result.summary["cost"]["priced_requests"] == 2
    short_only = sum(_sol_cost(r, rates=SOL_SHORT) for r in reqs)
    assert result.summary["cost"]["total_usd"] > 1.4 * short_only  # (the short rates would bill far less)


def test_a_run_against_a_regional_endpoint_keeps_the_premium_in_its_header(monkeypatch) -> None:
    from replay.runner.single_run import resolve_host

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for url, regional in (("https://eu.api.openai.com/v1", True), ("https://api.openai.com/v1", None)):
        _, host = resolve_host(RunSpec(host=url, rate_card="openai/gpt-6.1-sol/standard"))
        assert host.public()["price"].get("regional") is regional, url
