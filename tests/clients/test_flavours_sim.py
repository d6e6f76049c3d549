"""The shipped workload in every API flavour against the simulated host, on one seed: every call succeeds, the
counts equal the host's truth log, and the flavours agree with each other on what was cached."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main

FLAVOURS = ("chat", "completions", "responses", "anthropic")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[dict, list[dict]]]:
    out: dict[str, tuple[dict, list[dict]]] = {}
    for api in FLAVOURS:
        tmp = tmp_path_factory.mktemp(api)
        res = CliRunner().invoke(
            main,
            ["run", "--api", api, "-c", "8", "--tool-time", "none", "--sim-profile", "instant", "--seed", "3",
             "--out", str(tmp / "run.jsonl"), "--json", "-q"],
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        truth = [orjson.loads(line) for line in (tmp / "run.truth.jsonl").read_bytes().splitlines()]
        out[api] = (orjson.loads(res.stdout), truth)
    return out


@pytest.mark.parametrize("api", FLAVOURS)
def test_every_call_succeeds_and_the_counts_are_the_hosts(runs, api: str) -> None:
    summary, truth = runs[api]
    assert summary["requests"] == len(truth) == 259 and summary["errors"] == 0
    assert {t["api"] for t in truth} == {"messages" if api == "anthropic" else api}
    totals = summary["totals"]
    for ours, theirs in (("prompt_tokens", "prompt_tokens"), ("cached_tokens", "cached_tokens"),
                         ("output_tokens", "output_tokens")):  # fmt: skip
        assert totals[ours] == sum(t[theirs] for t in truth), ours
    # lined up with the host's own clock, in order: the client's TTFT holds the host's (its bytes left before the
    # host saw them, its first token came after the host wrote it), so the median signed deviation is no less than
    # zero and equals the median absolute one; how close they are under load is a benchmark's claim
    # (scripts/truth_agreement.py, docs/benchmarks.md), not a unit test's
    dev = summary["truth"]["ttft_dev_s"]
    assert summary["truth"]["matched"] == dev["n"] == 259 and dev["bias"] >= -2e-6
    assert dev["p50"] == pytest.approx(dev["bias"], abs=2e-6)


def test_the_flavours_agree_on_what_was_cached(runs) -> None:
    cached = {api: runs[api][0]["totals"]["cached_tokens"] for api in FLAVOURS}
    assert max(cached.values()) / min(cached.values()) < 1.01, cached


@pytest.mark.parametrize("api", FLAVOURS)
def test_odd_chunks_and_implausible_usage_fail_exactly_their_calls_and_kill_no_session(tmp_path: Path, api) -> None:
    out = tmp_path / "run.jsonl"
    res = CliRunner().invoke(
        main,
        ["run", "--api", api, "-c", "8", "--tool-time", "none", "--sim-profile", "instant", "--sim-faults",
         "odd_chunk:0.05,bad_usage:0.05,malformed:0.02", "--sim-fault-seed", "7", "--out", str(out), "--json", "-q"],
    )  # fmt: skip
    summary = orjson.loads(res.stdout)
    truth = [orjson.loads(line) for line in (tmp_path / "run.truth.jsonl").read_bytes().splitlines()]
    sent = {k: sum(t.get("fault") == k for t in truth) for k in ("odd_chunk", "bad_usage", "malformed")}
    assert all(sent.values())
    assert summary["errors_by_class"] == {"malformed_stream": sent["odd_chunk"] + sent["malformed"],
                                          "bad_usage": sent["bad_usage"]}  # fmt: skip
    assert summary["invalid_usage"] == sent["bad_usage"] and summary["totals"]["ok"] == 259 - sum(sent.values())
    tasks = [orjson.loads(line) for line in out.read_bytes().splitlines() if b'"type":"task"' in line]
    assert len(tasks) == 12 and all(t["turns"] == t["turns_total"] for t in tasks)  # every session went on
    report = CliRunner().invoke(main, ["report", str(out), "--json"])
    assert report.exit_code == 0 and orjson.loads(report.stdout)["errors_by_class"] == summary["errors_by_class"]
