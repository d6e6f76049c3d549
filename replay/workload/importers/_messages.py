"""Messages and outputs normalised to the canonical format, for the importers.

A message content as text (``content_text``) or with its images (``message_content``); OpenAI-shaped tool calls; the
canonical ``output`` and the assistant message it becomes in the context (exactly as the loader builds it); token
counts as the loader makes them (``output_token_count``, ``prompt_estimates``); the recorded figures of a usage
object (``usage_figures``).
"""

from __future__ import annotations

from typing import Any

import orjson

from replay.workload.images import PLACEHOLDER, from_wire
from replay.workload.importers._source import Src, describe
from replay.workload.messages import message_tokens, output_as_message
from replay.workload.tokens import REPLY_PRIMING_TOKENS, count_tokens, get_tokenizer


def content_text(content: Any) -> str:
    """A message content as plain text: strings as they are, lists of parts joined (text parts only)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    out.append(part["text"])
                elif isinstance(part.get("content"), (str, list)):
                    out.append(content_text(part["content"]))
                elif part.get("type") in ("image", "image_url", "input_image"):
                    out.append("[image]")
        return "".join(out)
    return str(content)


def message_content(content: Any) -> str | list[dict[str, Any]]:
    """A message content as the canonical format keeps it: the plain text (``content_text``) when it has no image,
    else (or when it holds an image's placeholder text) a list of text and canonical image parts in their order
    (``replay.workload.images``: the API's image part of any flavour, an Anthropic or OTel one included, becomes
    ``{"type": "image", "url": ...}``)."""
    if not isinstance(content, list) or not any(_image_of(p) is not None or _placeholder(p) for p in content):
        return content_text(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        image = _image_of(part)
        if image is not None:
            parts.append(image)
            continue
        text = content_text([part])
        if text:  # each text part stays a part: a screenshot's placeholder keeps its place (images.window)
            parts.append({"type": "text", "text": text})
    return parts


def _placeholder(part: Any) -> bool:
    """The text a computer-use agent left where it dropped a screenshot: kept as a part of its own, in its place."""
    return isinstance(part, dict) and part.get("type") == "text" and str(part.get("text", "")).strip() == PLACEHOLDER


def _image_of(part: Any) -> dict[str, Any] | None:
    image = from_wire(part)
    if image is None and isinstance(part, dict) and part.get("type") == "image" and isinstance(part.get("url"), str):
        image = part  # already canonical
    return image


def tool_calls(calls: Any, src: Src, jpath: str) -> list[dict[str, Any]]:
    """OpenAI-shaped tool calls (id, type, function name/arguments as a JSON string), extra keys dropped."""
    src.expect(calls, list, jpath, "a list of tool calls")
    out = []
    for i, call in enumerate(calls):
        src.expect(call, dict, f"{jpath}[{i}]", "a tool call object")
        fn = call.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise src.fail(f"{jpath}[{i}].function.name", f"expected a string; got {describe(fn)}")
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = orjson.dumps(args).decode()
        out.append(
            {
                "id": str(call.get("id") or f"call_{i}"),
                "type": "function",
                "function": {"name": fn["name"], "arguments": args},
            }
        )
    return out


def make_output(content: Any, calls: list[dict[str, Any]] | None = None, reasoning: str | None = None) -> dict:
    """A canonical ``output`` object."""
    out: dict[str, Any] = {"content": content_text(content)}
    if reasoning:
        out["reasoning"] = reasoning
    if calls:
        out["tool_calls"] = calls
    return out


def assistant_message(output: dict[str, Any]) -> dict[str, Any]:
    """The assistant message an output becomes in the context, exactly as the loader builds it."""
    return output_as_message(output)


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": message_content(content)}


def system(content: Any) -> dict[str, Any]:
    return {"role": "system", "content": content_text(content)}


def tool_result(call_id: str | None, content: Any) -> dict[str, Any]:
    """A tool message when the source used native tool calls (an id), else a user message."""
    if call_id:
        return {"role": "tool", "tool_call_id": call_id, "content": message_content(content)}
    return user(content)


def output_token_count(output: dict[str, Any]) -> int:
    """cl100k count of an output (content, reasoning, tool calls), at least 1."""
    tok = get_tokenizer()
    n = count_tokens(output.get("content") or "", tok) + count_tokens(output.get("reasoning") or "", tok)
    for call in output.get("tool_calls") or ():
        fn = call["function"]
        n += count_tokens(fn["name"] + fn["arguments"], tok)
    return max(1, n)


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """The loader's estimate of a request's prompt tokens (for checks and block-trace fitting)."""
    tok = get_tokenizer()
    return sum(message_tokens(m, tok) for m in messages) + REPLY_PRIMING_TOKENS


def prompt_estimates(inputs: list[list[dict[str, Any]]]) -> list[int]:
    """The loader's prompt estimate of each input, counting each message object once (inputs share them)."""
    tok = get_tokenizer()
    counted: dict[int, int] = {}
    out = []
    for messages in inputs:
        total = REPLY_PRIMING_TOKENS
        for m in messages:
            n = counted.get(id(m))
            if n is None:
                n = counted[id(m)] = message_tokens(m, tok)
            total += n
        out.append(total)
    return out


def usage_figures(usage: Any) -> dict[str, Any]:
    """Recorded figures from an OpenAI- or Anthropic-style usage object (keys of docs/trajectory-format.md)."""
    if not isinstance(usage, dict):
        return {}
    rec: dict[str, Any] = {}
    if "input_tokens" in usage and "prompt_tokens" not in usage:  # Anthropic: input is the uncached part
        read = int(usage.get("cache_read_input_tokens") or 0)
        created = int(usage.get("cache_creation_input_tokens") or 0)
        rec["prompt_tokens"] = int(usage.get("input_tokens") or 0) + read + created
        rec["cached_tokens"] = read
        rec["cache_creation_tokens"] = created
        if usage.get("output_tokens") is not None:
            rec["output_tokens"] = int(usage["output_tokens"])
        return rec
    if usage.get("prompt_tokens") is not None:
        rec["prompt_tokens"] = int(usage["prompt_tokens"])
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is None:
        cached = usage.get("cache_read_input_tokens", usage.get("cache_read_tokens"))
    if cached is not None:
        rec["cached_tokens"] = int(cached)
    written = usage.get("cache_creation_input_tokens", usage.get("cache_write_tokens"))
    if written:
        rec["cache_creation_tokens"] = int(written)
    if usage.get("completion_tokens") is not None:
        rec["output_tokens"] = int(usage["completion_tokens"])
    cdetails = usage.get("completion_tokens_details") or {}
    if isinstance(cdetails, dict) and cdetails.get("reasoning_tokens") is not None:
        rec["reasoning_tokens"] = int(cdetails["reasoning_tokens"])
    return rec
