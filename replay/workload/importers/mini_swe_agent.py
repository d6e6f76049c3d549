"""mini-swe-agent ``.traj.json`` (``trajectory_format: "mini-swe-agent-1.x"``).

``messages`` is the exact chat list; mini-swe-agent never rewrites history, so the input of the call that
produced assistant message i is ``messages[:i]``. Per call: ``extra.response.usage`` (prompt, cached,
completion, reasoning tokens), ``extra.timestamp`` (unix s, response received). Tool messages carry
``extra.timestamp`` (command finished), so tool time = last tool timestamp − assistant timestamp, and model
latency = assistant timestamp − the timestamp of the tool message just before the call (falling back to
``response.created``, whole seconds, when the call followed format-error messages or was the first).

Format errors: when a response has no tool call, mini-swe-agent drops it and appends a user message with
``extra.interrupt_type = "FormatError"``. Those calls happened (``info.model_stats.api_calls`` counts them)
but their output was not kept; they are not replayed, the header counts them as ``unrecorded_calls``. The
error messages themselves stay in the context of the following calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay.workload.importers._common import (
    Call,
    Imported,
    Refused,
    Src,
    assistant_message,
    build_trajectory,
    content_text,
    make_output,
    number,
    read_json,
    tool_calls,
    usage_figures,
)

FORMAT = "mini-swe-agent"


def import_file(path: Path) -> list[Imported]:
    src = Src(path)
    data = read_json(path, "a mini-swe-agent .traj.json file (one JSON object)")
    src.expect(data, dict, "$", "a mini-swe-agent trajectory object")
    messages = src.get(data, "messages", list, "$", "a list of messages")
    context: list[dict[str, Any]] = []
    calls: list[Call] = []
    last_ts: float | None = None  # timestamp of the latest tool message (None after a format error)
    interrupts = 0
    models: set[str] = set()
    for i, m in enumerate(messages):
        jp = f"$.messages[{i}]"
        src.expect(m, dict, jp, "a message object")
        role = m.get("role")
        extra = m.get("extra") if isinstance(m.get("extra"), dict) else {}
        if role in ("system", "user"):
            context.append({"role": role, "content": content_text(m.get("content"))})
            if extra.get("interrupt_type"):
                interrupts += 1
                last_ts = None
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if call_id:
                context.append(
                    {"role": "tool", "tool_call_id": str(call_id), "content": content_text(m.get("content"))}
                )
            else:
                context.append({"role": "user", "content": content_text(m.get("content"))})
            ts = number(extra.get("timestamp"))
            if ts is not None and calls:
                a_ts = calls[-1].recorded.get("_ts")
                if a_ts is not None:
                    calls[-1].tool_time_s = max(calls[-1].tool_time_s or 0.0, ts - a_ts)
            last_ts = ts
        elif role == "assistant":
            calls_ = tool_calls(m["tool_calls"], src, f"{jp}.tool_calls") if m.get("tool_calls") else None
            content = m.get("content")
            if content == "None" and calls_:  # litellm stringified a null content
                content = None
            output = make_output(content, calls_)
            response = extra.get("response") if isinstance(extra.get("response"), dict) else {}
            rec = usage_figures(response.get("usage"))
            if response.get("model"):
                rec["model"] = response["model"]
                models.add(response["model"])
            ts = number(extra.get("timestamp"))
            created = number(response.get("created"))
            start = last_ts if last_ts is not None else created
            if ts is not None and start is not None:
                rec["latency_s"] = round(max(0.0, ts - start), 6)
            if start is not None:
                rec["timestamp"] = start
            rec["_ts"] = ts
            calls.append(Call(input=list(context), output=output, output_tokens=rec.get("output_tokens"), recorded=rec))
            context.append(assistant_message(output))
            last_ts = None
        elif role == "exit":
            break
        else:
            raise src.fail(f"{jp}.role", f"expected one of system, user, assistant, tool, exit; got {role!r}")
    if not calls:
        raise Refused(path, "$.messages", "no assistant message: the run made no recorded model call")
    for c in calls:
        c.recorded.pop("_ts", None)
        if c.tool_time_s is None:
            c.tool_time_s = 0.0
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    source: dict[str, Any] = {"importer": FORMAT, "path": str(path), "tool_time": "tool timestamps"}
    if data.get("trajectory_format"):
        source["trajectory_format"] = data["trajectory_format"]
    if info.get("mini_version"):
        source["mini_version"] = info["mini_version"]
    if info.get("exit_status"):
        source["exit_status"] = info["exit_status"]
    if stats.get("api_calls") is not None:
        source["api_calls"] = stats["api_calls"]
    if interrupts:
        source["unrecorded_calls"] = interrupts
        source["unrecorded_calls_note"] = "format-error responses mini-swe-agent dropped; not replayed"
    name = data.get("instance_id") or path.name.removesuffix(".json").removesuffix(".traj")
    model = next(iter(models)) if len(models) == 1 else None
    return [build_trajectory(f"mini-swe-agent/{name}", calls, source=source, model=model)]
