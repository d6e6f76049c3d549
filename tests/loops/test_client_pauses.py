"""The client's own pauses on the record: a run whose client was paused (a forced collection inside one call, a
blocked loop inside another, injected at known calls) says so call by call (``client_pause_ms``); the summary's
share of paused calls equals a recount from the raw records; ``replay run --json`` equals ``replay report --json``;
the collections are counted; the verdict warns and ``client_paused_share`` gates."""

from __future__ import annotations

import gc
import itertools
import json
from pathlib import Path
from time import perf_counter
from typing import Any

import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.clients.transport import Transport
from replay.loops.gc_watch import PauseLog
from replay.verdict.baseline import compare
from replay.verdict.judge import judge
from tests.support.trajectories import simple_turns, write_trajectory

GC_CALL, STALL_CALL = 2, 5  # the third and sixth calls sent (concurrency 1: one call at a time, in order)
STALL_S = 0.12  # past the lag probe's 50 ms: it is due while the loop is blocked


def _lines(path: Path, kind: str) -> list[dict[str, Any]]:
    return [r for line in path.read_text().splitlines() if (r := json.loads(line))["type"] == kind]


def _cli(args: list[str], code: int = 0) -> dict[str, Any]:
    res = CliRunner().invoke(main, args)
    assert res.exit_code == code, res.output
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def paused_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """8 calls at concurrency 1 against the simulated host; the client pauses inside two known calls: a full
    collection of a heap of fresh cycles in the third, a 120 ms busy loop in the sixth."""
    tmp = tmp_path_factory.mktemp("pauses")
    work = tmp / "w.jsonl"
    for i in range(2):
        write_trajectory(work, f"p{i}", simple_turns(4, output_tokens=20))
    out = tmp / "run.jsonl"
    calls, injected, owners = itertools.count(), {}, {}
    receive, exchange = Transport._receive, Transport._exchange

    async def tracked_exchange(
        self: Transport, url: str, body: Any, headers: Any, rec: Any, got: Any, *rest: Any
    ) -> Any:
        owners[id(got)] = rec.id  # which call a body read belongs to
        return await exchange(self, url, body, headers, rec, got, *rest)

    async def paused_receive(self: Transport, content: Any, got: Any, deadline: float) -> None:
        k = next(calls)
        if k in (GC_CALL, STALL_CALL):
            injected[k] = owners[id(got)]
        if k == GC_CALL:
            garbage = [[] for _ in range(400_000)]
            for x in garbage:
                x.append(x)
            del garbage, x
            t = perf_counter()
            gc.collect()
            injected["gc_ms"] = 1000 * (perf_counter() - t)
        elif k == STALL_CALL:
            end = perf_counter() + STALL_S
            while perf_counter() < end:
                pass
        await receive(self, content, got, deadline)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Transport, "_receive", paused_receive)
        mp.setattr(Transport, "_exchange", tracked_exchange)
        live = _cli(["run", str(work), "-c", "1", "--tasks", "2", "--sim-profile", "fast", "--out", str(out), "-q",
                     "--threshold", "client_paused_share<1%", "--json"], code=2)  # fmt: skip
    return {"live": live, "out": out, "injected": injected}


def test_the_paused_calls_say_so_each_with_its_pause(paused_run: dict[str, Any]) -> None:
    requests = {r["id"]: r for r in _lines(paused_run["out"], "request")}
    hit, stalled = requests[paused_run["injected"][GC_CALL]], requests[paused_run["injected"][STALL_CALL]]
    assert hit["error"] is None and stalled["error"] is None, (hit, stalled)
    assert paused_run["injected"]["gc_ms"] > 5  # the collection was a pause worth recording
    assert hit["client_pause_ms"] is not None and hit["client_pause_ms"] > 5
    assert stalled["client_pause_ms"] is not None and stalled["client_pause_ms"] >= 1000 * (STALL_S - 0.05) - 1
    for r in (hit, stalled):  # a pause inside the call's window is no longer than the window
        assert r["client_pause_ms"] <= 1000 * (r["t_last_token"] - r["t_sent"]) + 1e-6


def test_the_share_equals_a_recount_of_the_records(paused_run: dict[str, Any]) -> None:
    requests = _lines(paused_run["out"], "request")
    measured = [r for r in requests if r["error"] is None]  # a --tasks run is measured whole
    paused = [r for r in measured if r["client_pause_ms"] is not None]
    got = paused_run["live"]["client"]["paused_calls"]
    assert got["n"] == len(paused) >= 2
    assert got["share"] == pytest.approx(len(paused) / len(measured), abs=1e-12)
    assert got["pause_s"] == pytest.approx(sum(r["client_pause_ms"] for r in paused) / 1000, rel=1e-9)
    clean = [r for r in measured if r["client_pause_ms"] is None]
    assert got["clean"]["ttft_s"]["n"] == len(clean) and got["clean"]["e2e_s"]["n"] == len(clean)
    if clean:  # the clean TTFT is one of the clean calls' (3 significant digits)
        worst = max(r["t_first_token"] - r["t_sent"] for r in clean)
        assert got["clean"]["ttft_s"]["p99"] == pytest.approx(worst, rel=2e-3)


def test_live_equals_offline_and_the_collections_are_counted(paused_run: dict[str, Any]) -> None:
    live = paused_run["live"]
    offline = _cli(["report", str(paused_run["out"]), "--json"])
    assert live["client"] == offline["client"]
    g = live["client"]["gc"]
    samples = _lines(paused_run["out"], "client")
    assert samples and g["collections"] == sum(s["gc_collections"] for s in samples)
    assert 1 <= g["full"] <= g["collections"]  # the forced one at least
    assert g["pause_max_ms"] > 5 and g["pause_total_s"] >= g["pause_max_ms"] / 1000
    assert g["pause_max_ms"] <= paused_run["injected"]["gc_ms"] + 1e-6 or g["full"] > 1


def test_the_threshold_gates_and_the_verdict_warns(paused_run: dict[str, Any]) -> None:
    live = paused_run["live"]
    share = live["client"]["paused_calls"]["share"]
    assert share > 0.01
    row = live["thresholds"][0]  # the run's --threshold client_paused_share<1%: breached, exit 2
    assert not row["ok"] and row["figure"] == "client.paused_calls.share" and row["value"] == pytest.approx(share)
    assert live["verdict"]["exit_code"] == 2 and not live["verdict"]["passed"]
    footer = _lines(paused_run["out"], "footer")[0]
    held = judge(dict(live), {"thresholds": ["client_paused_share<=100%"]}, footer)["verdict"]
    assert held["passed"] and held["exit_code"] == 0  # a warning, not a failure
    assert any("include a pause of the client's own" in w and f"{100 * share:.1f}%" in w for w in held["warnings"])
    quiet = {**live, "client": {**live["client"], "paused_calls": {**live["client"]["paused_calls"], "share": 0.01}}}
    assert judge(quiet, {}, footer)["verdict"]["warnings"] == []  # at the bound: no warning


def test_a_pause_log_merges_overlaps_and_counts_only_the_overlapped_part() -> None:
    log = PauseLog()
    log.add(1.0, 1.004)  # under 5 ms: not a pause a call carries
    log.add(2.0, 2.1)
    log.add(2.05, 2.2)  # a stall that holds a collection: one pause
    log.add(1.5, 1.52)  # out of order (a stall seen after a later collection)
    assert list(zip(log.starts, log.ends, strict=True)) == [(1.5, 1.52), (2.0, 2.2)]
    assert log.overlap(0.0, 1.4) == 0.0
    assert log.overlap(1.51, 2.1) == pytest.approx(0.01 + 0.1)
    assert log.overlap(0.0, 3.0) == pytest.approx(0.02 + 0.2)


def test_every_worker_process_counts_its_collections(tmp_path: Path) -> None:
    """--workers 2: each worker's collections reach the parent (its client samples) and the summary covers all."""
    work = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"w{i}", simple_turns(3, output_tokens=16))
    out = tmp_path / "run.jsonl"
    live = _cli(["run", str(work), "-c", "4", "--tasks", "4", "--workers", "2", "--sim-profile", "instant", "--out",
                 str(out), "-q", "--json"])  # fmt: skip
    assert live["client"] == _cli(["report", str(out), "--json"])["client"]
    samples = _lines(out, "client")
    workers = live["client"]["workers"]
    assert sorted(w["worker"] for w in workers) == [0, 1] == sorted({s["worker"] for s in samples})
    for w in workers:
        own = [s for s in samples if s["worker"] == w["worker"]]
        assert own and all("gc_collections" in s for s in own)  # its last sample at least, sent as it ended
        assert w["gc"]["collections"] == sum(s["gc_collections"] for s in own)
        assert w["gc"]["full"] <= w["gc"]["collections"]
    total = live["client"]["gc"]
    assert total["collections"] == sum(w["gc"]["collections"] for w in workers)
    assert total["pause_max_ms"] == max(w["gc"]["pause_max_ms"] for w in workers)
    paused = [r for r in _lines(out, "request") if r["client_pause_ms"] is not None]
    assert live["client"]["paused_calls"]["n"] == len(paused)


def test_the_reports_show_the_pauses_under_client(paused_run: dict[str, Any], tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["report", str(paused_run["out"]), "--html", str(page)])
    assert res.exit_code == 0, res.output
    paused = paused_run["live"]["client"]["paused_calls"]
    said = f"calls paused by the client: {paused['n']} ({100 * paused['share']:.1f}%)"
    assert said in res.output and "  collections: " in res.output and "    without them (" in res.output
    warned = f"WARNING: {100 * paused['share']:.1f}% of the measured calls ({paused['n']}) include a pause"
    assert warned in res.output and all(len(line) <= 100 for line in res.output.splitlines() if "pause" in line)
    html = page.read_text()
    client = html[html.index('id="client"') :]
    assert "calls whose timing includes a client pause" in client and "collections (all processes)" in client


def test_the_figures_over_time_carry_each_windows_pauses(tmp_path: Path) -> None:
    work = tmp_path / "w.jsonl"
    for i in range(4):
        write_trajectory(work, f"t{i}", simple_turns(6, output_tokens=20, tool_time_s=0.05))
    out = tmp_path / "run.jsonl"
    live = _cli(["run", str(work), "-c", "2", "--duration", "12", "--window", "6", "--sim-profile", "fast", "--out",
                 str(out), "-q", "--json"])  # fmt: skip
    rows, samples = live["windows"], _lines(out, "client")
    requests = _lines(out, "request")
    assert rows and live["windows"] == _cli(["report", str(out), "--json"])["windows"]
    t0 = next(p["t"] for p in _lines(out, "phase") if p["name"] == "start")
    for row in rows:  # each window's collections are those of the samples taken in it
        inside = [s for s in samples if row["start_s"] <= s["t"] - t0 < row["end_s"]]
        counted = row["client_gc"]["collections"]
        assert counted == (sum(s["gc_collections"] for s in inside) if inside else None)
    assert sum(row["client_gc"]["collections"] or 0 for row in rows) <= live["client"]["gc"]["collections"]
    assert all(row["client_paused_share"] is None or 0 <= row["client_paused_share"] <= 1 for row in rows)
    assert sum(r["client_pause_ms"] is not None for r in requests) >= live["client"]["paused_calls"]["n"]


def test_a_run_whose_pauses_were_not_timed_says_null_not_zero(paused_run: dict[str, Any], tmp_path: Path) -> None:
    """A run file from before the pauses were timed (nor does the virtual clock time them): null, and a gate fails."""
    old = tmp_path / "old.jsonl"
    with old.open("w") as f:
        for line in paused_run["out"].read_text().splitlines():
            record = json.loads(line)
            for key in ("client_pause_ms", "gc_collections", "gc_full", "gc_pause_s", "gc_pause_max_ms"):
                record.pop(key, None)
            f.write(json.dumps(record) + "\n")
    summary = _cli(["report", str(old), "--json"])
    assert set(summary["client"]["gc"].values()) == {None} and summary["client"]["paused_calls"]["share"] is None
    row = judge(summary, {"thresholds": ["client_paused_share<1%"]}, _lines(old, "footer")[0])["thresholds"][0]
    assert row["value"] is None and not row["ok"]
    assert "calls paused by the client" not in CliRunner().invoke(main, ["report", str(old)]).output


def test_paused_calls_alone_leave_a_baseline_comparison_judged() -> None:
    """Short loop stalls on a busy machine pause many calls a little: they are said (the warning, the share), but only
    a held-up or saturated client makes a night unjudged."""
    summary = {"client": {"paused_calls": {"n": 3, "share": 0.29, "pause_s": 0.02}}, "ttft_s": {"p50": 0.1}}
    assert compare(summary, summary, 0.1)["judged"]
