"""replay's AgentX recipe beside agentx-harness 1.0.12 on the same trace and the same simulated host.

Not a test: it needs agentx-harness installed in a throwaway virtualenv (never the project's), a local tokenizer
and the Weka trace with subagents. It

1. trains a small byte-level BPE with ``tokenizers`` in that virtualenv (no model hub is reachable) and saves it
   as a Hugging Face tokenizer directory, which AIPerf loads with ``--tokenizer DIR``;
2. writes a copy of the trace in the shape AIPerf's ``weka_trace`` loader accepts (``hash_id_scope: local``, no
   builder bookkeeping, a subagent's ``t`` its spawn time and its calls' ``t`` absolute; docs/recipes.md says
   why each change is needed), imports it for replay too;
3. starts one simulated host (``replay sim --port 0``) on 127.0.0.1 and runs ``agentx profile`` against it, then
   ``replay run --recipe agentx`` against it, with the same concurrency, duration and seed;
4. prints the figures side by side (markdown) and writes them as JSON.

    python -m venv /tmp/agentx-venv && /tmp/agentx-venv/bin/pip install agentx-harness==1.0.12 tokenizers
    python scripts/compare_agentx_harness.py --venv /tmp/agentx-venv --duration 120 --concurrency 4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO.parent / "shared" / "trajectories" / "real" / "weka" / "sample_trace_with_subagent.json"

# fmt: off
TRAIN = r"""
import sys, json, random
from tokenizers import Tokenizer, models, trainers, pre_tokenizers, decoders
out = sys.argv[1]
rng = random.Random(0)
words = open(sys.argv[2]).read().split()
text = [" ".join(rng.choice(words) for _ in range(64)) for _ in range(4000)]
tok = Tokenizer(models.BPE(unk_token=None))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=4096, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                  special_tokens=["<|endoftext|>"]))
import os
os.makedirs(out, exist_ok=True)
tok.save(os.path.join(out, "tokenizer.json"))
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1000000, "eos_token": "<|endoftext|>",
           "bos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"},
          open(os.path.join(out, "tokenizer_config.json"), "w"))
"""
# fmt: on


def aiperf_trace(src: Path, out_dir: Path) -> Path:
    """The trace as AIPerf's weka_trace loader accepts it (its models forbid extra fields, and it reads time so)."""
    data = json.loads(src.read_text())
    data = {k: v for k, v in data.items() if not k.startswith("_")}
    data["hash_id_scope"] = "local"  # 1.0.12 accepts only local; this file has one trace, so the ids mean the same
    for r in data["requests"]:
        if r.get("type") != "subagent":
            r.pop("ttft", None)
            continue
        spawn = float(r["t"]) - float(r.get("duration_ms") or 0) / 1000.0  # the builder's t is the completion
        r["t"] = spawn  # AIPerf reads a subagent's t as its spawn time
        r["subagent_type"] = r.get("subagent_type") or "Explore"
        for q in r["requests"]:
            q["t"] = spawn + float(q["t"])  # nested t count from the subagent's start; AIPerf wants them absolute
            q.pop("ttft", None)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "trace.json"
    path.write_text(json.dumps(data))
    return out_dir


@contextlib.contextmanager
def sim_host(profile: str, truth: Path) -> Iterator[str]:
    cmd = [sys.executable, "-m", "replay", "sim", "--port", "0", "--profile", profile, "--truth-log", str(truth)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("REPLAY_SIM_READY"):
                port = int(line.split("port=")[1].split()[0])
                break
        else:
            raise RuntimeError("the simulated host did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run_agentx(venv: Path, url: str, trace_dir: Path, tok: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    # Not HF_HUB_OFFLINE: AIPerf then resolves names through the hub cache only and refuses a directory path.
    env = {**os.environ, "NO_PROXY": "127.0.0.1", "HF_HUB_DISABLE_TELEMETRY": "1"}
    cmd = [str(venv / "bin" / "agentx"), "profile", "--url", url, "--model", "replay-sim", "--endpoint-type", "chat",
           "--custom-dataset-type", "weka_trace", "--input-file", str(trace_dir), "--tokenizer", str(tok),
           "--concurrency", str(args.concurrency), "--benchmark-duration", str(args.duration), "--random-seed",
           str(args.seed), "--unsafe-override", "--ui", "none", "--artifact-dir", str(out)]  # fmt: skip
    t0 = time.time()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.duration * 4 + 900)
    (out / "agentx.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        print(f"agentx exited {done.returncode}; see {out / 'agentx.log'}", file=sys.stderr)
    found = sorted(out.rglob("profile_export_aiperf.json"))
    if not found:
        raise RuntimeError(f"no profile_export_aiperf.json under {out} (agentx.log has why)")
    return {"export": json.loads(found[-1].read_text()), "wall_s": time.time() - t0}


def run_replay(url: str, weka_jsonl: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "replay", "run", str(weka_jsonl), "--recipe", "agentx", "--host", f"{url}/v1",
           "--model", "replay-sim", "-c", str(args.concurrency), "--duration", str(args.duration), "--seed",
           str(args.seed), "--gpus", str(args.gpus), "--json", "-q", "--out", str(out / "run.jsonl")]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration * 4 + 600)
    if not done.stdout.strip():
        raise RuntimeError(f"replay printed no summary: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def _metric(export: dict[str, Any], tag: str, stat: str = "avg") -> Any:
    m = export.get(tag)
    return m.get(stat) if isinstance(m, dict) else None


def side_by_side(
    ax: dict[str, Any], rp: dict[str, Any], truth: dict[str, int], gpus: int
) -> list[tuple[str, Any, Any]]:
    e = ax["export"]
    a = rp["agentx"]
    return [
        ("measured requests (profiling phase / steady window)", _metric(e, "request_count"), a["requests"]),
        ("warm-up requests", ((e.get("warmup_metrics") or {}).get("output_sequence_length") or {}).get("count"),
         a["warmup_requests"]),
        ("errors", _metric(e, "error_request_count") or len(e.get("error_summary") or []), rp["errors"]),
        ("subagents: runs started / finished (AIPerf); calls measured (replay)", _branches(e), _subagents(rp)),
        ("input tokens (server counts)", _metric(e, "total_isl", "avg"), a["throughput"]["input_tokens"]),
        ("output tokens (server counts)", _metric(e, "total_osl", "avg"), a["throughput"]["output_tokens"]),
        ("host cache hit (cached / prompt)", _hit(e), a["prefix_cache"]["host_hit_ratio"]),
        ("theoretical prefix-cache hit", (_metric(e, "theoretical_prefix_cache_hit") or 0) / 100,
         a["prefix_cache"]["theoretical_hit_ratio"]),
        ("total token throughput (tok/s)", _metric(e, "total_token_throughput"), a["throughput"]["total_tps"]),
        ("per GPU (tok/s)", (_metric(e, "total_token_throughput") or 0) / gpus, a["throughput"]["total_tps_per_gpu"]),
        ("TTFT p50 (ms)", _metric(e, "time_to_first_token", "p50"), _ms(a["ttft_s"]["p50"])),
        ("ITL p50 (ms)", _metric(e, "inter_token_latency", "p50"), _ms(a["itl_s"]["p50"])),
        ("submission_valid", (e.get("metadata") or {}).get("submission_valid"), rp.get("submission_valid")),
        ("invalid reasons", ", ".join((e.get("metadata") or {}).get("submission_invalid_reasons") or []),
         ", ".join(r.split(":")[0] for r in rp.get("invalid_reasons") or [])),
        ("host truth log: calls served (both tools)", truth["calls"], None),
    ]  # fmt: skip


def _branches(e: dict[str, Any]) -> str:
    b = e.get("branch_stats") or {}
    return f"{b.get('children_spawned')} / {b.get('children_completed')}"


def _subagents(rp: dict[str, Any]) -> str:
    return str(rp["agentx"]["subagent_requests"])


def _hit(e: dict[str, Any]) -> float | None:
    cached, prompt = _metric(e, "total_usage_prompt_cache_read_tokens"), _metric(e, "total_usage_prompt_tokens")
    return cached / prompt if cached is not None and prompt else None


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--venv", type=Path, default=Path("/tmp/agentx-venv"), help="virtualenv with agentx-harness 1.0.12")
    p.add_argument("--trace", type=Path, default=TRACE)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/agentx-compare"))
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--duration", type=int, default=120)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--sim-profile", default="fast")
    args = p.parse_args()
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    tok = work / "tokenizer"
    if not (tok / "tokenizer.json").exists():
        words = REPO / "replay" / "workload" / "importers" / "_blocks.py"  # its word list: the traffic's own words
        subprocess.run([str(args.venv / "bin" / "python"), "-c", TRAIN, str(tok), str(words)], check=True)
    trace_dir = aiperf_trace(args.trace, work / "trace")
    weka_jsonl = work / "weka.jsonl"
    # replay imports the trace as recorded (its importer reads a subagent's t as its completion, as the builder wrote)
    subprocess.run([sys.executable, "-m", "replay", "import", str(args.trace), "-o", str(weka_jsonl), "-q"], check=True)
    truth_path = work / "truth.jsonl"
    with sim_host(args.sim_profile, truth_path) as url:
        ax = run_agentx(args.venv, url, trace_dir, tok, work / "agentx", args)
        served_after_agentx = sum(1 for _ in truth_path.open()) if truth_path.exists() else 0
        (work / "replay").mkdir(exist_ok=True)
        rp = run_replay(url, weka_jsonl, work / "replay", args)
    truth = {"calls": sum(1 for _ in truth_path.open()), "after_agentx": served_after_agentx}
    rows = side_by_side(ax, rp, truth, args.gpus)
    print("| figure | agentx-harness 1.0.12 | replay --recipe agentx |\n|---|---|---|")
    for name, a, b in rows:
        print(f"| {name} | {_fmt(a)} | {_fmt(b)} |")
    print(f"\nhost calls: {truth['after_agentx']} from agentx-harness (warm-up included), "
          f"{truth['calls'] - truth['after_agentx']} from replay")  # fmt: skip
    (work / "comparison.json").write_text(json.dumps({"rows": rows, "truth": truth, "args": vars(args)}, default=str))


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 10 else f"{v:,.1f}"
    return str(v)


if __name__ == "__main__":
    main()
