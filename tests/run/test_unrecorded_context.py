"""``--unrecorded-context pad`` on the real Claude Code transcripts against the simulated host: each call's prompt as
the host counted it is within 2 % of the provider's recorded prompt tokens, and the padded head is served from the
host's cache after the first call (the truth log says so); the header and the report say what was padded."""

from __future__ import annotations

import orjson
import pytest

from replay.loops.closed_loop import LoadConfig
from replay.records.reader import read_run
from replay.reports.html_report import meta_lines
from replay.reports.report_input import RunReport
from replay.reports.text_report import to_text
from replay.runner.rebuild import rebuild_run
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.importers import import_paths, write_canonical
from replay.workload.trajectory import load_workload
from tests.support.paths import SHARED

REAL = SHARED / "trajectories" / "real" / "claude-code"
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="the real Claude Code transcripts are not in shared/")


def _run(tmp_path, mode: str):
    canonical = tmp_path / "cc.jsonl"
    with canonical.open("wb") as fh:
        write_canonical(import_paths([REAL]).trajectories, fh)
    spec = RunSpec(
        trajectories=[str(canonical)], unrecorded_context=mode,
        load=LoadConfig(concurrency=1, tool_time=ToolTimePolicy.parse("none")), out=str(tmp_path / f"{mode}.jsonl"),
        sim_profile="instant", sim_truth_log=str(tmp_path / f"{mode}.truth.jsonl"), progress=False,
    )  # fmt: skip
    result = execute(spec)
    truth = {
        t["request_id"]: t for t in map(orjson.loads, (tmp_path / f"{mode}.truth.jsonl").read_bytes().splitlines())
    }
    recorded = {(t.id, turn.index): turn.recorded for t in load_workload([canonical]).trajectories for turn in t.turns}
    return result, read_run(result.path), truth, recorded


def test_padded_calls_have_the_provider_prompt_size_and_the_head_is_cached(tmp_path):
    result, run, truth, recorded = _run(tmp_path, "pad")
    assert len(run.requests) == 44 and all(r.error is None for r in run.requests)
    worst = 0.0
    for r in run.requests:
        provider = recorded[(r.trajectory, r.turn)]["prompt_tokens"]
        host = truth[r.id]["prompt_tokens"]
        worst = max(worst, abs(host - provider) / provider)
    assert worst < 0.02, worst  # measured: docs/importers.md
    heads = {t: recorded[(t, 0)]["unrecorded_context_tokens"] for t, _ in recorded}
    for r in run.requests:
        if r.turn > 0:  # after the first call, the head (and more) comes from the host's cache
            assert truth[r.id]["cached_tokens"] >= heads[r.trajectory], (r.trajectory, r.turn)
    workload = run.header["workload"]
    assert workload["unrecorded_context"] == "pad" and workload["padded_tokens"] == 827_942
    assert result.summary["run"]["workload"]["padded_tokens"] == 827_942
    assert rebuild_run(result.path).summary["run"]["workload"] == result.summary["run"]["workload"]
    text = to_text(result.summary, run.header)
    assert "unrecorded context padded (--unrecorded-context pad): 827,942 stand-in tokens" in text
    page = meta_lines(RunReport(run, result.summary))
    assert "827,942 stand-in tokens padded (--unrecorded-context pad)" in page[1]


def test_omit_sends_the_recording_as_it_is(tmp_path):
    _, run, truth, recorded = _run(tmp_path, "omit")
    assert run.header["workload"]["padded_tokens"] == 0
    first = min((r for r in run.requests if r.turn == 0), key=lambda r: r.trajectory)
    gap = recorded[(first.trajectory, 0)]["unrecorded_context_tokens"]
    assert recorded[(first.trajectory, 0)]["prompt_tokens"] - truth[first.id]["prompt_tokens"] >= gap - 20
