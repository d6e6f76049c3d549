"""Talking to the sim in each API from tests, and reading its answers without the client side's code."""

from __future__ import annotations

from typing import Any

import aiohttp
from multidict import CIMultiDict

from tests.support.servers import read_sse

APIS = ("chat", "completions", "messages", "responses")
PATHS = {"chat": "chat/completions", "completions": "completions", "messages": "messages", "responses": "responses"}
SYSTEM = "You are a careful coding agent. " * 20
USER = "Fix the failing test in parser.py"


def body_for(api: str, max_tokens: int = 20, stream: bool = True, **extra: Any) -> dict[str, Any]:
    """A request of ``api`` for the same short conversation, with the usage asked for where it is optional."""
    if api == "responses":
        body: dict[str, Any] = {"model": "m", "instructions": SYSTEM, "input": USER, "max_output_tokens": max_tokens}
    elif api == "messages":
        body = {"model": "m", "system": SYSTEM, "messages": [{"role": "user", "content": USER}]}
        body["max_tokens"] = max_tokens
    elif api == "completions":
        body = {"model": "m", "prompt": SYSTEM + USER, "max_tokens": max_tokens}
    else:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
        body = {"model": "m", "messages": messages, "max_tokens": max_tokens}
    body["stream"] = stream
    if stream and api in ("chat", "completions"):
        body["stream_options"] = {"include_usage": True}
    return body | extra


async def post(
    http: aiohttp.ClientSession, base_url: str, api: str, body: dict[str, Any], **headers: str
) -> tuple[int, Any, bytes]:
    """Status, headers and whatever body bytes arrived (a connection cut mid-answer keeps what came; one cut
    before the headers answers status 0)."""
    try:
        async with http.post(f"{base_url}/{PATHS[api]}", json=body, headers=headers) as r:
            raw = b""
            try:
                async for chunk in r.content.iter_any():
                    raw += chunk
            except aiohttp.ClientPayloadError:
                pass
            return r.status, r.headers.copy(), raw
    except aiohttp.ServerDisconnectedError:
        return 0, CIMultiDict(), b""


def _token_text(api: str, d: dict[str, Any]) -> str | None:
    if api == "responses":
        kind, delta = d.get("type"), d.get("delta")
        return delta if kind in ("response.output_text.delta", "response.reasoning_text.delta") else None
    if api == "messages":
        delta = d.get("delta")
        if d.get("type") == "content_block_delta" and isinstance(delta, dict):
            return delta.get("text", delta.get("thinking"))
        return None
    if not isinstance(d.get("choices"), list) or not d["choices"]:
        return None
    choice = d["choices"][0]
    if api == "completions":
        return choice.get("text") or None
    delta = choice["delta"]
    return next((delta[k] for k in ("content", "reasoning_content", "reasoning") if delta.get(k)), None)


def token_texts(api: str, events: list[dict[str, Any]]) -> list[str]:
    """The text of every token-bearing event (reasoning and answer), in order."""
    texts = (_token_text(api, e["data"]) for e in events if isinstance(e["data"], dict))
    return [t for t in texts if isinstance(t, str)]


def reported_usage(api: str, events: list[dict[str, Any]]) -> tuple[Any, Any] | None:
    """(prompt, output) as the answer reports them, or None when it reports none."""
    datas = [e["data"] for e in events if isinstance(e["data"], dict)]
    if api == "responses":
        end = [d for d in datas if d.get("type") in ("response.completed", "response.incomplete")]
        u = end[-1]["response"]["usage"] if end else None
        return (u["input_tokens"], u["output_tokens"]) if u else None
    if api == "messages":
        start = next(d for d in datas if d.get("type") == "message_start")["message"]["usage"]
        delta = [d for d in datas if d.get("type") == "message_delta" and "usage" in d]
        if not delta:
            return None
        prompt = start["input_tokens"]
        if isinstance(prompt, int) and not isinstance(prompt, bool) and abs(prompt) < 2**63:
            prompt = prompt + start["cache_read_input_tokens"] + start["cache_creation_input_tokens"]
        return prompt, delta[-1]["usage"]["output_tokens"]
    with_usage = [d["usage"] for d in datas if d.get("usage")]
    return (with_usage[-1]["prompt_tokens"], with_usage[-1]["completion_tokens"]) if with_usage else None


def ended(api: str, events: list[dict[str, Any]]) -> bool:
    """The stream reached its normal end."""
    if not events:
        return False
    last = events[-1]["data"]
    if api == "responses":
        return isinstance(last, dict) and last.get("type") in ("response.completed", "response.incomplete")
    if api == "messages":
        return isinstance(last, dict) and last.get("type") == "message_stop"
    return last == "[DONE]" and not any(isinstance(e["data"], dict) and "error" in e["data"] for e in events)


def sse(raw: bytes) -> list[dict[str, Any]]:
    return read_sse(raw)
