#!/usr/bin/env python3
"""A real inference engine for replay's tests: llama.cpp's llama-server and a tiny model, made here.

Nothing is downloaded but two things from PyPI: the ``llama-cpp-python`` source distribution (for the
llama.cpp sources it vendors) and, when they are not importable, the ``tokenizers`` and ``gguf`` wheels.

* ``llama-server`` is built from the vendored llama.cpp with cmake (only that target, no web UI, no
  OpenSSL, FetchContent disconnected so the build cannot reach the network) and cached in
  ``$REPLAY_CACHE/llama-server-<version>/bin/llama-server`` (default cache: ``~/.cache/replay``).
* The model is a tiny Llama-architecture GGUF with random weights (seeded numpy) and a byte-level BPE
  tokenizer trained with ``tokenizers`` on Python's own standard-library sources, with a ChatML chat
  template so ``/v1/chat/completions`` works. Its output is gibberish, which does not matter for load
  tests: send ``ignore_eos`` with ``max_tokens`` (replay's ``--force-output-length``). Cached as
  ``$REPLAY_CACHE/models/tiny-llama-<key>.gguf``, the key a hash of every generation parameter and of
  the training text.
* ``tokenizers`` and ``gguf`` are used from the environment when importable, else installed (pinned,
  ``--no-deps`` with their two small pure-Python needs) into ``$REPLAY_CACHE/pydeps-py<X.Y>``, never
  into the environment that runs this script.

Every step is idempotent: a second run finds both in the cache and takes well under a second.

    python scripts/real_engine.py                 # build or reuse; print the binary and model paths
    python scripts/real_engine.py --json          # the same as one JSON object (what the tests read)
    python scripts/real_engine.py --check         # exit 3 (printing what is missing) instead of building
    python scripts/real_engine.py --serve --port 8080   # build or reuse, then run llama-server in the foreground

``REPLAY_TINY_MODEL='{"n_layer": 4}'`` overrides model parameters (see MODEL_DEFAULTS; a new cache key).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

LLAMA_CPP_PYTHON_VERSION = "0.3.36"  # its vendored llama.cpp reports "0.5.0-dev", ggml 0.25.3
PYDEPS = ("tokenizers==0.23.3", "gguf==0.19.0", "pyyaml>=5.1", "tqdm>=4.27")  # gguf imports yaml and tqdm

DOWNLOAD_TIMEOUT_S = 1200
CONFIGURE_TIMEOUT_S = 600
BUILD_TIMEOUT_S = 3600
VERSION_TIMEOUT_S = 60

CMAKE_ARGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",  # one self-contained binary that can live in the cache alone
    "-DGGML_NATIVE=ON",  # built and run on the same machine; the cached binary is checked with --version
    "-DGGML_CCACHE=OFF",
    "-DLLAMA_BUILD_COMMON=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",  # no npm build of the web UI ...
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # ... and no download of a prebuilt one
    "-DLLAMA_OPENSSL=OFF",  # plain HTTP on 127.0.0.1 is all the tests need
    "-DFETCHCONTENT_FULLY_DISCONNECTED=ON",  # any FetchContent left would fail here instead of downloading
)

# The tiny model. Changing any value (or MODEL_RECIPE) makes a new cache key, so a new file.
MODEL_RECIPE = 1
MODEL_DEFAULTS: dict[str, Any] = {
    "vocab_size": 4096,
    "n_layer": 2,
    "n_embd": 768,
    "n_head": 12,
    "n_head_kv": 1,  # one KV head: little KV per token, so decoding reads mostly weights and batches well
    "n_ff": 3072,
    "context_length": 32768,
    "rope_freq_base": 10000.0,
    "rms_eps": 1e-5,
    "init_std": 0.02,
    "dtype": "f32",
    "seed": 1234,
    "corpus_bytes": 2_000_000,
}
MODEL_NAME = "tiny-llama"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + (message['content'] if message['content'] is string else '') "
    "+ '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class EngineError(RuntimeError):
    """The engine cannot be made here; the message says why and where the log is."""


def log(msg: str) -> None:
    print(f"real_engine: {msg}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    return Path(os.environ.get("REPLAY_CACHE") or Path.home() / ".cache" / "replay").expanduser()


def server_dir(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    return cache_root() / f"llama-server-{version}"


def server_binary(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    return server_dir(version) / "bin" / "llama-server"


@contextlib.contextmanager
def _lock(name: str) -> Iterator[None]:
    """An exclusive file lock, so two processes (two test runs) never build the same thing at once."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _run(cmd: list[str], logfile: Path, timeout: float, cwd: Path | None = None) -> None:
    """Run a build step with its output appended to ``logfile``, saying every 30 s how far it got (cmake's
    ``[ 45%]`` lines); a failure names the log and shows its tail."""
    deadline = time.monotonic() + timeout
    t0 = last = time.monotonic()
    percent = None
    with open(logfile, "ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except FileNotFoundError:
            raise EngineError(f"{cmd[0]} not found (needed to build llama-server)") from None
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            if (m := re.match(rb"\[\s*(\d+)%\]", line)) is not None:
                percent = int(m.group(1))
            now = time.monotonic()
            if now > deadline:
                proc.kill()
                raise EngineError(f"{cmd[0]} timed out after {timeout:.0f}s; log: {logfile}")
            if now - last >= 30:
                last = now
                log(f"  ... {percent if percent is not None else '?'}% after {now - t0:.0f} s")
        proc.wait()
    if proc.returncode != 0:
        tail = logfile.read_text(errors="replace").splitlines()[-25:]
        raise EngineError(f"{' '.join(cmd[:3])} ... failed ({proc.returncode}); log: {logfile}\n" + "\n".join(tail))


def binary_works(binary: Path) -> bool:
    """The cached binary exists and runs on this CPU (a -march=native build copied elsewhere would not)."""
    if not binary.is_file():
        return False
    try:
        proc = subprocess.run([str(binary), "--version"], capture_output=True, timeout=VERSION_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _extract_llama_cpp(sdist: Path, dest: Path) -> Path:
    """Only the vendored llama.cpp tree of the sdist, without its .git data."""
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/")[0]
        prefix = f"{top}/vendor/llama.cpp/"
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and "/.git/" not in m.name + "/"]
        if not members:
            raise EngineError(f"{sdist.name} holds no vendor/llama.cpp")
        try:
            tar.extractall(dest, members=members, filter="data")
        except TypeError:  # Python < 3.11.4 has no extraction filters
            tar.extractall(dest, members=members)  # a PyPI sdist; members were filtered by prefix above
    return dest / prefix


def ensure_server(version: str = LLAMA_CPP_PYTHON_VERSION, jobs: int | None = None, keep_build: bool = False) -> Path:
    """The llama-server binary for ``version``: from the cache, or built now (minutes) and cached."""
    binary = server_binary(version)
    if binary_works(binary):
        return binary
    with _lock(f"llama-server-{version}"):
        if binary_works(binary):  # another process built it while we waited
            return binary
        if binary.exists():
            log(f"{binary} does not run here (built for another CPU?): building it again")
        for tool in ("cmake", "c++", "cc"):
            if shutil.which(tool) is None:
                raise EngineError(f"'{tool}' is not installed: cannot build llama-server")
        out_dir = server_dir(version)
        out_dir.mkdir(parents=True, exist_ok=True)
        logfile = out_dir / "build.log"
        logfile.write_text("")
        work = cache_root() / f"build-llama-server-{version}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        jobs = jobs or os.cpu_count() or 2
        t0 = time.monotonic()
        log(f"building llama-server from llama-cpp-python=={version} (log: {logfile})")

        log("downloading the llama-cpp-python sdist from PyPI")
        pip = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps"]
        # --no-binary for this package only: its build requirements (scikit-build-core, ...) come as wheels,
        # so pip's metadata step does not compile them (":all:" would build ninja and more from source).
        pip += ["--no-binary", "llama-cpp-python", "-d", str(work / "sdist"), f"llama-cpp-python=={version}"]
        _run(pip, logfile, DOWNLOAD_TIMEOUT_S)
        sdists = sorted((work / "sdist").glob("llama_cpp_python-*.tar.gz"))
        if not sdists:
            raise EngineError(f"pip downloaded no llama_cpp_python sdist; log: {logfile}")
        t_download = time.monotonic() - t0

        src = _extract_llama_cpp(sdists[0], work / "src")
        build = work / "build"
        log(f"configuring (cmake {' '.join(CMAKE_ARGS)})")
        _run(["cmake", "-S", str(src), "-B", str(build), *CMAKE_ARGS], logfile, CONFIGURE_TIMEOUT_S)
        log(f"compiling the llama-server target with -j{jobs} (several minutes on 2 cores)")
        t_build0 = time.monotonic()
        _run(["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"], logfile, BUILD_TIMEOUT_S)
        t_compile = time.monotonic() - t_build0

        built = build / "bin" / "llama-server"
        if not built.is_file():
            raise EngineError(f"the build finished but {built} is missing; log: {logfile}")
        binary.parent.mkdir(parents=True, exist_ok=True)
        tmp = binary.with_name(binary.name + ".tmp")
        shutil.copy2(built, tmp)
        tmp.replace(binary)
        if not binary_works(binary):
            raise EngineError(f"{binary} was built but does not run (--version failed); log: {logfile}")
        info = {
            "llama_cpp_python": version,
            "cmake_args": list(CMAKE_ARGS),
            "jobs": jobs,
            "download_s": round(t_download, 1),
            "compile_s": round(t_compile, 1),
            "total_s": round(time.monotonic() - t0, 1),
            "machine": platform.machine(),
            "cpu": _cpu_model(),
            "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        (out_dir / "build.json").write_text(json.dumps(info, indent=2) + "\n")
        if keep_build:
            log(f"build tree kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        log(f"built {binary} in {info['total_s']:.0f}s (download {t_download:.0f}s, compile {t_compile:.0f}s)")
        return binary


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


# ---------------------------------------------------------------------------------------------------------
# The tiny model
# ---------------------------------------------------------------------------------------------------------


def training_corpus(limit_bytes: int) -> list[str]:
    """Python's own stdlib sources, in sorted file order, up to ``limit_bytes``: deterministic, always here."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts: list[str] = []
    total = 0
    for path in sorted(stdlib.glob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.append(text)
        total += len(text.encode())
        if total >= limit_bytes:
            break
    if total < limit_bytes // 4:
        raise EngineError(f"too little stdlib source under {stdlib} to train a tokenizer ({total} bytes)")
    return texts


def model_key(params: dict[str, Any], corpus: list[str]) -> str:
    digest = hashlib.sha256()
    for text in corpus:
        digest.update(hashlib.sha256(text.encode()).digest())
    blob = json.dumps({"recipe": MODEL_RECIPE, "params": params, "corpus": digest.hexdigest()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def model_path(params: dict[str, Any] | None = None) -> Path:
    params = model_params(params)
    return cache_root() / "models" / f"{MODEL_NAME}-{model_key(params, training_corpus(params['corpus_bytes']))}.gguf"


def import_engine_deps() -> tuple[Any, Any]:
    """``tokenizers`` and ``gguf``: from the environment, else pip-installed into the cache (not the venv)."""
    target = cache_root() / f"pydeps-py{sys.version_info.major}.{sys.version_info.minor}"
    if target.is_dir() and str(target) not in sys.path:
        sys.path.append(str(target))  # appended: the environment's own packages (numpy) keep precedence
    try:
        import gguf
        import tokenizers
    except ImportError:
        with _lock("pydeps"):
            log(f"installing {' '.join(PYDEPS)} into {target}")
            cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
            proc = subprocess.run(
                [*cmd, "--upgrade", "--target", str(target), *PYDEPS],
                capture_output=True,
                text=True,
                timeout=DOWNLOAD_TIMEOUT_S,
                check=False,
            )
            if proc.returncode != 0:
                raise EngineError(f"pip could not install {PYDEPS}: {proc.stderr.strip()[-2000:]}") from None
        if str(target) not in sys.path:
            sys.path.append(str(target))
        import gguf
        import tokenizers
    return tokenizers, gguf


def train_tokenizer(corpus: list[str], vocab_size: int) -> dict[str, Any]:
    """A byte-level BPE (GPT-2 style) tokenizer: tokens by id, merges, and the special-token ids."""
    tokenizers, _ = import_engine_deps()
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte is a token: nothing is unknown
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer)
    spec = json.loads(tok.to_str())
    vocab: dict[str, int] = spec["model"]["vocab"]
    for added in spec.get("added_tokens", []):
        vocab[added["content"]] = added["id"]
    tokens = [""] * len(vocab)
    for text, idx in vocab.items():
        tokens[idx] = text
    if any(t == "" for t in tokens):
        raise EngineError("the trained vocabulary has gaps in its ids")
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    return {"tokens": tokens, "merges": merges, "special": {t: vocab[t] for t in SPECIAL_TOKENS}}


def write_model(path: Path, params: dict[str, Any], corpus: list[str]) -> None:
    """Random Llama weights (seeded) plus the tokenizer and chat template, written with GGUFWriter."""
    import numpy as np

    _, gguf = import_engine_deps()
    tok = train_tokenizer(corpus, params["vocab_size"])
    n_vocab = len(tok["tokens"])
    n_embd, n_head, n_head_kv, n_ff = params["n_embd"], params["n_head"], params["n_head_kv"], params["n_ff"]
    head_dim = n_embd // n_head
    qtype = {
        "f32": gguf.GGMLQuantizationType.F32,
        "f16": gguf.GGMLQuantizationType.F16,
        "q8_0": gguf.GGMLQuantizationType.Q8_0,
        "q4_0": gguf.GGMLQuantizationType.Q4_0,
    }[params["dtype"]]
    rng = np.random.default_rng(params["seed"])

    def weight(rows: int, cols: int) -> np.ndarray:
        # numpy (rows, cols) is ggml ne = [cols, rows]: llama.cpp's [n_in, n_out] layout
        w = rng.standard_normal((rows, cols), dtype=np.float32) * params["init_std"]
        return gguf.quants.quantize(w, qtype)

    def add_weight(name: str, rows: int, cols: int) -> None:
        data = weight(rows, cols)
        writer.add_tensor(name, data, raw_dtype=qtype if data.dtype == np.uint8 else None)

    tmp = path.with_name(path.name + ".tmp")
    writer = gguf.GGUFWriter(str(tmp), "llama")
    writer.add_name(MODEL_NAME)
    writer.add_context_length(params["context_length"])
    writer.add_embedding_length(n_embd)
    writer.add_block_count(params["n_layer"])
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_layer_norm_rms_eps(params["rms_eps"])
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(params["rope_freq_base"])
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(
        {
            "f32": gguf.LlamaFileType.ALL_F32,
            "f16": gguf.LlamaFileType.MOSTLY_F16,
            "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
            "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
        }[params["dtype"]]
    )

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tok["tokens"])
    special_ids = set(tok["special"].values())
    writer.add_token_types(
        [gguf.TokenType.CONTROL if i in special_ids else gguf.TokenType.NORMAL for i in range(n_vocab)]
    )
    writer.add_token_merges(tok["merges"])
    writer.add_bos_token_id(tok["special"]["<|endoftext|>"])
    writer.add_eos_token_id(tok["special"]["<|im_end|>"])
    writer.add_pad_token_id(tok["special"]["<|endoftext|>"])
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML_TEMPLATE)

    norm = np.ones(n_embd, dtype=np.float32)  # norms stay f32, as llama.cpp's converter writes them
    add_weight("token_embd.weight", n_vocab, n_embd)
    for i in range(params["n_layer"]):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", norm)
        add_weight(f"blk.{i}.attn_q.weight", n_head * head_dim, n_embd)
        add_weight(f"blk.{i}.attn_k.weight", n_head_kv * head_dim, n_embd)
        add_weight(f"blk.{i}.attn_v.weight", n_head_kv * head_dim, n_embd)
        add_weight(f"blk.{i}.attn_output.weight", n_embd, n_head * head_dim)
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", norm)
        add_weight(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        add_weight(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        add_weight(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
    writer.add_tensor("output_norm.weight", norm)
    add_weight("output.weight", n_vocab, n_embd)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(path)


def model_params(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """MODEL_DEFAULTS, then $REPLAY_TINY_MODEL (a JSON object), then ``overrides``."""
    env = json.loads(os.environ.get("REPLAY_TINY_MODEL") or "{}")
    params = {**MODEL_DEFAULTS, **env, **(overrides or {})}
    unknown = set(params) - set(MODEL_DEFAULTS)
    if unknown:
        raise EngineError(f"unknown model parameters {sorted(unknown)}; known: {sorted(MODEL_DEFAULTS)}")
    return params


def ensure_model(params: dict[str, Any] | None = None) -> Path:
    """The tiny GGUF for these parameters: from the cache, or made now (seconds) and cached."""
    params = model_params(params)
    corpus = training_corpus(params["corpus_bytes"])
    path = cache_root() / "models" / f"{MODEL_NAME}-{model_key(params, corpus)}.gguf"
    if path.is_file():
        return path
    with _lock("models"):
        if path.is_file():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        write_model(path, params, corpus)
        (path.with_suffix(".json")).write_text(json.dumps({"recipe": MODEL_RECIPE, "params": params}, indent=2) + "\n")
        log(f"made {path} ({path.stat().st_size / 2**20:.1f} MiB) in {time.monotonic() - t0:.1f}s")
    return path


def server_command(
    binary: Path, model: Path, port: int, *, parallel: int = 4, ctx: int = 16384, threads: int | None = None
) -> list[str]:
    """How the tests start llama-server (``-c`` is the total KV size; each of the ``-np`` slots gets c/np)."""
    threads = threads or os.cpu_count() or 2
    return [
        str(binary),
        "-m", str(model),
        "--alias", MODEL_NAME,
        "--host", "127.0.0.1",
        "--port", str(port),
        "-np", str(parallel),
        "-c", str(ctx),
        "-t", str(threads),
        "-tb", str(threads),
        "--metrics",
        "--no-ui",
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--print-paths", action="store_true", help="print the binary and model paths (the default)")
    ap.add_argument("--json", action="store_true", help="print one JSON object with the paths and cache facts")
    ap.add_argument("--check", action="store_true", help="build nothing: exit 3 if the binary or model is missing")
    ap.add_argument("--llama-cpp-python", dest="version", default=LLAMA_CPP_PYTHON_VERSION, help="version to build")
    ap.add_argument("-j", "--jobs", type=int, help="compile jobs (default: all cores)")
    ap.add_argument("--keep-build", action="store_true", help="keep the build tree (for debugging)")
    ap.add_argument("--serve", action="store_true", help="then run llama-server in the foreground")
    ap.add_argument("--port", type=int, default=8080, help="port for --serve")
    ap.add_argument("-np", "--parallel", type=int, default=4, help="slots for --serve")
    ap.add_argument("-c", "--ctx", type=int, default=16384, help="total context for --serve")
    args = ap.parse_args(argv)

    try:
        if args.check:
            binary, model = server_binary(args.version), model_path()
            missing = [str(p) for p in (binary, model) if not p.is_file()]
            if missing:
                print("missing: " + " ".join(missing))
                return 3
        else:
            binary = ensure_server(args.version, args.jobs, args.keep_build)
            model = ensure_model()
    except EngineError as exc:
        print(f"real_engine: cannot make the engine: {exc}", file=sys.stderr)
        return 2

    if args.json:
        print(json.dumps({"binary": str(binary), "model": str(model), "model_name": MODEL_NAME,
                          "version": args.version, "cache": str(cache_root())}))  # fmt: skip
    else:
        print(f"binary {binary}")
        print(f"model  {model}")
    if args.serve:
        cmd = server_command(binary, model, args.port, parallel=args.parallel, ctx=args.ctx)
        log(" ".join(cmd))
        os.execv(cmd[0], cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
