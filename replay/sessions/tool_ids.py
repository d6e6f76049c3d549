"""``--history live``: the recorded tool results, bound to the tool calls of the host's own answer.

With live history the host's answer goes into the context in place of the recorded one. The tool results that
follow in the recording answer the recorded calls, by their ids; a host that checks ids (every tool result must
answer a call of the assistant message before it) refuses them unless they are bound to the ids it issued. So:

- the live answer made calls and the recording did too: call *i* of the live answer stands for recorded call *i*;
  its result is sent with the live id (``ids``). The live call is sent as the host made it, its name and arguments
  included, even when it named another tool (``renamed``): the recorded result answers it all the same.
- the live answer made fewer calls than the recording: the recorded calls left over stay in the assistant
  message, with their recorded ids, so every recorded result still answers a call.
- the live answer made more calls: those no recorded result answers are not sent back (``dropped``): a host
  would refuse a call left unanswered.
- the live answer made none (it answered in text): the recorded calls stay, as before live binding existed, so
  the recorded results still answer them (``kept``).
- the recording made none: the live calls are not sent back (nothing answers them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Binding:
    calls: list[dict[str, Any]] | None  # the tool calls the answer carries in the context
    ids: dict[str, str] = field(default_factory=dict)  # recorded id -> live id, for the results that follow
    bound: int = 0  # recorded results bound to a live call
    kept: int = 0  # recorded calls kept because the live answer had none for them
    dropped: int = 0  # live calls no recorded result answers
    renamed: int = 0  # live calls naming another tool than the recorded call they stand for


def _call(live: dict[str, Any], fallback_id: str) -> dict[str, Any]:
    function = live.get("function")
    fn: dict[str, Any] = function if isinstance(function, dict) else live
    return {
        "id": str(live.get("id") or fallback_id),
        "type": "function",
        "function": {"name": str(fn.get("name") or ""), "arguments": str(fn.get("arguments") or "")},
    }


def bind(recorded: list[dict[str, Any]] | None, live: list[dict[str, Any]] | None) -> Binding:
    """The calls the live answer carries into the context, and the ids its recorded results are sent with."""
    recorded, live = recorded or [], live or []
    if not recorded:
        return Binding(calls=None, dropped=len(live))
    if not live:
        return Binding(calls=recorded, kept=len(recorded))
    out = Binding(calls=[])
    assert out.calls is not None
    for i, rec in enumerate(recorded):
        if i >= len(live):
            out.calls.append(rec)
            out.kept += 1
            continue
        call = _call(live[i], str(rec.get("id") or f"call_{i}"))
        out.calls.append(call)
        out.bound += 1
        if rec.get("id") and call["id"] != rec["id"]:
            out.ids[str(rec["id"])] = call["id"]
        if call["function"]["name"] != (rec.get("function") or {}).get("name"):
            out.renamed += 1
    out.dropped = max(0, len(live) - len(recorded))
    return out


def rebound(message: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """A recorded tool result with the live id of the call it answers (itself when that call kept its id)."""
    if message.get("role") != "tool" or str(message.get("tool_call_id")) not in ids:
        return message
    return {**message, "tool_call_id": ids[str(message["tool_call_id"])]}
