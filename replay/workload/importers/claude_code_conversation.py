"""One Claude Code conversation read in file order into its calls (docs/importers.md, claude_code.py).

Per model response (its ``assistant`` lines share ``message.id``) the assistant message and a call whose input is
the context so far; the ``tool_result`` blocks of the following ``user`` lines as ``tool`` messages; a
``compact_boundary`` starts a fresh context. Latency, tool time and the conversation's span come from the lines'
timestamps; the tool_use ids that started subagents are kept with their prompts and the agentIds they name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from replay.workload.importers._common import (
    Call,
    Src,
    assistant_message,
    content_text,
    make_output,
    member,
    message_content,
    parse_time,
    seconds_between,
    unix_seconds,
    usage_figures,
)

SPAWN_TOOLS = ("Task", "Agent")


@dataclass
class Conversation:
    """A parsed conversation: its calls, and for each call the tool_use ids it emitted."""

    calls: list[Call] = field(default_factory=list)
    tool_ids: list[list[str]] = field(default_factory=list)
    prompts: dict[str, str] = field(default_factory=dict)  # tool_use id → prompt, for spawn tools
    first_prompt: str | None = None
    span_s: float | None = None
    models: set[str] = field(default_factory=set)
    agent_links: dict[str, str] = field(default_factory=dict)  # tool_use id → agentId


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b if isinstance(b, dict) else {"type": "text", "text": str(b)} for b in content]
    return []


def read_conversation(lines: list[tuple[int, dict[str, Any]]], src: Src) -> Conversation:
    conv = Conversation()
    context: list[dict[str, Any]] = []
    pending: dict[str, Any] | None = None  # assistant response being assembled
    last_user_ts = None
    first_ts = last_ts = None

    def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        p, pending = pending, None
        output = make_output("".join(p["text"]), p["calls"], "\n".join(p["thinking"]) or None)
        if p["synthetic"]:
            context.append(assistant_message(output))
            return
        rec = usage_figures(p["usage"])
        if p["model"]:
            rec["model"] = p["model"]
            conv.models.add(p["model"])
        lat = seconds_between(last_user_ts, p["ts"])
        if lat is not None:
            rec["latency_s"] = round(max(0.0, lat), 6)
        start = unix_seconds(last_user_ts)
        if start is not None:
            rec["timestamp"] = start
        rec["_ts"] = p["ts"]
        conv.calls.append(
            Call(input=list(context), output=output, output_tokens=rec.get("output_tokens"), recorded=rec)
        )
        conv.tool_ids.append([c["id"] for c in p["calls"]])
        context.append(assistant_message(output))

    for lineno, ev in lines:
        s = src.at(lineno)
        kind = ev.get("type")
        ts = parse_time(ev.get("timestamp"))
        if kind in ("user", "assistant") and ts is not None:
            first_ts = first_ts if first_ts is not None else ts
            last_ts = ts
        data = member(ev, "data")
        if kind == "progress" and data.get("type") == "agent_progress" and data.get("agentId"):
            for key in (
                ev.get("parentToolUseID"),
                ev.get("toolUseID"),
                data.get("toolUseID"),
                data.get("parentToolUseID"),
            ):
                if isinstance(key, str):
                    conv.agent_links.setdefault(key, str(data["agentId"]))
            continue
        if kind == "system" and ev.get("subtype") == "compact_boundary":
            flush()
            context.clear()
            continue
        if kind not in ("user", "assistant"):
            continue
        msg = s.get(ev, "message", dict, "$", "a message object")
        if kind == "assistant":
            mid = msg.get("id")
            if pending is not None and (mid is None or mid != pending["id"]):
                flush()
            if pending is None:
                pending = {
                    "id": mid,
                    "text": [],
                    "calls": [],
                    "thinking": [],
                    "usage": None,
                    "model": None,
                    "synthetic": False,
                }
            model = msg.get("model")
            pending["model"] = model if model != "<synthetic>" else pending["model"]
            pending["synthetic"] = model == "<synthetic>"
            pending["usage"] = msg.get("usage") or pending["usage"]
            pending["ts"] = ts
            for j, b in enumerate(_blocks(msg.get("content"))):
                t = b.get("type")
                if t == "text":
                    pending["text"].append(str(b.get("text", "")))
                elif t == "thinking":
                    pending["thinking"].append(str(b.get("thinking", "")))
                elif t == "tool_use":
                    if not isinstance(b.get("name"), str):
                        raise s.fail(f"$.message.content[{j}].name", "expected the tool name (a string)")
                    call_id = str(b.get("id") or f"toolu_{lineno}_{j}")
                    args = orjson.dumps(b.get("input", {})).decode()
                    pending["calls"].append(
                        {"id": call_id, "type": "function", "function": {"name": b["name"], "arguments": args}}
                    )
                    inp = member(b, "input")
                    if b["name"] in SPAWN_TOOLS or "subagent_type" in inp:
                        conv.prompts[call_id] = str(inp.get("prompt", ""))
            continue
        # user line
        flush()
        said: list[dict[str, Any]] = []  # the text and image blocks the user wrote
        for j, b in enumerate(_blocks(msg.get("content"))):
            t = b.get("type")
            if t == "tool_result":
                if not b.get("tool_use_id"):
                    raise s.fail(f"$.message.content[{j}].tool_use_id", "missing; expected the id of the tool_use")
                inner = b.get("content")
                context.append(
                    {"role": "tool", "tool_call_id": str(b["tool_use_id"]), "content": message_content(inner)}
                )
            elif t in ("text", "image"):
                said.append(b)
        if said:
            context.append({"role": "user", "content": message_content(said)})
            if conv.first_prompt is None:
                conv.first_prompt = content_text(said)
        result = ev.get("toolUseResult")
        if isinstance(result, dict) and result.get("agentId"):
            for b in _blocks(msg.get("content")):
                if b.get("type") == "tool_result" and b.get("tool_use_id"):
                    conv.agent_links.setdefault(str(b["tool_use_id"]), str(result["agentId"]))
        if ts is not None:
            last_user_ts = ts
            if conv.calls:
                dt = seconds_between(conv.calls[-1].recorded.get("_ts"), ts)
                if dt is not None:
                    conv.calls[-1].tool_time_s = max(0.0, dt)
    flush()
    for c in conv.calls:
        c.recorded.pop("_ts", None)
        if c.tool_time_s is None:
            c.tool_time_s = 0.0
    conv.span_s = seconds_between(first_ts, last_ts)
    return conv
