"""Cost: rate cards applied to the host's token counts, checked against an independent recomputation."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from replay.hosts.resolve import HostError, rate_card_option
from replay.loops.closed_loop import LoadConfig
from replay.metrics.host.cost import CardError, parse_card, request_cost
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
