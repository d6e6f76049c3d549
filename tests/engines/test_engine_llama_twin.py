"""The twin of a real engine: probe llama-server, predict a concurrency the probe did not use, measure it.

llama-server (tiny random-weight model, ``-np 4 -c 16384``, one thread) comes from the engine tests' fixture
(``tests/engines/test_engine_llama.py``: built or reused by ``scripts/real_engine.py``, skipped loudly when it cannot
be). The workload is a dozen small agent sessions that fit its 4,096-token slots, with one-second tool
pauses. The probe gets 90 s here (3 minutes by default); the prediction runs the fitted profile on the
virtual clock; the measurement is a ``replay run`` of the same window. The errors asserted are the ones
docs/twin.md states for this engine on a shared two-core machine. When a figure misses it while the host's
own speed (three fixed calls timed before the probe and after the measurement) drifted by more than half,
the test is skipped with the drift instead of failing: it would be measuring the machine's other jobs.
``pytest -s`` prints the table.
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
from tests.engines.test_engine_llama import PARALLEL, engine  # noqa: F401 - the module fixture, one server for this module

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from twin_check import agent_workload, errors, host_speed, measure, predict

pytestmark = [pytest.mark.engine, pytest.mark.timeout(360, func_only=True)]

PROBE_S = 120.0
MEASURE_S, WARMUP_S = 60.0, 15.0
CONCURRENCY = 3  # the ladder probes 1, 2, 4 (and 8, where it finds the 4 slots)
TOLERANCE = {"total_tps": 0.30, "ttft_p50_s": 0.35}  # docs/twin.md: what this engine showed here, with margin
DRIFT = 1.5  # the host's own speed may change this much between the probe and the measurement


def test_the_twin_of_llama_server_predicts_an_unprobed_concurrency(engine, tmp_path):  # noqa: F811
    paths = [str(agent_workload(tmp_path / "agents.jsonl"))]
    workload = load_workload(paths)
    base = RunSpec(host=engine.api, model=engine.model, force_output_length=True, request_timeout_s=120.0)
    runner = HttpRunner(base, tmp_path)
    before = host_speed(runner, tmp_path, "before")
    result = probe(runner, workload, tmp_path, ProbeConfig(duration_s=PROBE_S))
    # what the engine is: its slots as it states them (/props; the ladder's count of them failed on a busy machine)
    # and their context, found by counting
    assert (result.max_num_seqs, result.max_num_seqs_found, result.max_num_seqs_source) == (PARALLEL, True, "host")
    assert (result.facts.slots, result.facts.max_model_len) == (PARALLEL, 16384 // PARALLEL)
    assert result.ratio > 1.1  # its tokenizer, trained on a little Python, needs more tokens than cl100k
    assert result.context_accepted is not None and result.context_accepted * result.ratio <= 16384 / PARALLEL
    # A short answer llama-server sends no text of (an unfinished UTF-8 character held back) while counting its
    # tokens is a success (its answer check says empty), no longer an error: every call succeeds.
    assert all(p.errors == 0 for p in result.phases[1:])
    assert result.fit.untrusted() is None, result.fit.public()  # the twin reproduces its own probe
    assert result.elapsed_s <= PROBE_S + 10
    assert CONCURRENCY not in {lv["concurrency"] for lv in result.levels}
    write_twin(tmp_path / "twin.toml", result.twin_fields(), result.public())
    twin = load_profile_file(tmp_path / "twin.toml")
    predicted = predict(twin, workload, CONCURRENCY, MEASURE_S, WARMUP_S, result.ratio)
    measured = measure(base, paths, CONCURRENCY, MEASURE_S, WARMUP_S, tmp_path / "measured.jsonl")
    after = host_speed(runner, tmp_path, "after")
    error = errors(predicted, measured)
    drift = {k: after[k] / before[k] for k in before}
    print(f"\nllama-server twin at concurrency {CONCURRENCY} (probe {result.elapsed_s:.0f} s), drift {drift}:")
    for k, e in error.items():
        print(f"  {k}: predicted {predicted[k]}, measured {measured[k]}, error {e if e is None else f'{e:+.1%}'}")
    missed = [k for k, tolerance in TOLERANCE.items() if error[k] is None or abs(error[k]) > tolerance]
    if missed and any(not 1 / DRIFT <= d <= DRIFT for d in drift.values()):  # the neighbours changed the host
        why = "other jobs on this machine: the twin's error cannot be told from it"
        pytest.skip(f"{missed} outside the tolerance, but the host's own speed drifted by {drift} between the probe "
                    f"and the measurement ({why})")  # fmt: skip
    assert not missed, (error, predicted, measured)
