"""One Claude Code conversation read in file order into its calls (docs/importers.md, claude_code.py).

Per model response (its ``assistant`` lines share ``message.id``) the assistant message and a call whose input is
the context so far; the ``tool_result`` blocks of the following ``user`` lines as ``tool`` messages; a
``compact_boundary`` starts a fresh context. Latency, tool time and the conversation's span come from the lines'
timestamps; the tool_use ids that started subagents are kept with their prompts and the agentIds they name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from replay.workload.importers._delta import Call
from replay.workload.importers._messages import (
    assistant_message,
    content_text,
    make_output,
    message_content,
    usage_figures,
)
from replay.workload.importers._source import Src, member, parse_time, seconds_between, unix_seconds

SPAWN_TOOLS = ("Task", "Agent")
Stamp = datetime | float | None  # a line's time, as parse_time reads it


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


@dataclass
class _Response:
    """One model response being assembled: its assistant lines share ``message.id``."""

    id: Any
    text: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    usage: Any = None
    model: Any = None
    synthetic: bool = False
    ts: Stamp = None


class _Parser:
    """Reads one conversation's lines in file order: the context so far, the response being assembled, and the
    timestamps that give each call its latency and tool time."""

    def __init__(self, src: Src) -> None:
        self.src = src
        self.conv = Conversation()
        self.context: list[dict[str, Any]] = []
        self.pending: _Response | None = None
        self.last_user_ts: Stamp = None
        self.first_ts: Stamp = None
        self.last_ts: Stamp = None

    def parse(self, lines: list[tuple[int, dict[str, Any]]]) -> Conversation:
        for lineno, ev in lines:
            self._line(lineno, ev)
        self._flush()
        for c in self.conv.calls:
            c.recorded.pop("_ts", None)
            if c.tool_time_s is None:
                c.tool_time_s = 0.0
        self.conv.span_s = seconds_between(self.first_ts, self.last_ts)
        return self.conv

    def _line(self, lineno: int, ev: dict[str, Any]) -> None:
        s = self.src.at(lineno)
        kind = ev.get("type")
        ts = parse_time(ev.get("timestamp"))
        if kind in ("user", "assistant") and ts is not None:
            self.first_ts = self.first_ts if self.first_ts is not None else ts
            self.last_ts = ts
        data = member(ev, "data")
        if kind == "progress" and data.get("type") == "agent_progress" and data.get("agentId"):
            self._agent_progress(ev, data)
            return
        if kind == "system" and ev.get("subtype") == "compact_boundary":
            self._flush()
            self.context.clear()
            return
        if kind not in ("user", "assistant"):
            return
        msg = s.get(ev, "message", dict, "$", "a message object")
        if kind == "assistant":
            self._assistant(s, lineno, msg, ts)
        else:
            self._user(s, ev, msg, ts)

    def _agent_progress(self, ev: dict[str, Any], data: dict[str, Any]) -> None:
        """An ``agent_progress`` event ties the tool_use that started a subagent to its agentId."""
        for key in (
            ev.get("parentToolUseID"),
            ev.get("toolUseID"),
            data.get("toolUseID"),
            data.get("parentToolUseID"),
        ):
            if isinstance(key, str):
                self.conv.agent_links.setdefault(key, str(data["agentId"]))

    def _flush(self) -> None:
        """The response assembled so far becomes a call (a ``<synthetic>`` one only joins the context)."""
        if self.pending is None:
            return
        p, self.pending = self.pending, None
        output = make_output("".join(p.text), p.calls, "\n".join(p.thinking) or None)
        if p.synthetic:
            self.context.append(assistant_message(output))
            return
        rec = usage_figures(p.usage)
        if p.model:
            rec["model"] = p.model
            self.conv.models.add(p.model)
        lat = seconds_between(self.last_user_ts, p.ts)
        if lat is not None:
            rec["latency_s"] = round(max(0.0, lat), 6)
        start = unix_seconds(self.last_user_ts)
        if start is not None:
            rec["timestamp"] = start
        rec["_ts"] = p.ts
        self.conv.calls.append(
            Call(input=list(self.context), output=output, output_tokens=rec.get("output_tokens"), recorded=rec)
        )
        self.conv.tool_ids.append([c["id"] for c in p.calls])
        self.context.append(assistant_message(output))

    def _assistant(self, s: Src, lineno: int, msg: dict[str, Any], ts: Stamp) -> None:
        mid = msg.get("id")
        if self.pending is not None and (mid is None or mid != self.pending.id):
            self._flush()
        if self.pending is None:
            self.pending = _Response(id=mid)
        p = self.pending
        model = msg.get("model")
        p.model = model if model != "<synthetic>" else p.model
        p.synthetic = model == "<synthetic>"
        p.usage = msg.get("usage") or p.usage
        p.ts = ts
        for j, b in enumerate(_blocks(msg.get("content"))):
            t = b.get("type")
            if t == "text":
                p.text.append(str(b.get("text", "")))
            elif t == "thinking":
                p.thinking.append(str(b.get("thinking", "")))
            elif t == "tool_use":
                self._tool_use(s, lineno, j, b, p)

    def _tool_use(self, s: Src, lineno: int, j: int, b: dict[str, Any], p: _Response) -> None:
        if not isinstance(b.get("name"), str):
            raise s.fail(f"$.message.content[{j}].name", "expected the tool name (a string)")
        call_id = str(b.get("id") or f"toolu_{lineno}_{j}")
        args = orjson.dumps(b.get("input", {})).decode()
        p.calls.append({"id": call_id, "type": "function", "function": {"name": b["name"], "arguments": args}})
        inp = member(b, "input")
        if b["name"] in SPAWN_TOOLS or "subagent_type" in inp:
            self.conv.prompts[call_id] = str(inp.get("prompt", ""))

    def _user(self, s: Src, ev: dict[str, Any], msg: dict[str, Any], ts: Stamp) -> None:
        self._flush()
        said: list[dict[str, Any]] = []  # the text and image blocks the user wrote
        for j, b in enumerate(_blocks(msg.get("content"))):
            t = b.get("type")
            if t == "tool_result":
                if not b.get("tool_use_id"):
                    raise s.fail(f"$.message.content[{j}].tool_use_id", "missing; expected the id of the tool_use")
                inner = b.get("content")
                self.context.append(
                    {"role": "tool", "tool_call_id": str(b["tool_use_id"]), "content": message_content(inner)}
                )
            elif t in ("text", "image"):
                said.append(b)
        if said:
            self.context.append({"role": "user", "content": message_content(said)})
            if self.conv.first_prompt is None:
                self.conv.first_prompt = content_text(said)
        result = ev.get("toolUseResult")
        if isinstance(result, dict) and result.get("agentId"):
            for b in _blocks(msg.get("content")):
                if b.get("type") == "tool_result" and b.get("tool_use_id"):
                    self.conv.agent_links.setdefault(str(b["tool_use_id"]), str(result["agentId"]))
        if ts is not None:
            self.last_user_ts = ts
            calls = self.conv.calls
            if calls:
                dt = seconds_between(calls[-1].recorded.get("_ts"), ts)
                if dt is not None:
                    calls[-1].tool_time_s = max(0.0, dt)


def read_conversation(lines: list[tuple[int, dict[str, Any]]], src: Src) -> Conversation:
    return _Parser(src).parse(lines)
