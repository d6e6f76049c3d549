"""The history of nights (replay history): one SQLite file, one row a run, series split by identity; and its
change points on modelled nights (summaries drawn from a seeded model of a steady host, as the baseline gate's
tests draw them), counted over seeds."""

from __future__ import annotations

import json
import sqlite3
import statistics

import pytest

from replay.history.store import add, connect, night_from, nights
from tests.verdict.test_baseline_gate import night as modelled

pytest.importorskip("ruptures")
pytest.importorskip("scipy")


def header(i: int, model: str = "m", concurrency: int = 8, seed: int = 0) -> dict:
    return {"created": f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00+00:00", "clock": {"unix": 1.7e9 + 86400 * i},
            "host": {"model": model, "api": "chat", "base_url": f"http://127.0.0.1:{9000 + i}/v1"},
            "load": {"concurrency": concurrency, "seed": seed + i, "duration_s": 1200.0, "tool_time": "none"},
            "workload": {"fingerprint": "sha256:abc"}, "request": {"history": {"output": "recorded"}},
            "replay_version": "0.1.0", "versions": {"platform": "Linux", "python": "3.11"}}  # fmt: skip


def history(tmp_path, speeds: list[float], seed: int = 0, jitter: float = 0.15, **ident) -> sqlite3.Connection:
    """Nights of a host at ``speeds``, their windows ``jitter`` apart (0.15: nights about 3.5 % apart)."""
    db = connect(tmp_path / f"h{seed}-{jitter}.db", create=True)
    for i, speed in enumerate(speeds):
        night = modelled(1000 * seed + i, speed, jitter=jitter)
        add(db, *night_from(header(i, **ident), night, f"/runs/night-{i}.jsonl"))
    return db


def doc_of(db: sqlite3.Connection) -> dict:
    from replay.history.report import build

    return build(nights(db), "h.db")


def test_a_run_added_twice_is_one_row_and_its_figures_are_the_summarys(tmp_path):
    db = history(tmp_path, [1.0, 1.0])
    s = modelled(0, 1.0)
    assert add(db, *night_from(header(0), s, "/elsewhere/copy.jsonl")) is False  # the same header: the same run
    assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
    first = nights(db)[0]
    assert first.path == "/elsewhere/copy.jsonl"
    assert first.figures["throughput.total_tps"][0] == s["throughput"]["total_tps"]
    # the steady windows kept for the noise: every full window inside the steady window, not the warm-up nor the drain
    kept = json.loads(db.execute("SELECT windows FROM figures WHERE figure = 'throughput.total_tps' AND run_id = ?",
                                 (first.run_id,)).fetchone()[0])  # fmt: skip
    assert kept == [w["total_tps"] for w in s["windows"][1:-1]]


def test_nights_are_in_the_order_they_ran_not_the_order_added(tmp_path):
    db = connect(tmp_path / "h.db", create=True)
    for i in (2, 0, 1):
        add(db, *night_from(header(i), modelled(i), f"/runs/{i}.jsonl"))
    assert [n.path for n in nights(db)] == ["/runs/0.jsonl", "/runs/1.jsonl", "/runs/2.jsonl"]


def test_a_history_file_that_is_not_one_is_refused_by_name(tmp_path):
    from replay.history.store import HistoryError

    bad = tmp_path / "notes.txt"
    bad.write_text("not a database at all, just some text long enough to be read" * 20)
    with pytest.raises(HistoryError, match=r"notes\.txt"):
        connect(bad)
    with pytest.raises(HistoryError, match="no such history file"):
        connect(tmp_path / "missing.db")


def test_a_slower_host_is_found_at_the_night_it_began_in_every_seed(tmp_path):
    for seed in range(5):
        doc = doc_of(history(tmp_path, [1.0] * 30 + [0.85] * 5, seed))
        cps = doc["history"]["throughput.total_tps"]["change_points"]
        assert [(c["run"], c["direction"]) for c in cps] == [("/runs/night-30.jsonl", "worse")], seed
        # the step recounted from the points: the regime after against the regime before
        values = [p["value"] for p in doc["history"]["throughput.total_tps"]["points"]]
        step = statistics.fmean(values[30:]) / statistics.fmean(values[:30]) - 1
        assert cps[0]["step"] == pytest.approx(step)
        assert cps[0]["confidence"] > 0.999
        ttft = doc["history"]["ttft_s.p50"]["change_points"]  # slower: TTFT up, worse too
        assert [(c["run"], c["direction"]) for c in ttft] == [("/runs/night-30.jsonl", "worse")], seed


def test_a_steady_host_has_no_change_point_in_any_seed(tmp_path):
    for seed in range(5):
        doc = doc_of(history(tmp_path, [1.0] * 30, seed))
        found = {name: f["change_points"] for name, f in doc["history"].items() if f["change_points"]}
        assert found == {}, seed


def test_a_slow_slide_is_found_and_is_worse(tmp_path):
    for seed in range(5):
        doc = doc_of(history(tmp_path, [1.0] * 30 + [1 - 0.01 * k for k in range(1, 16)], seed))
        cps = doc["history"]["throughput.total_tps"]["change_points"]
        assert cps and all(c["direction"] == "worse" for c in cps), seed
        assert all(int(c["run"].split("-")[1].split(".")[0]) >= 30 for c in cps), seed  # not before the slide


def test_a_step_is_found_the_night_it_comes_and_the_next_at_the_same_night(tmp_path):
    for seed in range(5):  # nights 2 % apart: a 15 % step is seven of their spreads
        doc = doc_of(history(tmp_path, [1.0] * 30 + [0.85], seed, jitter=0.08))
        cps = doc["history"]["throughput.total_tps"]["change_points"]
        assert [(c["run"], c["direction"], c["nights"]) for c in cps] == [("/runs/night-30.jsonl", "worse", 1)], seed
        doc = doc_of(history(tmp_path, [1.0] * 30 + [0.85] * 2, seed, jitter=0.08))
        cps = doc["history"]["throughput.total_tps"]["change_points"]
        assert [(c["run"], c["direction"], c["nights"]) for c in cps] == [("/runs/night-30.jsonl", "worse", 2)], seed
    better = doc_of(history(tmp_path, [1.0] * 30 + [1.2], 9, jitter=0.08))["history"]["throughput.total_tps"]
    assert [c["direction"] for c in better["change_points"]] == ["better"]


def test_a_change_of_identity_starts_a_series_not_a_change_point(tmp_path):
    db = connect(tmp_path / "h.db", create=True)
    for i in range(30):  # a deliberate change at night 15: twice the concurrency, and the host's figures move with it
        c = 8 if i < 15 else 16
        add(db, *night_from(header(i, concurrency=c), modelled(i, 1.0 if i < 15 else 1.5), f"/runs/night-{i}.jsonl"))
    doc = doc_of(db)
    assert len(doc["series"]) == 2
    assert [s["nights"] for s in doc["series"]] == [15, 15]
    assert doc["history"]["throughput.total_tps"]["change_points"] == []


def test_a_night_whose_client_set_its_figures_is_shown_but_not_judged(tmp_path):
    db = history(tmp_path, [1.0] * 30)
    s = modelled(99, 0.6)
    s["client"] = {"held_up": True, "loop_lag_p99_ms": 300.0, "machine_load": 9.0}
    add(db, *night_from(header(30), s, "/runs/busy.jsonl"))
    doc = doc_of(db)
    pts = doc["history"]["throughput.total_tps"]["points"]
    assert pts[-1]["unjudged"].startswith("its client was held up")
    assert doc["history"]["throughput.total_tps"]["change_points"] == []
