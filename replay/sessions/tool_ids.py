"""``--history live``: the host's own answer in the context, and the recorded tool results bound to its calls.

With live history the host's answer goes into the context in place of the recorded one, tool calls included, so the
conversation is one the host could have had: every call it made is answered, every result answers a call it made,
by the id it issued. A host that checks ids (OpenAI and Anthropic within a request; the Responses API against the
response it stored, with ``--responses-state previous``) refuses anything else. So, after each live answer:

- call *i* of the live answer stands for recorded call *i*: the recorded result of that call is sent with the live
  id (``ids``), even when the live call named another tool (``renamed``): the recorded result answers it all the same.
- a recorded call the live answer has no call for (it made fewer, or none and answered in text): its recorded
  result is sent as the user's text (``<tool_result>...</tool_result>``, as ``--tool-calls text`` renders it), since
  no call of the host's is there for it to answer (``as_text``).
- a live call no recorded call stands for (it made more than the recording): it gets a stand-in result
  (``STAND_IN``), since a host refuses a call left unanswered (``unanswered``).

The recorded answer is still used where there is no live one (a failed call), with its recorded calls and results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replay import compact_json
from replay.workload.history import HistoryPolicy
from replay.workload.trajectory import Message, MessageBuilder

STAND_IN = "(replay: the recording has no result for this call)"


@dataclass(slots=True)
class Binding:
    calls: list[dict[str, Any]] | None  # the tool calls the answer carries in the context: the host's own
    ids: dict[str, str] = field(default_factory=dict)  # recorded id -> live id, for the results that follow
    as_text: set[str] = field(default_factory=set)  # recorded ids whose results go as the user's text
    unanswered: list[str] = field(default_factory=list)  # live ids that get a stand-in result
    renamed: int = 0  # live calls naming another tool than the recorded call they stand for


def _call(live: dict[str, Any], index: int) -> dict[str, Any]:
    function = live.get("function")
    fn: dict[str, Any] = function if isinstance(function, dict) else live
    return {
        "id": str(live.get("id") or f"call_live_{index}"),  # a host that sent no id: one of the client's
        "type": "function",
        "function": {"name": str(fn.get("name") or ""), "arguments": str(fn.get("arguments") or "")},
    }


def bind(recorded: list[dict[str, Any]] | None, live: list[dict[str, Any]] | None) -> Binding:
    """How the live answer's calls and the recorded results meet (see the module)."""
    recorded, calls = recorded or [], [_call(c, i) for i, c in enumerate(live or [])]
    out = Binding(calls=calls or None)
    for i, rec in enumerate(recorded):
        rec_id = str(rec.get("id") or "")
        if i < len(calls):
            out.ids[rec_id] = calls[i]["id"]
            out.renamed += calls[i]["function"]["name"] != (rec.get("function") or {}).get("name")
        else:
            out.as_text.add(rec_id)
    out.unanswered = [c["id"] for c in calls[len(recorded) :]]
    return out


def rebound(message: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """A recorded tool result with the live id of the call it answers (the message itself otherwise)."""
    old = str(message.get("tool_call_id"))
    if message.get("role") != "tool" or ids.get(old, old) == old:
        return message
    return {**message, "tool_call_id": ids[old]}


def bound_messages(append: list[Message], b: Binding, builder: MessageBuilder) -> list[Message]:
    """The next turn's messages answering the live answer's calls (``tool_ids``): recorded results with the live
    ids (same tokens: ids are not counted, so only their bytes change), results no live call stands for as the
    user's text, and a stand-in result for each live call the recording has none for, after the results."""
    out: list[Message] = []
    for m in append:
        if m.role != "tool":
            out.append(m)
            continue
        raw = m.raw
        if str(raw.get("tool_call_id")) in b.as_text:
            out.append(builder.message(HistoryPolicy(tool_calls="text").render(raw)))
        else:
            new = rebound(raw, b.ids)
            out.append(m if new is raw else Message(compact_json.dumps(new), m.tokens, role="tool"))
    at = max((i + 1 for i, m in enumerate(out) if m.role == "tool"), default=0)
    extra = [builder.message({"role": "tool", "tool_call_id": i, "content": STAND_IN}) for i in b.unanswered]
    return out[:at] + extra + out[at:]
