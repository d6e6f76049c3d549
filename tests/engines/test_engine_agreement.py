"""Two engines serving the same weights: llama-server (the tiny GGUF) and vLLM (the same weights converted to
Hugging Face's layout), side by side at temperature 0 on identical prompts, their answers compared call by call.

Both compute the same function up to the order of floating-point sums (f32 both; llama.cpp's ggml kernels against
torch's), so greedy decoding agrees until two candidate tokens are nearly tied. The figure is printed and stated
in docs/real-engines.md; what is asserted is that the comparison covers every call both answered, equals a recount
from the two run files, and is the same when ``replay report`` rebuilds it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.engines.test_engine_llama import Engine, engine  # noqa: F401 - llama-server, the module fixture
from tests.support.trajectories import write_trajectory
from tests.support.vllm import VLLM, replay_cli

pytestmark = [pytest.mark.engine, pytest.mark.vllm, pytest.mark.timeout(300, func_only=True)]

OUTPUT_TOKENS = 32


def _workload(path: Path, n: int = 6, turns: int = 4) -> Path:
    import argparse

    text = Path(argparse.__file__).read_text()
    for i in range(n):
        opening = {"append": [{"role": "system", "content": f"Agent {i}. Answer tersely."},
                              {"role": "user", "content": text[i * 900 : i * 900 + 700]}],
                   "output": {"content": "ok"}, "output_tokens": OUTPUT_TOKENS, "tool_time_s": 0.0}  # fmt: skip
        rest = [{"append": [{"role": "user", "content": text[i * 900 + 700 * k : i * 900 + 700 * k + 300]}],
                 "output": {"content": "next"}, "output_tokens": OUTPUT_TOKENS, "tool_time_s": 0.0}
                for k in range(1, turns)]  # fmt: skip
        write_trajectory(path, f"agree-{i}", [opening, *rest])
    return path


def _answers(path: Path) -> dict[tuple[Any, ...], str]:
    return {(r["task"], r["trajectory"], r["turn"]): r["answer_text"]
            for line in path.read_text().splitlines()
            if (r := json.loads(line))["type"] == "request" and r["error"] is None}  # fmt: skip


def test_llama_server_and_vllm_on_the_same_weights_agree_at_temperature_0(engine: Engine, vllm: VLLM,  # noqa: F811
                                                                          tmp_path: Path) -> None:  # fmt: skip
    out = tmp_path / "run.jsonl"
    proc = replay_cli(["run", str(_workload(tmp_path / "w.jsonl")), "--host", engine.api, "--host", vllm.api,
                       "--model", vllm.model, "-c", "2", "--tool-time", "fixed:0.05", "--force-output-length",
                       "--extra-body", '{"temperature": 0}', "--out", str(out), "--json"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (cmp,) = json.loads(proc.stdout)["comparisons"]
    ag = cmp["agreement"]
    a, b = (_answers(p) for p in sorted(tmp_path.glob("run.*-127.0.0.1-*.jsonl")))
    pairs = a.keys() & b.keys()
    same = sum(a[k] == b[k] for k in pairs)
    print(f"\nllama-server / vLLM, same weights, temperature 0: {same} of {len(pairs)} answers identical "
          f"({ag['exact_share']:.1%}); where they differ, first differing token #{ag['first_divergence_mean']} "
          f"on average ({OUTPUT_TOKENS}-token answers)")  # fmt: skip
    assert len(pairs) == ag["pairs"] == len(a) == len(b) == 24
    assert ag["exact_share"] == pytest.approx(same / len(pairs), abs=1e-12)
    assert ag["exact_share"] >= 0.5  # the same function: most greedy answers agree (85 % in 20 calls by hand)
    rebuilt = json.loads(replay_cli(["report", str(tmp_path / "run.compare.json"), "--json"]).stdout)
    assert rebuilt["comparisons"][0]["agreement"] == ag
