"""OTel GenAI messages (lists of typed parts) as canonical messages: see ``otel`` and docs/importers.md."""

from __future__ import annotations

import contextlib
from typing import Any

import orjson

from replay.workload import images
from replay.workload.importers._messages import make_output
from replay.workload.importers._source import Src
from replay.workload.importers.openai_log import chat_message


def structured(value: Any, src: Src, where: str, key: str) -> Any:
    """An attribute recorded structured or as a JSON string (both allowed on spans)."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            raise src.fail(f"{where} {key}", "expected JSON (a list of messages or parts)") from None
    return value


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value if value is not None else {}).decode()


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


class Converter:
    """OTel GenAI messages → canonical messages; counts the parts that cannot be sent again."""

    def __init__(self, src: Src) -> None:
        self.src = src
        self.dropped: dict[str, int] = {}

    def _drop(self, kind: str) -> None:
        self.dropped[kind] = self.dropped.get(kind, 0) + 1

    def messages(self, raw: Any, where: str) -> list[dict[str, Any]]:
        self.src.expect(raw, list, where, "a list of GenAI messages")
        out: list[dict[str, Any]] = []
        for i, m in enumerate(raw):
            jp = f"{where}[{i}]"
            self.src.expect(m, dict, jp, "a message object with 'role' and 'parts'")
            if "parts" not in m and "content" in m:  # the OpenAI chat shape
                out.append(chat_message(m, self.src, jp))
                continue
            out.extend(self.message(m, jp))
        return out

    def message(self, m: dict[str, Any], jp: str) -> list[dict[str, Any]]:
        role = m.get("role")
        parts = self.src.expect(m.get("parts"), list, f"{jp}.parts", "a list of parts")
        if role == "tool":
            out = []
            for p in parts:
                if isinstance(p, dict) and p.get("type") == "tool_call_response":
                    response = p.get("response", p.get("result", ""))
                    out.append(
                        {"role": "tool", "tool_call_id": str(p.get("id") or "").strip(), "content": _text_of(response)}
                    )
                else:
                    self._drop(str(p.get("type") if isinstance(p, dict) else type(p).__name__))
            return out
        if role not in ("system", "user", "assistant"):
            raise self.src.fail(f"{jp}.role", f"expected one of system, user, assistant, tool; got {role!r}")
        if role == "assistant":
            output = self.output(parts)
            msg: dict[str, Any] = {"role": "assistant", "content": output.get("content") or None}
            if output.get("tool_calls"):
                msg["tool_calls"] = output["tool_calls"]
            elif msg["content"] is None:
                msg["content"] = ""
            return [msg]
        return [{"role": role, "content": self.content(parts)}]

    def content(self, parts: list[Any]) -> str | list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for p in parts:
            kind = p.get("type") if isinstance(p, dict) else None
            if kind == "text":
                out.append({"type": "text", "text": str(p.get("content", ""))})
            elif (image := images.from_wire(p)) is not None:
                out.append(image)
            else:
                self._drop(str(kind))
        if not any(images.is_image(p) for p in out):
            return "".join(p["text"] for p in out)
        return out

    def output(self, parts: list[Any]) -> dict[str, Any]:
        text: list[str] = []
        calls: list[dict[str, Any]] = []
        reasoning: list[str] = []
        for p in parts:
            kind = p.get("type") if isinstance(p, dict) else None
            if kind == "text":
                text.append(str(p.get("content", "")))
            elif kind == "tool_call":
                call_id = str(p.get("id") or f"call_{len(calls)}")
                function = {"name": str(p.get("name", "")), "arguments": _arguments(p.get("arguments"))}
                calls.append({"id": call_id, "type": "function", "function": function})
            elif kind == "reasoning":
                reasoning.append(str(p.get("content", "")))
            else:
                self._drop(str(kind))
        return make_output("".join(text), calls or None, "".join(reasoning) or None)


def tool_definitions(raw: Any) -> list[dict[str, Any]] | None:
    """``gen_ai.tool.definitions`` in the OpenAI chat shape (``{"type": "function", "function": {...}}``)."""
    if not isinstance(raw, list):
        return None
    out = []
    for d in raw:
        if not isinstance(d, dict):
            continue
        if isinstance(d.get("function"), dict):
            out.append(d)
        elif d.get("name"):
            function = {k: d[k] for k in ("name", "description", "parameters") if k in d}
            out.append({"type": "function", "function": function})
    return out or None


def _nest(flat: dict[str, Any]) -> Any:
    """``{"0.role": ..., "0.tool_calls.1.name": ...}`` as nested lists and objects (numeric keys are list indexes)."""
    root: dict[str, Any] = {}
    for key, value in flat.items():
        node = root
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value

    def lists(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        if node and all(k.isdigit() for k in node):
            return [lists(node[k]) for k in sorted(node, key=int)]
        return {k: lists(v) for k, v in node.items()}

    return lists(root)


def indexed(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]] | None:
    """OpenLLMetry's indexed attributes (``gen_ai.prompt.0.role``, ``gen_ai.prompt.0.content``,
    ``gen_ai.prompt.0.tool_calls.0.name`` or ``.function.name``, ``gen_ai.completion.0...``) as OpenAI chat
    messages, or None when the span has none."""
    head = prefix + "."
    flat = {
        k[len(head) :]: v
        for k, v in attributes.items()
        if k.startswith(head) and k[len(head) : len(head) + 1].isdigit()
    }
    if not flat:
        return None
    nested = _nest(flat)
    out = []
    for m in nested if isinstance(nested, list) else ():
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        if isinstance(content, str) and content[:1] == "[":  # multimodal content, recorded as a JSON string
            with contextlib.suppress(orjson.JSONDecodeError):
                content = orjson.loads(content)
        msg: dict[str, Any] = {"role": m.get("role") or "user", "content": content}
        calls = m.get("tool_calls")
        if isinstance(calls, list):
            msg["tool_calls"] = [
                {"id": c.get("id"), "type": "function", "function": c["function"] if isinstance(c.get("function"), dict)
                 else {"name": c.get("name", ""), "arguments": c.get("arguments", "")}}
                for c in calls if isinstance(c, dict)
            ]  # fmt: skip
        if m.get("tool_call_id"):
            msg["tool_call_id"] = m["tool_call_id"]
        out.append(msg)
    return out
