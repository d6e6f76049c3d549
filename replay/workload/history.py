"""History policy: how a replayed conversation is rendered for the host.

- ``output``: ``recorded`` appends the recorded answer after each call (default: every request's prefix is
  exactly what the recorded agent sent) or ``live`` appends the host's own answer, its tool calls included; the
  recorded tool results that follow are bound to those calls' ids (``replay.sessions.tool_ids``: a result no live
  call stands for goes as the user's text, a live call no result answers gets a stand-in result).
- ``reasoning``: ``strip`` sends no earlier reasoning (default, as most APIs expect) or ``keep`` sends it back
  as ``reasoning_content`` on the assistant message (recorded, or live with ``output=live``).
- ``tool_calls``: ``native`` sends ``tools``, ``tool_calls`` and ``tool`` messages; ``text`` flattens them into
  plain text for hosts that reject one or the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

CHOICES = {"output": ("recorded", "live"), "reasoning": ("strip", "keep"), "tool_calls": ("native", "text")}


@dataclass(frozen=True, slots=True)
class HistoryPolicy:
    output: str = "recorded"
    reasoning: str = "strip"
    tool_calls: str = "native"

    def __post_init__(self) -> None:
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"history {name} {getattr(self, name)!r}: expected one of {', '.join(allowed)}")

    def public(self) -> dict[str, str]:
        return {"output": self.output, "reasoning": self.reasoning, "tool_calls": self.tool_calls}

    def render(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A message as it goes on the wire under this policy."""
        if self.tool_calls == "native":
            return msg
        if msg.get("tool_calls"):
            calls = "\n".join(
                "<tool_call>"
                + orjson.dumps(
                    {"name": c["function"]["name"], "arguments": c["function"].get("arguments", "")}
                ).decode()
                + "</tool_call>"
                for c in msg["tool_calls"]
            )
            text = msg.get("content") or ""
            flat = {k: v for k, v in msg.items() if k != "tool_calls"}
            flat["content"] = f"{text}\n{calls}" if text else calls
            return flat
        if msg.get("role") == "tool":
            text = f"<tool_result>\n{content_text(msg.get('content'))}\n</tool_result>"
            content = msg.get("content")
            images = (
                [p for p in content if isinstance(p, dict) and p.get("type") == "image"]
                if isinstance(content, list)
                else []
            )
            return {"role": "user", "content": [{"type": "text", "text": text}, *images] if images else text}
        return msg

    def output_message(self, output: dict[str, Any]) -> dict[str, Any]:
        """The assistant message an answer becomes in the context."""
        msg: dict[str, Any] = {"role": "assistant", "content": output.get("content") or None}
        if self.reasoning == "keep" and output.get("reasoning"):
            msg["reasoning_content"] = output["reasoning"]
        if output.get("tool_calls"):
            msg["tool_calls"] = output["tool_calls"]
        elif msg["content"] is None:
            msg["content"] = ""
        return self.render(msg)


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or the string texts of a list of parts, joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""
