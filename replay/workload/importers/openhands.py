"""OpenHands (v0) event streams: a JSON list of events, or evaluation records (JSON / JSONL) with ``history``.

OpenHands does not store the model input verbatim; it is rebuilt the way its conversation memory does:
the ``system`` action (prompt; its ``tools`` become the header's tool schemas), the user's ``message``, the
workspace context of a ``recall`` observation (rendered from its extras: an approximation), then per model
response the assistant message (``tool_call_metadata.model_response.choices[0].message``: content and tool
calls) followed by one ``tool`` message per observation answering it, in event order. One distinct
``model_response.id`` is one model call; an agent ``message`` action without metadata is a text-only call.
An ``error`` observation without a cause becomes a user message (the call that produced the bad tool call
left no response in the stream; such calls are counted as ``unrecorded_calls`` when the record's metrics
list more responses than the events hold).

Per call: latency from ``metrics.response_latencies`` (by response id) or, without metrics, the gap between
the previous event and the action; usage from the model response or ``metrics.token_usages``; tool time =
last observation timestamp − action timestamp.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay.workload.importers._common import (
    Call,
    Imported,
    ImportFailure,
    Refused,
    Src,
    assistant_message,
    build_trajectory,
    content_text,
    iter_jsonl,
    make_output,
    member,
    parse_time,
    read_json,
    seconds_between,
    tool_calls,
    usage_figures,
)

FORMAT = "openhands"

_SKIP_OBSERVATIONS = {"null", "agent_state_changed", "user_rejected", "agent_condensation"}


def _recall_text(extras: dict[str, Any]) -> str:
    """Workspace context of a recall observation, rendered compactly from its extras (approximate)."""
    parts = []
    if extras.get("repo_name") or extras.get("repo_directory"):
        parts.append(
            f"<REPOSITORY_INFO>\n{extras.get('repo_name', '')} {extras.get('repo_directory', '')}\n</REPOSITORY_INFO>"
        )
    if extras.get("repo_instructions"):
        parts.append(f"<REPOSITORY_INSTRUCTIONS>\n{extras['repo_instructions']}\n</REPOSITORY_INSTRUCTIONS>")
    hosts = extras.get("runtime_hosts")
    if hosts or extras.get("date"):
        lines = ["<RUNTIME_INFORMATION>"]
        if hosts:
            lines.append("The user has access to the following hosts for accessing a web application:")
            if isinstance(hosts, dict):
                lines.extend(f"* {h} (port {p})" for h, p in hosts.items())
        if extras.get("additional_agent_instructions"):
            lines.append(str(extras["additional_agent_instructions"]))
        if extras.get("date"):
            lines.append(f"Today's date is {extras['date']} (UTC).")
        lines.append("</RUNTIME_INFORMATION>")
        parts.append("\n".join(lines))
    for k in extras.get("microagent_knowledge") or ():
        if isinstance(k, dict) and k.get("content"):
            parts.append(f"<EXTRA_INFO>\n{k['content']}\n</EXTRA_INFO>")
    return "\n\n".join(parts)


def _trajectory(
    events: list[Any], src: Src, jp: str, traj_id: str, path: Path, metrics: dict[str, Any] | None
) -> Imported:
    latencies: dict[str, float] = {}
    usages: dict[str, dict[str, Any]] = {}
    if isinstance(metrics, dict):
        for r in metrics.get("response_latencies") or ():
            if isinstance(r, dict) and r.get("response_id") and isinstance(r.get("latency"), (int, float)):
                latencies[r["response_id"]] = float(r["latency"])
        for u in metrics.get("token_usages") or ():
            if isinstance(u, dict) and u.get("response_id"):
                usages[u["response_id"]] = u
    context: list[dict[str, Any]] = []
    calls: list[Call] = []
    tools: list[dict[str, Any]] | None = None
    by_response: dict[str, int] = {}  # response id → index in calls
    action_ts: dict[str, Any] = {}  # response id → timestamp of its first action
    prev_ts = None
    models: set[str] = set()
    for i, ev in enumerate(events):
        ejp = f"{jp}[{i}]"
        src.expect(ev, dict, ejp, "an event object")
        ts = parse_time(ev.get("timestamp"))
        action, obs = ev.get("action"), ev.get("observation")
        args = member(ev, "args")
        meta = ev.get("tool_call_metadata") if isinstance(ev.get("tool_call_metadata"), dict) else None
        model_response = meta.get("model_response") if meta else None
        response: dict[str, Any] = model_response if isinstance(model_response, dict) else {}
        rid = response.get("id")
        if action == "system":
            context.append({"role": "system", "content": content_text(args.get("content", ev.get("message", "")))})
            if isinstance(args.get("tools"), list):
                tools = args["tools"]
        elif action is not None and rid:
            if rid not in by_response:
                choices = response.get("choices")
                if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                    raise src.fail(f"{ejp}.tool_call_metadata.model_response.choices", "expected a non-empty list")
                msg = choices[0].get("message") or {}
                cjp = f"{ejp}.tool_call_metadata.model_response.choices[0].message"
                tcs = tool_calls(msg["tool_calls"], src, f"{cjp}.tool_calls") if msg.get("tool_calls") else None
                output = make_output(msg.get("content"), tcs, msg.get("reasoning_content"))
                rec = usage_figures(response.get("usage"))
                if not rec and rid in usages:
                    rec = usage_figures(usages[rid])
                if response.get("model"):
                    rec["model"] = response["model"]
                    models.add(response["model"])
                if rid in latencies:
                    rec["latency_s"] = round(latencies[rid], 6)
                else:
                    lat = seconds_between(prev_ts, ts)
                    if lat is not None:
                        rec["latency_s"] = round(max(0.0, lat), 6)
                if isinstance(response.get("created"), (int, float)):
                    rec["timestamp"] = float(response["created"])
                by_response[rid] = len(calls)
                action_ts[rid] = ts
                calls.append(
                    Call(input=list(context), output=output, output_tokens=rec.get("output_tokens"), recorded=rec)
                )
                context.append(assistant_message(output))
        elif action == "message":
            text = content_text(args.get("content", ev.get("message", "")))
            if ev.get("source") == "agent":  # a text-only model call
                output = make_output(text)
                rec = {}
                lat = seconds_between(prev_ts, ts)
                if lat is not None:
                    rec["latency_s"] = round(max(0.0, lat), 6)
                calls.append(Call(input=list(context), output=output, recorded=rec))
                context.append(assistant_message(output))
            else:
                context.append({"role": "user", "content": text})
        elif obs is not None:
            if obs in _SKIP_OBSERVATIONS:
                pass
            elif obs == "recall":
                text = _recall_text(ev.get("extras") or {})
                if text:
                    context.append({"role": "user", "content": text})
            elif meta and meta.get("tool_call_id") and rid in by_response:
                context.append(
                    {
                        "role": "tool",
                        "tool_call_id": str(meta["tool_call_id"]),
                        "content": content_text(ev.get("content")),
                    }
                )
                dt = seconds_between(action_ts.get(rid), ts)
                if dt is not None:
                    c = calls[by_response[rid]]
                    c.tool_time_s = max(c.tool_time_s or 0.0, dt)
            elif ev.get("cause") is None or obs == "error":
                text = content_text(ev.get("content", ev.get("message", "")))
                if text:
                    context.append({"role": "user", "content": text})
        if ts is not None:
            prev_ts = ts
    if not calls:
        raise Refused(path, jp, "no model call in the event stream")
    source: dict[str, Any] = {"importer": FORMAT, "path": str(path), "tool_time": "observation − action timestamps"}
    source["input"] = "rebuilt from events (approximation of OpenHands' conversation memory)"
    if latencies and len(latencies) > len(by_response):
        source["unrecorded_calls"] = len(latencies) - len(by_response)
        source["unrecorded_calls_note"] = "responses listed in metrics with no event (e.g. invalid tool calls)"
    for c in calls:
        if c.tool_time_s is None:
            c.tool_time_s = 0.0
    model = next(iter(models)) if len(models) == 1 else None
    return build_trajectory(traj_id, calls, source=source, model=model, tools=tools)


def _is_event_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], dict) and "source" in value[0]


def import_file(path: Path) -> list[Imported]:
    src = Src(path)
    stem = path.name.removesuffix(".jsonl").removesuffix(".json")
    try:
        data = read_json(path)
        records = [(0, data)]
    except ImportFailure:
        records = list(iter_jsonl(path))  # evaluation output: one record per line
    out = []
    for lineno, rec in records:
        s = src.at(lineno)
        if _is_event_list(rec):
            out.append(_trajectory(rec, s, "$", f"openhands/{stem}", path, None))
            continue
        s.expect(rec, (dict, list), "$", "an OpenHands event list or a record with 'history'")
        if isinstance(rec, list):
            raise s.fail("$", "expected a list of OpenHands events (objects with 'source', 'action'/'observation')")
        history = s.get(rec, "history", list, "$", "a list of OpenHands events")
        name = rec.get("instance_id") or stem
        if len(records) > 1 and not rec.get("instance_id"):
            name = f"{stem}/{lineno}"
        out.append(_trajectory(history, s, "$.history", f"openhands/{name}", path, rec.get("metrics")))
    if not out:
        raise Refused(path, "", "no OpenHands records in file")
    return out
