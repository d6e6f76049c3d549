"""The twin of vLLM: probe it, predict a concurrency the probe did not use, measure it.

vLLM states its KV cache (``vllm:cache_config_info``: 1,048,576 tokens with the tests' 1 GiB) and block (128) in
``/metrics`` and its served context in ``/v1/models``; the probe takes them from there instead of measuring a
bound (the twin of vLLM used to take 10,880 tokens and a 16-token block, and missed TTFT p95 by 5.6x). The
workload is a dozen small agent sessions with one-second tool pauses (``scripts/twin_check.py``); the prediction
runs the fitted profile on the virtual clock over the same window as the measured ``replay run``. ``pytest -s``
prints the table; docs/twin.md has the figures.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from replay.runner.single_run import RunSpec
from replay.sim.core.profile_file import load_profile_file
from replay.twin.probe import ProbeConfig, probe
from replay.twin.profile_out import write_twin
from replay.twin.runners import HttpRunner
from replay.workload.trajectory import load_workload
from tests.support.paths import ROOT
from tests.support.vllm import MAX_MODEL_LEN, MAX_NUM_SEQS, VLLM

sys.path.insert(0, str(ROOT / "scripts"))
from twin_check import agent_workload, errors, measure, predict

pytestmark = [pytest.mark.engine, pytest.mark.vllm, pytest.mark.timeout(420, func_only=True)]

PROBE_S = 90.0
MEASURE_S, WARMUP_S = 60.0, 15.0
CONCURRENCY = 3  # the ladder probes 1, 2, 4, 8 (and 16, past the cap of 8)
TOLERANCE = 0.25  # total tokens per second, predicted against measured


def test_the_twin_of_vllm_predicts_an_unprobed_concurrency(vllm: VLLM, tmp_path: Path) -> None:
    paths = [str(agent_workload(tmp_path / "agents.jsonl"))]
    workload = load_workload(paths)
    base = RunSpec(host=vllm.api, model=vllm.model, force_output_length=True, request_timeout_s=120.0)
    result = probe(HttpRunner(base, tmp_path), workload, tmp_path, ProbeConfig(duration_s=PROBE_S))
    assert result.kv_source == "host" and result.kv_tokens == 1 << 20 and result.phases[1].calls == 0
    assert result.facts.block_size == 128 and result.facts.max_model_len == MAX_MODEL_LEN
    assert (result.max_num_seqs, result.max_num_seqs_found) == (MAX_NUM_SEQS, True)
    assert CONCURRENCY not in {lv["concurrency"] for lv in result.levels}
    fields = result.twin_fields()
    assert fields["block_size"] == round(128 / result.ratio)
    assert fields["max_model_len"] == int(MAX_MODEL_LEN / result.ratio)
    write_twin(tmp_path / "twin.toml", fields, result.public())
    twin = load_profile_file(tmp_path / "twin.toml")
    predicted = predict(twin, workload, CONCURRENCY, MEASURE_S, WARMUP_S, result.ratio)
    measured = measure(base, paths, CONCURRENCY, MEASURE_S, WARMUP_S, tmp_path / "measured.jsonl")
    error = errors(predicted, measured)
    ladder = [lv["concurrency"] for lv in result.levels]
    print(f"\nvLLM twin at concurrency {CONCURRENCY} (probe {result.elapsed_s:.0f} s, KV {result.kv_tokens:,} host "
          f"tokens from the host, block {result.facts.block_size}, ladder {ladder}):")  # fmt: skip
    for k, e in error.items():
        print(f"  {k}: predicted {predicted[k]}, measured {measured[k]}, error {e if e is None else f'{e:+.1%}'}")
    assert error["total_tps"] is not None and abs(error["total_tps"]) <= TOLERANCE, (error, predicted, measured)
