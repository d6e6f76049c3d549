"""The Responses API's stateful mode: the context of recent responses, so ``previous_response_id`` works.

A response's context is its prompt (without its ``instructions``: OpenAI does not carry them over to the
next response) plus its own answer as an assistant message. The store is an LRU bounded by the tokens its
contexts hold (a conservative bound: contexts share their message objects with the ones they extend).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from replay.sim.wire.openai import piece_text

if TYPE_CHECKING:
    from replay.sim.core.engine import Seq
    from replay.sim.server.requests import SimRequest

DEFAULT_MAX_TOKENS = 32_000_000


class ResponseStore:
    """Contexts of served responses by id, least recently used first out."""

    def __init__(self, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        self.max_tokens = max_tokens
        self._items: OrderedDict[str, tuple[list[dict[str, Any]], int]] = OrderedDict()
        self.tokens = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, response_id: str) -> list[dict[str, Any]] | None:
        """The context of a response (and it becomes the most recently used), or None if not kept."""
        found = self._items.get(response_id)
        if found is None:
            return None
        self._items.move_to_end(response_id)
        return found[0]

    def clear(self) -> None:
        self._items.clear()
        self.tokens = 0

    def put(self, response_id: str, context: list[dict[str, Any]], tokens: int) -> None:
        """Keep ``context`` (``tokens`` long) under ``response_id``, evicting the least recently used."""
        old = self._items.pop(response_id, None)
        if old is not None:
            self.tokens -= old[1]
        self._items[response_id] = (context, tokens)
        self.tokens += tokens
        while self.tokens > self.max_tokens and len(self._items) > 1:
            _, (_, n) = self._items.popitem(last=False)
            self.tokens -= n
            self.evicted += 1


def prompt_messages(req: SimRequest, previous: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The chat messages the prompt is made of (None for a completions prompt). Responses: ``instructions``
    first, then the previous response's context, then the new input."""
    if req.api != "responses":
        return req.messages
    head = [{"role": "system", "content": req.instructions}] if req.instructions is not None else []
    return [*head, *(previous or []), *(req.messages or [])]


def shell(req: SimRequest) -> dict[str, Any]:
    """What a Responses API response object echoes of its request."""
    if req.api != "responses":
        return {}
    return {
        "instructions": req.instructions,
        "max_output_tokens": req.body.get("max_output_tokens"),
        "previous_response_id": req.previous_response_id,
        "reasoning": {"effort": None, "summary": None},
        "store": req.store,
        "tools": req.body.get("tools") or [],
        "user": req.body.get("user"),
    }


def keep_response(
    store: ResponseStore, req: SimRequest, previous: list[Any] | None, seq: Seq, rid: str, only: bool = False
) -> None:
    """Responses API: keep this response's context (without its instructions) for previous_response_id; ``only``:
    as the only one (a WebSocket's connection-local state holds its last response)."""
    answer = {"role": "assistant", "content": piece_text(seq.reasoning, seq.num_output - seq.reasoning)}
    context = [*(previous or []), *(req.messages or []), answer]
    if only:
        store.clear()
    store.put(f"resp_{rid}", context, seq.prompt_len + seq.num_output)
