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

from replay.workload.importers._delta import Call, Imported, build_trajectory
from replay.workload.importers._messages import assistant_message, content_text, make_output, tool_calls, usage_figures
from replay.workload.importers._source import (
    ImportFailure,
    Refused,
    Src,
    iter_jsonl,
    member,
    parse_time,
    read_json,
    seconds_between,
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


class _Stream:
    """One event stream read in order into calls: the context rebuilt so far, the model responses seen (one
    call each) and the timestamps that give each call its latency and tool time."""

    def __init__(self, src: Src, jp: str, metrics: dict[str, Any] | None) -> None:
        self.src, self.jp = src, jp
        self.latencies: dict[str, float] = {}
        self.usages: dict[str, dict[str, Any]] = {}
        if isinstance(metrics, dict):
            self._metrics(metrics)
        self.context: list[dict[str, Any]] = []
        self.calls: list[Call] = []
        self.tools: list[dict[str, Any]] | None = None
        self.by_response: dict[str, int] = {}  # response id → index in calls
        self.action_ts: dict[str, Any] = {}  # response id → timestamp of its first action
        self.prev_ts: Any = None
        self.models: set[str] = set()

    def _metrics(self, metrics: dict[str, Any]) -> None:
        """The record's per-response latencies and token usages, by response id."""
        for r in metrics.get("response_latencies") or ():
            if isinstance(r, dict) and r.get("response_id") and isinstance(r.get("latency"), (int, float)):
                self.latencies[r["response_id"]] = float(r["latency"])
        for u in metrics.get("token_usages") or ():
            if isinstance(u, dict) and u.get("response_id"):
                self.usages[u["response_id"]] = u

    def event(self, i: int, ev: Any) -> None:
        ejp = f"{self.jp}[{i}]"
        self.src.expect(ev, dict, ejp, "an event object")
        ts = parse_time(ev.get("timestamp"))
        action, obs = ev.get("action"), ev.get("observation")
        args = member(ev, "args")
        meta = ev.get("tool_call_metadata") if isinstance(ev.get("tool_call_metadata"), dict) else None
        model_response = meta.get("model_response") if meta else None
        response: dict[str, Any] = model_response if isinstance(model_response, dict) else {}
        rid = response.get("id")
        if action == "system":
            self.context.append({"role": "system", "content": content_text(args.get("content", ev.get("message", "")))})
            if isinstance(args.get("tools"), list):
                self.tools = args["tools"]
        elif action is not None and rid:
            if rid not in self.by_response:
                self._response(ejp, response, rid, ts)
        elif action == "message":
            self._message(ev, args, ts)
        elif obs is not None:
            self._observation(ev, obs, meta, rid, ts)
        if ts is not None:
            self.prev_ts = ts

    def _response(self, ejp: str, response: dict[str, Any], rid: str, ts: Any) -> None:
        """The first action of a model response: one call, its output the response's first choice."""
        choices = response.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self.src.fail(f"{ejp}.tool_call_metadata.model_response.choices", "expected a non-empty list")
        msg = choices[0].get("message") or {}
        cjp = f"{ejp}.tool_call_metadata.model_response.choices[0].message"
        tcs = tool_calls(msg["tool_calls"], self.src, f"{cjp}.tool_calls") if msg.get("tool_calls") else None
        output = make_output(msg.get("content"), tcs, msg.get("reasoning_content"))
        rec = usage_figures(response.get("usage"))
        if not rec and rid in self.usages:
            rec = usage_figures(self.usages[rid])
        if response.get("model"):
            rec["model"] = response["model"]
            self.models.add(response["model"])
        if rid in self.latencies:
            rec["latency_s"] = round(self.latencies[rid], 6)
        else:
            lat = seconds_between(self.prev_ts, ts)
            if lat is not None:
                rec["latency_s"] = round(max(0.0, lat), 6)
        if isinstance(response.get("created"), (int, float)):
            rec["timestamp"] = float(response["created"])
        self.by_response[rid] = len(self.calls)
        self.action_ts[rid] = ts
        self.calls.append(
            Call(input=list(self.context), output=output, output_tokens=rec.get("output_tokens"), recorded=rec)
        )
        self.context.append(assistant_message(output))

    def _message(self, ev: dict[str, Any], args: dict[str, Any], ts: Any) -> None:
        text = content_text(args.get("content", ev.get("message", "")))
        if ev.get("source") == "agent":  # a text-only model call
            output = make_output(text)
            rec = {}
            lat = seconds_between(self.prev_ts, ts)
            if lat is not None:
                rec["latency_s"] = round(max(0.0, lat), 6)
            self.calls.append(Call(input=list(self.context), output=output, recorded=rec))
            self.context.append(assistant_message(output))
        else:
            self.context.append({"role": "user", "content": text})

    def _observation(self, ev: dict[str, Any], obs: Any, meta: dict[str, Any] | None, rid: Any, ts: Any) -> None:
        if obs in _SKIP_OBSERVATIONS:
            pass
        elif obs == "recall":
            text = _recall_text(ev.get("extras") or {})
            if text:
                self.context.append({"role": "user", "content": text})
        elif meta and meta.get("tool_call_id") and rid in self.by_response:
            self.context.append(
                {
                    "role": "tool",
                    "tool_call_id": str(meta["tool_call_id"]),
                    "content": content_text(ev.get("content")),
                }
            )
            dt = seconds_between(self.action_ts.get(rid), ts)
            if dt is not None:
                c = self.calls[self.by_response[rid]]
                c.tool_time_s = max(c.tool_time_s or 0.0, dt)
        elif ev.get("cause") is None or obs == "error":
            text = content_text(ev.get("content", ev.get("message", "")))
            if text:
                self.context.append({"role": "user", "content": text})


def _trajectory(
    events: list[Any], src: Src, jp: str, traj_id: str, path: Path, metrics: dict[str, Any] | None
) -> Imported:
    stream = _Stream(src, jp, metrics)
    for i, ev in enumerate(events):
        stream.event(i, ev)
    calls = stream.calls
    if not calls:
        raise Refused(path, jp, "no model call in the event stream")
    source: dict[str, Any] = {"importer": FORMAT, "path": str(path), "tool_time": "observation − action timestamps"}
    source["input"] = "rebuilt from events (approximation of OpenHands' conversation memory)"
    if stream.latencies and len(stream.latencies) > len(stream.by_response):
        source["unrecorded_calls"] = len(stream.latencies) - len(stream.by_response)
        source["unrecorded_calls_note"] = "responses listed in metrics with no event (e.g. invalid tool calls)"
    for c in calls:
        if c.tool_time_s is None:
            c.tool_time_s = 0.0
    model = next(iter(stream.models)) if len(stream.models) == 1 else None
    return build_trajectory(traj_id, calls, source=source, model=model, tools=stream.tools)


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
