"""Two clusters of per-user decode speed that no served model, route or tier explains are put down to a cause only
where the rows show it: load when the speed by calls in flight moves as much as the clusters differ, prompt length
when the speed by prompt tokens does; never load at one load level, or where the load rows are flat (a real vLLM at
c=2: the clusters came from prompt length)."""

from __future__ import annotations

import numpy as np

from replay.metrics.host import routes
from replay.metrics.host.host_tally import tally_of
from replay.metrics.summary import summarize
from replay.records.run_file import RequestRecord, RunData
from replay.reports.text_report import to_text


def _rec(i: int, tps: float, inflight: int, prompt: int, n: int = 101) -> RequestRecord:
    t0, decode = float(i), (n - 1) / tps
    return RequestRecord(id=f"r{i}", session=i % 4, task=i, trajectory="t", turn=0, t_sent=t0, t_call=t0,
                         t_first_token=t0 + 0.05, t_last_token=t0 + 0.05 + decode, t_done=t0 + 0.06 + decode,
                         status=200, output_tokens=n, output_events=n, prompt_tokens=prompt, cached_tokens=0,
                         prompt_tokens_est=prompt, inflight=inflight, served={"model": "m"})  # fmt: skip


def _clusters_from_prompt_length() -> list[RequestRecord]:
    """Short prompts decode at ~200 tok/s, long ones at ~100, whatever the calls in flight (1 or 2, alternating)."""
    rng = np.random.default_rng(4)
    recs = [_rec(i, float(v), 1 + i % 2, 2_000) for i, v in enumerate(rng.normal(200, 10, 60))]
    return recs + [_rec(60 + i, float(v), 1 + i % 2, 20_000) for i, v in enumerate(rng.normal(100, 5, 60))]


def _summary(records: list[RequestRecord]) -> dict:
    header = {"format": "replay.run/1", "api": "chat"}
    return summarize(RunData(header, records, [], {}, [], {"stop_reason": "tasks"})).to_dict()


def test_clusters_at_one_load_level_are_not_put_down_to_load() -> None:
    rng = np.random.default_rng(5)
    recs = [_rec(i, float(v), 2, 2_000) for i, v in enumerate(rng.normal(200, 10, 60))]
    recs += [_rec(60 + i, float(v), 2, 2_000) for i, v in enumerate(rng.normal(100, 5, 60))]
    load = routes.speed_by_load(tally_of(recs))
    assert load["split"] is True and len(load["rows"]) == 1 and load["by"] == []
    text = "\n".join(to_text(_summary(recs)).splitlines())
    assert "varies with load" not in text and "nor do load" in text


def test_clusters_from_prompt_length_are_named_so_and_not_load() -> None:
    s = _summary(_clusters_from_prompt_length())
    load = s["speed_by_load"]
    assert load["split"] is True and [r["inflight"] for r in load["rows"]] == ["1", "2-3"]
    assert load["by"] == ["prompt_length"]
    text = to_text(s)
    assert "per-user decode speed varies with prompt length" in text and "varies with load" not in text
    assert "p50 tok/s by prompt tokens:" in text


def test_clusters_from_load_are_named_load() -> None:
    rng = np.random.default_rng(2)
    recs = [_rec(i, float(v), 1, 2_000) for i, v in enumerate(rng.normal(200, 10, 80))]
    recs += [_rec(80 + i, float(v), 12, 2_000) for i, v in enumerate(rng.normal(100, 5, 120))]
    s = _summary(recs)
    assert s["speed_by_load"]["by"] == ["load"]
    assert "per-user decode speed varies with load (no model" in to_text(s)


def test_one_cluster_names_no_cause() -> None:
    rng = np.random.default_rng(6)
    recs = [_rec(i, float(v), 1 + i % 8, 2_000) for i, v in enumerate(rng.normal(150, 8, 100))]
    load = routes.speed_by_load(tally_of(recs))
    assert load["split"] is False and load["by"] == []
