"""A local Hugging Face tokenizer directory for the peer benchmark, built offline in seconds.

The peers (vLLM's ``bench serve``, aiperf, inference-perf) each load a tokenizer to make prompts of a given
length and to count tokens, and none can reach a model hub here. This trains a small byte-level BPE on the
project's own text (README and docs) with the ``tokenizers`` package and saves what ``AutoTokenizer``
needs: ``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json`` and a ``config.json``.
It checks that the stub's answer word is one token, so a peer counting the answer text gets the stub's count.

Run with a Python that has ``tokenizers`` (any of the peers' virtualenvs):

    python scripts/peer_tokenizer.py OUT_DIR [--text FILE ...] [--vocab 4096]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORD = " the"  # the stub's answer word (scripts/peer_stub.py)
EOS = "<|endoftext|>"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def default_texts() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def build(out: Path, texts: list[Path], vocab: int) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train([str(p) for p in texts if p.exists()], trainer)
    n = len(tok.encode(WORD * 500).ids)
    if n != 500:
        raise SystemExit(f"the answer word {WORD!r} x 500 is {n} tokens with this tokenizer, not 500")
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    special = {"bos_token": EOS, "eos_token": EOS, "unk_token": EOS}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 1_000_000,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
        **special,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=1))
    model = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": tok.get_vocab_size()}
    (out / "config.json").write_text(json.dumps(model | {"eos_token_id": 0, "bos_token_id": 0}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--text", type=Path, action="append", help="training text (default: README and docs)")
    ap.add_argument("--vocab", type=int, default=4096)
    args = ap.parse_args()
    build(args.out, args.text or default_texts(), args.vocab)
    print(f"tokenizer in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
