"""OpenAI chat messages to prompt token ids, the way a chat template frames them.

Each message is ``[START, role, SEP] + content tokens + [END]`` (``MESSAGE_OVERHEAD_TOKENS`` framing
tokens) and the prompt ends with the reply priming ``[START, assistant, SEP]`` (``REPLY_PRIMING_TOKENS``),
so the prompt size is exactly what the client side estimates with ``replay.workload.tokens``:
sum over messages of (content tokens + tool-call name+arguments tokens + 4) + 3.
Framing ids lie above the text vocabulary and the role id differs per role, so equal text under
different roles never hashes alike in the prefix cache.

Contexts grow every turn, so each distinct message is tokenised once and kept in an LRU keyed by its
serialised bytes; a request re-tokenises only what is new: inline when it is short, otherwise in the one
worker thread (tiktoken releases the GIL) so the event loop keeps pacing the other streams. A completions prompt
(one text) is cut where a message's framing starts (``### ROLE`` after a blank line, as the client writes it) and
its pieces are kept the same way, so its intake costs what a chat request's does: a piece starts after a newline
and with ``#``, which tiktoken's pre-tokenizer always splits between, so the pieces' ids joined are the whole
text's ids.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import zlib
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import orjson

from replay.workload.images import describe, image_tokens
from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, Tokenizer, get_tokenizer

T = TypeVar("T")
INLINE_BYTES = 4096  # new message text up to this size is tokenised on the event loop (tens of microseconds)
_FRAME_BASE = 1 << 22  # far above any cl100k id
START, SEP, END = _FRAME_BASE, _FRAME_BASE + 1, _FRAME_BASE + 2
_ROLE_BASE = _FRAME_BASE + 16
_MESSAGE_START = re.compile(r"(?<=\n\n)(?=### [a-z_]+\n)")  # where a completions prompt's next message begins


def role_token(role: str) -> int:
    """Fixed id standing for ``role`` in the framing (stable across processes)."""
    return _ROLE_BASE + zlib.crc32(role.encode()) % (1 << 20)


def _frame_head(role: str) -> list[int]:
    return [START, role_token(role), SEP]


# The reply primer is the head of an assistant message, so the next request (which carries the answer as
# an assistant message) shares those tokens, as a real chat template does.
REPLY_PRIMING = np.array(_frame_head("assistant"), dtype=np.int32)
if len(REPLY_PRIMING) != REPLY_PRIMING_TOKENS or len(_frame_head("")) + 1 != MESSAGE_OVERHEAD_TOKENS:
    raise ImportError("sim framing no longer matches replay.workload.tokens' overhead constants; change both together")


_IMAGE_BASE = _FRAME_BASE + (1 << 21)  # image "tokens" lie apart from the text vocabulary and the framing


def image_token_ids(part: dict[str, Any]) -> list[int]:
    """Ids standing for a chat ``image_url`` part: as many as the client's estimate (``replay.workload.images``,
    the openai family, from the image's own header), drawn from the URL's digest, so the same image is the same
    ids wherever it appears (a screenshot sent again is cached) and different images differ."""
    inner = part.get("image_url")
    url, detail = (inner.get("url"), inner.get("detail")) if isinstance(inner, dict) else (inner, None)
    if not isinstance(url, str) or not url:
        raise ValueError("an image_url part needs a 'url'")
    n = image_tokens(describe({"type": "image", "url": url, **({"detail": detail} if detail else {})}))
    seed = int.from_bytes(hashlib.blake2b(url.encode(), digest_size=8).digest(), "little")
    return (np.random.default_rng(seed).integers(0, 1 << 20, n) + _IMAGE_BASE).tolist()


def count_images(messages: list[Any]) -> int:
    """Image parts in a prompt's chat messages (what the truth log calls ``images``)."""
    return sum(
        1
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for p in m["content"]
        if isinstance(p, dict) and p.get("type") == "image_url"
    )


def message_token_ids(message: Any, tokenizer: Tokenizer) -> np.ndarray:
    """Token ids of one message with its framing; ValueError if it is not a chat message."""
    if not isinstance(message, dict) or not isinstance(role := message.get("role"), str):
        raise ValueError("each message must be an object with a string 'role'")
    ids = _frame_head(role)
    content = message.get("content")
    if isinstance(content, str):
        ids += tokenizer.encode(content)
    elif isinstance(content, list):  # content parts: their texts joined, then the images, as the client counts them
        ids += tokenizer.encode(
            "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
        )
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image_url":
                ids += image_token_ids(part)
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
        # One worker, not asyncio's default pool: several tokenising threads fight the event loop for the GIL,
        # and a burst of new prompts would then hold up the loop (arrival stamps, token writes) for
        # milliseconds. Small texts are tokenised inline: the hop to a thread costs more than they do.
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sim-tokenizer")
        self._max_cached_tokens = max_cached_tokens
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()  # message bytes -> ids, LRU first
        self._cached_tokens = 0

    async def warm_up(self) -> None:
        """Start the worker thread and the tokenizer now, not while the first requests wait."""
        await self._in_worker(self._tokenizer.encode, "warm up the tokenizer")

    async def _in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._worker, fn, *args)

    async def prompt_ids(self, messages: list[Any]) -> np.ndarray:
        """int32 token ids of the whole prompt; ValueError on a malformed message."""
        keys = [orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in messages]
        return np.concatenate([*await self._pieces(keys, messages, self._encode), REPLY_PRIMING])

    async def _pieces(self, keys: list[bytes], items: list[Any],
                      encode: Callable[[list[Any]], list[np.ndarray]]) -> list[np.ndarray]:  # fmt: skip
        """The ids of each item (a message, a piece of text), from the cache, or encoded by ``encode`` (the new ones
        together: inline when they are short, else in the worker) and kept."""
        found: dict[bytes, np.ndarray] = {}
        missing: dict[bytes, Any] = {}
        for key, item in zip(keys, items, strict=True):
            if key in found or key in missing:
                continue
            ids = self._cache.get(key)
            if ids is None:
                missing[key] = item
            else:
                self._cache.move_to_end(key)
                found[key] = ids
        if missing:
            todo = list(missing.values())
            if sum(map(len, missing)) <= INLINE_BYTES:
                encoded = encode(todo)
            else:
                encoded = await self._in_worker(encode, todo)
            for key, ids in zip(missing, encoded, strict=True):
                found[key] = ids
                self._remember(key, ids)
        return [found[k] for k in keys]

    def _encode(self, messages: list[Any]) -> list[np.ndarray]:
        return [message_token_ids(m, self._tokenizer) for m in messages]

    def _encode_texts(self, texts: list[str]) -> list[np.ndarray]:
        return [np.array(self._tokenizer.encode(t), dtype=np.int32) for t in texts]

    def _remember(self, key: bytes, ids: np.ndarray) -> None:
        if key in self._cache:  # a concurrent request tokenised it meanwhile
            return
        self._cache[key] = ids
        self._cached_tokens += len(ids)
        while self._cached_tokens > self._max_cached_tokens and len(self._cache) > 1:
            self._cached_tokens -= len(self._cache.popitem(last=False)[1])

    async def text_ids(self, prompt: Any) -> np.ndarray:
        """int32 ids of a completions prompt: a string (tokenised as is, no framing) or a list of ids;
        ValueError otherwise (a list of several prompts included)."""
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
            prompt = prompt[0]
        if isinstance(prompt, str):  # its messages' pieces, each tokenised once (the module's docstring)
            pieces = _MESSAGE_START.split(prompt)
            ids = await self._pieces([b"text:" + p.encode() for p in pieces], pieces, self._encode_texts)
            return np.concatenate(ids) if len(ids) > 1 else ids[0]
        if isinstance(prompt, list) and prompt and all(isinstance(i, int) and not isinstance(i, bool) for i in prompt):
            return np.array(prompt, dtype=np.int32)
        raise ValueError("'prompt' must be one non-empty string or one non-empty list of token ids")


class WireIds:
    """Prompt ids of messages held as their chat bytes (``wire``, as the workload keeps them), each distinct message
    tokenised once by the rules above: what the server's ``PromptTokenizer`` makes of the same messages, for a caller
    in this process (the virtual clock) that has the messages themselves rather than a request's body."""

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        self._tokenizer = tokenizer or get_tokenizer()
        self._cache: dict[bytes, np.ndarray] = {}

    def prompt_ids(self, messages: Any) -> np.ndarray:
        parts = []
        for m in messages:
            ids = self._cache.get(m.wire)
            if ids is None:
                ids = self._cache[m.wire] = message_token_ids(orjson.loads(m.wire), self._tokenizer)
            parts.append(ids)
        return np.concatenate([*parts, REPLY_PRIMING])


def anthropic_to_chat(system: Any, messages: Any) -> list[dict[str, Any]]:
    """An Anthropic Messages request as chat messages, so it is counted and cached by the same rules.

    ``system`` becomes a system message; in each message, text blocks and tool results join into the
    content, ``tool_use`` blocks become tool calls (name + JSON input), thinking blocks are dropped (the
    API strips earlier thinking from the prompt). ValueError if the request is not of that shape.
    """
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    out: list[dict[str, Any]] = []
    if system is not None:
        out.append({"role": "system", "content": _anthropic_content(system)})
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise ValueError("each message must be an object with role 'user' or 'assistant'")
        content = message.get("content")
        chat: dict[str, Any] = {"role": message["role"], "content": _anthropic_content(content)}
        calls = [
            {"function": {"name": str(b.get("name", "")), "arguments": orjson.dumps(b.get("input", {})).decode()}}
            for b in (content if isinstance(content, list) else ())
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        if calls:
            chat["tool_calls"] = calls
        out.append(chat)
    return out


def _with_images(text: str, images: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A chat content: the text, or (with images) the text part then the images as ``image_url`` parts."""
    return [{"type": "text", "text": text}, *images] if images else text


def _anthropic_content(content: Any) -> str | list[dict[str, Any]]:
    images: list[dict[str, Any]] = []
    text = _anthropic_text(content, images)
    return _with_images(text, images)


def _anthropic_text(content: Any, images: list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValueError("content must be a string or a list of content blocks")
    parts = []
    for block in content:
        if not isinstance(block, dict):
            raise ValueError("each content block must be an object")
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "tool_result":
            inner = block.get("content")
            parts.append(inner if isinstance(inner, str) else _anthropic_text(inner or [], images))
        elif kind == "image":
            given = block.get("source")
            source: dict[str, Any] = given if isinstance(given, dict) else {}
            if source.get("type") == "base64":
                url = f"data:{source.get('media_type')};base64,{source.get('data')}"
            elif source.get("type") == "url" and isinstance(source.get("url"), str):
                url = source["url"]
            else:
                raise ValueError("an image block needs a base64 or url 'source'")
            images.append({"type": "image_url", "image_url": {"url": url}})
    return "".join(parts)


def responses_to_chat(items: Any) -> list[dict[str, Any]]:
    """A Responses API ``input`` as chat messages, so the same conversation counts the same in either API.

    A string is one user message. Message items keep their role and join their text parts (``input_text``,
    ``output_text``); ``function_call`` items become tool calls of the assistant message they follow (one
    chat assistant message carries its text and its calls); ``function_call_output`` items become tool
    messages; ``reasoning`` items are dropped, as earlier thinking is. ValueError naming the item otherwise.
    """
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise ValueError("'input' must be a string or a non-empty list of items")
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"input[{i}] must be an object")
        kind = item.get("type", "message")
        if kind == "message":
            if not isinstance(item.get("role"), str):
                raise ValueError(f"input[{i}]: a message needs a string 'role'")
            out.append({"role": item["role"], "content": _responses_content(item.get("content"), i)})
        elif kind == "function_call":
            name, arguments = item.get("name"), item.get("arguments")
            if not isinstance(name, str) or not isinstance(arguments, str):
                raise ValueError(f"input[{i}]: a function_call needs string 'name' and 'arguments'")
            last = out[-1] if out else None
            if last is None or last["role"] != "assistant":
                last = {"role": "assistant", "content": None}
                out.append(last)
            last.setdefault("tool_calls", []).append({"function": {"name": name, "arguments": arguments}})
        elif kind == "function_call_output":
            out.append({"role": "tool", "content": _responses_content(item.get("output"), i)})
        elif kind != "reasoning":
            raise ValueError(
                f"input[{i}]: item type {kind!r} is not one the sim serves "
                "(message, function_call, function_call_output, reasoning)"
            )
    return out


def _responses_content(content: Any, index: int) -> str | list[dict[str, Any]]:
    images = [
        {
            "type": "image_url",
            "image_url": {"url": p["image_url"], **({"detail": p["detail"]} if p.get("detail") else {})},
        }
        for p in (content if isinstance(content, list) else ())
        if isinstance(p, dict) and p.get("type") == "input_image" and isinstance(p.get("image_url"), str)
    ]
    return _with_images(_responses_text(content, index), images)


def _responses_text(content: Any, index: int) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValueError(f"input[{index}]: content must be a string or a list of parts")
    return "".join(
        p["text"]
        for p in content
        if isinstance(p, dict)
        and isinstance(p.get("text"), str)
        and p.get("type") in ("input_text", "output_text", "text")
    )
