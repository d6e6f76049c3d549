"""OpenAI chat messages to prompt token ids, the way a chat template frames them.

Each message is ``[START, role, SEP] + content tokens + [END]`` (``MESSAGE_OVERHEAD_TOKENS`` framing
tokens) and the prompt ends with the reply priming ``[START, assistant, SEP]`` (``REPLY_PRIMING_TOKENS``),
so the prompt size is exactly what the client side estimates with ``replay.tokens``:
sum over messages of (content tokens + tool-call name+arguments tokens + 4) + 3.
Framing ids lie above the text vocabulary and the role id differs per role, so equal text under
different roles never hashes alike in the prefix cache.

Contexts grow every turn, so each distinct message is tokenised once and kept in an LRU keyed by its
serialised bytes; a request re-tokenises only what is new, in a worker thread (tiktoken releases the
GIL) so the event loop keeps pacing the other streams.
"""

from __future__ import annotations

import asyncio
import zlib
from collections import OrderedDict
from typing import Any

import numpy as np
import orjson

from replay.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, Tokenizer, get_tokenizer

_FRAME_BASE = 1 << 22  # far above any cl100k id
START, SEP, END = _FRAME_BASE, _FRAME_BASE + 1, _FRAME_BASE + 2
_ROLE_BASE = _FRAME_BASE + 16


def role_token(role: str) -> int:
    """Fixed id standing for ``role`` in the framing (stable across processes)."""
    return _ROLE_BASE + zlib.crc32(role.encode()) % (1 << 20)


def _frame_head(role: str) -> list[int]:
    return [START, role_token(role), SEP]


# The reply primer is the head of an assistant message, so the next request (which carries the answer as
# an assistant message) shares those tokens, as a real chat template does.
REPLY_PRIMING = np.array(_frame_head("assistant"), dtype=np.int32)
if len(REPLY_PRIMING) != REPLY_PRIMING_TOKENS or len(_frame_head("")) + 1 != MESSAGE_OVERHEAD_TOKENS:
    raise ImportError("sim framing no longer matches replay.tokens' overhead constants; change both together")


def message_token_ids(message: Any, tokenizer: Tokenizer) -> np.ndarray:
    """Token ids of one message with its framing; ValueError if it is not a chat message."""
    if not isinstance(message, dict) or not isinstance(role := message.get("role"), str):
        raise ValueError("each message must be an object with a string 'role'")
    ids = _frame_head(role)
    content = message.get("content")
    if isinstance(content, str):
        ids += tokenizer.encode(content)
    elif isinstance(content, list):  # content parts: their texts joined, as the client side counts them
        ids += tokenizer.encode(
            "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
        )
    elif content is not None:
        raise ValueError(f"message content must be a string, a list of parts or null, not {type(content).__name__}")
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise ValueError("each tool call must have a 'function' object")
        name, arguments = function.get("name") or "", function.get("arguments") or ""
        if not isinstance(name, str) or not isinstance(arguments, str):
            raise ValueError("tool call 'name' and 'arguments' must be strings")
        ids += tokenizer.encode(name + arguments)
    ids.append(END)
    return np.array(ids, dtype=np.int32)


class PromptTokenizer:
    """Builds prompt token ids from messages, tokenising each distinct message once."""

    def __init__(self, tokenizer: Tokenizer | None = None, max_cached_tokens: int = 16_000_000) -> None:
        self._tokenizer = tokenizer or get_tokenizer()
        self._max_cached_tokens = max_cached_tokens
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()  # message bytes -> ids, LRU first
        self._cached_tokens = 0

    async def prompt_ids(self, messages: list[Any]) -> np.ndarray:
        """int32 token ids of the whole prompt; ValueError on a malformed message."""
        keys = [orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in messages]
        found: dict[bytes, np.ndarray] = {}
        missing: dict[bytes, Any] = {}
        for key, message in zip(keys, messages, strict=True):
            if key in found or key in missing:
                continue
            ids = self._cache.get(key)
            if ids is None:
                missing[key] = message
            else:
                self._cache.move_to_end(key)
                found[key] = ids
        if missing:
            encoded = await asyncio.to_thread(self._encode, list(missing.values()))
            for key, ids in zip(missing, encoded, strict=True):
                found[key] = ids
                self._remember(key, ids)
        return np.concatenate([found[k] for k in keys] + [REPLY_PRIMING])

    def _encode(self, messages: list[Any]) -> list[np.ndarray]:
        return [message_token_ids(m, self._tokenizer) for m in messages]

    def _remember(self, key: bytes, ids: np.ndarray) -> None:
        if key in self._cache:  # a concurrent request tokenised it meanwhile
            return
        self._cache[key] = ids
        self._cached_tokens += len(ids)
        while self._cached_tokens > self._max_cached_tokens and len(self._cache) > 1:
            self._cached_tokens -= len(self._cache.popitem(last=False)[1])
