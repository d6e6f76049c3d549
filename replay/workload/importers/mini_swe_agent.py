"""mini-swe-agent ``.traj.json`` (``trajectory_format: "mini-swe-agent-1.x"``).

``messages`` is the exact chat list; mini-swe-agent never rewrites history, so the input of the call that
produced assistant message i is ``messages[:i]``. Per call: ``extra.response.usage`` (prompt, cached,
completion, reasoning tokens), ``extra.timestamp`` (unix s, response received). Tool messages carry
``extra.timestamp`` (command finished), so tool time = last tool timestamp − assistant timestamp, and model
latency = assistant timestamp − the timestamp of the tool message just before the call (falling back to
``response.created``, whole seconds, when the call followed format-error messages or was the first).

Format errors: when a response has no tool call, mini-swe-agent drops it and appends a user message with
``extra.interrupt_type = "FormatError"``. Those calls happened (``info.model_stats.api_calls`` counts them)
but neither their answer nor its usage or cost was kept. By default they are not replayed and the header
counts them as ``unrecorded_calls``; the error messages stay in the context of the following calls. With
``include_discarded`` each becomes a turn of its own: its input is exact (the context before the error
message), its answer is a stand-in (empty text, as long as the median recorded answer of the trajectory,
``recorded.output_missing``), and the next turn drops it again (``truncate_to``) as the agent did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay.histogram import percentile
from replay.workload.importers._delta import Call, Imported, build_trajectory
from replay.workload.importers._messages import assistant_message, content_text, make_output, tool_calls, usage_figures
from replay.workload.importers._source import Refused, Src, member, number, read_json

FORMAT = "mini-swe-agent"
DISCARDED = "FormatError"  # the interrupt whose model call mini-swe-agent threw away


def import_file(path: Path, include_discarded: bool = False) -> list[Imported]:
    """One trajectory; ``include_discarded`` also replays the format-error calls (see the module docstring)."""
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
        extra = member(m, "extra")
        if role in ("system", "user"):
            if extra.get("interrupt_type") == DISCARDED:
                interrupts += 1
                last_ts = None
                if include_discarded:  # the call saw the context as it stood; its answer was dropped
                    rec: dict[str, Any] = {"discarded": DISCARDED, "output_missing": True}
                    calls.append(Call(input=list(context), output=make_output(""), tool_time_s=0.0, recorded=rec))
            context.append({"role": role, "content": content_text(m.get("content"))})
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
            call = _assistant_call(m, extra, src, jp, context, last_ts)
            if call.recorded.get("model"):
                models.add(call.recorded["model"])
            calls.append(call)
            context.append(assistant_message(call.output))
            last_ts = None
        elif role == "exit":
            break
        else:
            raise src.fail(f"{jp}.role", f"expected one of system, user, assistant, tool, exit; got {role!r}")
    if not any(c.recorded.get("output_missing") is None for c in calls):
        raise Refused(path, "$.messages", "no assistant message: the run made no recorded model call")
    stand_in = _stand_in_tokens(calls)
    for c in calls:
        c.recorded.pop("_ts", None)
        if c.tool_time_s is None:
            c.tool_time_s = 0.0
    source = _source(data, path, interrupts, include_discarded, stand_in)
    name = data.get("instance_id") or path.name.removesuffix(".json").removesuffix(".traj")
    model = next(iter(models)) if len(models) == 1 else None
    return [build_trajectory(f"mini-swe-agent/{name}", calls, source=source, model=model)]


def _assistant_call(m: dict[str, Any], extra: dict[str, Any], src: Src, jp: str, context: list[dict[str, Any]],
                    last_ts: float | None) -> Call:  # fmt: skip
    """A recorded model call: its answer, usage and model, and its start (the last tool result's time, else the
    response's creation) and latency."""
    calls_ = tool_calls(m["tool_calls"], src, f"{jp}.tool_calls") if m.get("tool_calls") else None
    content = m.get("content")
    if content == "None" and calls_:  # litellm stringified a null content
        content = None
    output = make_output(content, calls_)
    response = member(extra, "response")
    rec = usage_figures(response.get("usage"))
    if response.get("model"):
        rec["model"] = response["model"]
    ts = number(extra.get("timestamp"))
    created = number(response.get("created"))
    start = last_ts if last_ts is not None else created
    if ts is not None and start is not None:
        rec["latency_s"] = round(max(0.0, ts - start), 6)
    if start is not None:
        rec["timestamp"] = start
    rec["_ts"] = ts
    return Call(input=list(context), output=output, output_tokens=rec.get("output_tokens"), recorded=rec)


def _source(data: dict[str, Any], path: Path, interrupts: int, include_discarded: bool, stand_in: int,
            ) -> dict[str, Any]:  # fmt: skip
    """What the trajectory's source says of the run: version, exit, calls, and the format errors it dropped."""
    info = member(data, "info")
    stats = member(info, "model_stats")
    source: dict[str, Any] = {"importer": FORMAT, "path": str(path), "tool_time": "tool timestamps"}
    if data.get("trajectory_format"):
        source["trajectory_format"] = data["trajectory_format"]
    if info.get("mini_version"):
        source["mini_version"] = info["mini_version"]
    if info.get("exit_status"):
        source["exit_status"] = info["exit_status"]
    if stats.get("api_calls") is not None:
        source["api_calls"] = stats["api_calls"]
    if interrupts and include_discarded:
        source["discarded_calls"] = interrupts
        source["discarded_calls_note"] = (
            f"format-error responses mini-swe-agent dropped, replayed with exact inputs and a stand-in answer "
            f"of {stand_in} tokens (the median recorded answer; the real ones were not kept)"
        )
    elif interrupts:
        source["unrecorded_calls"] = interrupts
        source["unrecorded_calls_note"] = (
            "format-error responses mini-swe-agent dropped; not replayed (replay import --include-discarded)"
        )
        source["unrecorded_calls_replayable"] = True
    return source


def _stand_in_tokens(calls: list[Call]) -> int:
    """Sets the answer length of the discarded calls (the median kept answer) and returns it."""
    kept = [c.output_tokens for c in calls if c.output_tokens and not c.recorded.get("output_missing")]
    n = max(1, round(percentile(kept, 50, 1) or 1)) if kept else 1
    for c in calls:
        if c.recorded.get("output_missing"):
            c.output_tokens = n
    return n
