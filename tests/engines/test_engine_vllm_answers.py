"""What only a real engine shows, against vLLM: answers served shorter than asked, limit refusals, a warm cache.

vLLM lowers ``max_tokens`` to what fits its served context without a word (finish ``length``), drops ``ignore_eos``
and ``min_tokens`` on ``/v1/messages``, refuses a forced length that no longer fits with a ``min_tokens`` wording,
and keeps its prefix cache from one run to the next. Each check is counted three ways: the live summary against
``replay report --json``, a recount from the raw run file, and what vLLM answered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.trajectories import write_trajectory
from tests.support.vllm import MAX_MODEL_LEN, VLLM, replay_cli

pytestmark = [pytest.mark.engine, pytest.mark.vllm, pytest.mark.timeout(300, func_only=True)]

ASKED = 300


def _source() -> str:
    import argparse

    return Path(argparse.__file__).read_text()


def _records(path: Path) -> list[dict[str, Any]]:
    return [r for line in path.read_text().splitlines() if (r := json.loads(line))["type"] == "request"]


def _run(vllm: VLLM, workload: Path, out: Path, api: str, *extra: str) -> dict[str, Any]:
    proc = replay_cli(["run", str(workload), "--host", vllm.api, "--model", vllm.model, "--api", api, "-c", "1",
                       "--tool-time", "none", "--retries", "0", "--out", str(out), "--json", *extra])  # fmt: skip
    assert proc.returncode in (0, 2), proc.stderr[-3000:]
    live = json.loads(proc.stdout)
    offline = replay_cli(["report", str(out), "--json"])
    assert json.loads(offline.stdout)["answers"] == live["answers"]
    return live


@pytest.fixture(scope="module")
def near_full(vllm: VLLM, tmp_path_factory) -> Path:
    """One call whose prompt leaves fewer than ASKED tokens of vLLM's served context for the answer."""
    text = _source()
    status, counted = vllm.post("/tokenize", {"model": vllm.model, "prompt": text[:20_000]})
    assert status == 200, counted
    chars = int(20_000 * (MAX_MODEL_LEN - ASKED // 2) / counted["count"])  # about ASKED / 2 tokens left
    path = tmp_path_factory.mktemp("near-full") / "w.jsonl"
    turn = {"append": [{"role": "user", "content": text[:chars]}], "output": {"content": "ok"},
            "output_tokens": ASKED, "tool_time_s": 0.0}  # fmt: skip
    write_trajectory(path, "near-full", [turn])
    return path


def test_an_answer_vllm_cut_to_fit_its_context_is_short_lowered(vllm: VLLM, near_full: Path, tmp_path: Path) -> None:
    live = _run(vllm, near_full, tmp_path / "run.jsonl", "chat")
    (rec,) = _records(tmp_path / "run.jsonl")
    assert rec["error"] is None and rec["finish_reason"] == "length"
    assert rec["length_asked"] == ASKED and rec["length_served"] == MAX_MODEL_LEN - rec["prompt_tokens"] < ASKED
    assert rec["answer_check"]["length"] == "lowered"
    a = live["answers"]
    print(f"\nvLLM served {rec['length_served']} of {ASKED} tokens asked (prompt {rec['prompt_tokens']} of "
          f"{MAX_MODEL_LEN}): {a['short_by_reason']}")  # fmt: skip
    assert a["length_short"] == 1 and a["short_share"] == 1.0 and a["short_by_reason"]["lowered"] == 1
    assert a["forced"] is None


def test_a_forced_length_vllm_ignored_is_not_called_forced(vllm: VLLM, near_full: Path, tmp_path: Path) -> None:
    """/v1/messages drops ignore_eos and min_tokens: the forced answer comes back short, and the run says so."""
    live = _run(vllm, near_full, tmp_path / "run.jsonl", "anthropic", "--force-output-length")
    (rec,) = _records(tmp_path / "run.jsonl")
    assert rec["error"] is None and rec["length_served"] < rec["length_asked"] == ASKED
    assert live["answers"]["forced"] is False and live["answers"]["length_short"] == 1
    text = replay_cli(["report", str(tmp_path / "run.jsonl")]).stdout
    assert "WARNING: --force-output-length was not honoured: 1 of 1 answers were shorter than asked" in text


def test_a_forced_length_that_no_longer_fits_is_refused_as_context_overflow(vllm: VLLM, near_full: Path,
                                                                           tmp_path: Path) -> None:  # fmt: skip
    """Chat honours min_tokens: vLLM lowers max_tokens to fit, then refuses min_tokens over it."""
    live = _run(vllm, near_full, tmp_path / "run.jsonl", "chat", "--force-output-length")
    (rec,) = _records(tmp_path / "run.jsonl")
    assert rec["status"] == 400 and "min_tokens must be less than or equal to max_tokens" in rec["error_detail"]
    assert rec["error"] == "context_overflow" and live["errors_by_class"] == {"context_overflow": 1}


@pytest.mark.parametrize("api", ["chat", "completions", "responses", "anthropic"])
def test_max_tokens_over_the_served_context_is_context_overflow(vllm: VLLM, api: str, tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    write_trajectory(path, "too-long-answer", [{"append": [{"role": "user", "content": "Write it all."}],
                                               "output": {"content": "ok"}, "output_tokens": MAX_MODEL_LEN + 100,
                                               "tool_time_s": 0.0}])  # fmt: skip
    proc = replay_cli(["run", str(path), "--host", vllm.api, "--model", vllm.model, "--api", api, "--retries", "0",
                       "--out", str(tmp_path / "run.jsonl"), "--json"])  # fmt: skip
    (rec,) = _records(tmp_path / "run.jsonl")
    assert (
        rec["status"] == 400 and f"={MAX_MODEL_LEN + 100} cannot be greater than max_model_len" in rec["error_detail"]
    )
    assert rec["error"] == "context_overflow" and json.loads(proc.stdout)["errors_by_class"] == {"context_overflow": 1}


def test_a_later_run_is_not_served_from_an_earlier_runs_cache(vllm: VLLM, tmp_path: Path) -> None:
    """The same trajectory twice against the warm server: the system prompt (three of vLLM's 128-token blocks)
    carries the run's tag, so the second run's first call finds nothing of the first run's in the cache."""
    path = tmp_path / "w.jsonl"
    system = "You are the house agent. " + _source()[:2000]
    write_trajectory(path, "warm", [{"append": [{"role": "system", "content": system},
                                                {"role": "user", "content": "Fix the parser."}],
                                     "output": {"content": "ok"}, "output_tokens": 4, "tool_time_s": 0.0}])  # fmt: skip
    cached = []
    for i in range(2):
        _run(vllm, path, tmp_path / f"{i}.jsonl", "chat")
        (rec,) = _records(tmp_path / f"{i}.jsonl")
        assert rec["error"] is None and rec["prompt_tokens"] > 3 * 128
        cached.append(rec["cached_tokens"])
    print(f"\nfirst call's cached tokens, run 1 and run 2 on a warm vLLM: {cached}")
    assert cached == [0, 0]
