"""OpenAI-style request logs: JSON Lines, one chat request per line.

A line holds the request's ``messages`` (at the top level, or under ``request`` or ``body`` as in batch
files; ``tools`` beside them) and optionally the answer: ``response`` (a chat.completion object, a batch
``{"body": {...}}`` wrapper, an assistant message, or a string), or ``choices`` / ``output`` /
``completion`` at the top level; ``usage`` (top level or in the response); timing: ``timestamp`` /
``start_time`` / ``created`` (unix s or ms, or ISO-8601) and ``end_time``, or ``latency``/``latency_s``/
``duration``/``duration_s`` (seconds).

Sessions: by the first id field present on a line (``session_id``, ``conversation_id``,
``trajectory_id``, ``thread_id``, ``session``, or ``metadata.session_id`` / ``metadata.conversation_id``);
lines without one are grouped by prefix: a request whose messages extend an earlier request's messages
plus its response (or, when no response was logged, its messages) joins that request's session (the
longest such match; each request is extended at most once). Within a session, tool time = next request
start − this request's end, when both are known.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from replay.workload.importers._delta import Call, Imported, build_trajectory
from replay.workload.importers._messages import (
    assistant_message,
    make_output,
    message_content,
    tool_calls,
    usage_figures,
)
from replay.workload.importers._sessions import PrefixSessions
from replay.workload.importers._source import (
    Refused,
    Src,
    iter_jsonl,
    number,
    parse_time,
    seconds_between,
    unix_seconds,
)

FORMAT = "openai-log"
SESSION_KEYS = ("session_id", "conversation_id", "trajectory_id", "thread_id", "session")


@dataclass
class _Req:
    line: int
    messages: list[dict[str, Any]]
    output: dict[str, Any] | None
    usage: dict[str, Any]
    start: Any
    end: Any
    model: str | None
    tools: list[dict[str, Any]] | None
    session: str | None
    recorded: dict[str, Any] = field(default_factory=dict)


def chat_message(m: Any, src: Src, jp: str) -> dict[str, Any]:
    src.expect(m, dict, jp, "a chat message object")
    role = m.get("role")
    if role == "developer":
        role = "system"
    if role == "assistant":
        calls = tool_calls(m["tool_calls"], src, f"{jp}.tool_calls") if m.get("tool_calls") else None
        return assistant_message(make_output(m.get("content"), calls))
    if role == "tool":
        return {
            "role": "tool",
            "tool_call_id": str(m.get("tool_call_id") or ""),
            "content": message_content(m.get("content")),
        }
    if role in ("system", "user"):
        return {"role": role, "content": message_content(m.get("content"))}
    raise src.fail(f"{jp}.role", f"expected one of system, developer, user, assistant, tool; got {role!r}")


def _response(obj: dict[str, Any], src: Src) -> tuple[dict[str, Any] | None, dict[str, Any], dict[str, Any]]:
    """(output, usage, the response object) from whichever shape the line uses."""
    resp: Any = obj.get("response")
    jp = "$.response"
    if isinstance(resp, dict) and isinstance(resp.get("body"), dict):  # batch output
        resp, jp = resp["body"], "$.response.body"
    if resp is None and "choices" in obj:
        resp, jp = obj, "$"
    if resp is None:
        for key in ("output", "completion"):
            if isinstance(obj.get(key), str):
                return make_output(obj[key]), obj.get("usage") or {}, {}
        return None, obj.get("usage") or {}, {}
    if isinstance(resp, str):
        return make_output(resp), obj.get("usage") or {}, {}
    src.expect(resp, dict, jp, "a chat.completion object, an assistant message or a string")
    usage = resp.get("usage") or obj.get("usage") or {}
    msg: Any = resp
    mjp = jp
    if "choices" in resp:
        choices = src.expect(resp["choices"], list, f"{jp}.choices", "a list of choices")
        if not choices:
            return None, usage, resp
        msg = src.expect(choices[0], dict, f"{jp}.choices[0]", "a choice object").get("message")
        mjp = f"{jp}.choices[0].message"
        src.expect(msg, dict, mjp, "an assistant message")
    calls = tool_calls(msg["tool_calls"], src, f"{mjp}.tool_calls") if msg.get("tool_calls") else None
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    return make_output(msg.get("content"), calls, reasoning if isinstance(reasoning, str) else None), usage, resp


def _session_of(obj: dict[str, Any]) -> str | None:
    for key in SESSION_KEYS:
        if obj.get(key) not in (None, ""):
            return str(obj[key])
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in ("session_id", "conversation_id"):
            if meta.get(key) not in (None, ""):
                return str(meta[key])
    return None


def _parse(path: Path) -> list[_Req]:
    src = Src(path)
    reqs = []
    for lineno, obj in iter_jsonl(path):
        s = src.at(lineno)
        s.expect(obj, dict, "$", "a request object with 'messages'")
        body, bjp = obj, "$"
        for key in ("request", "body"):
            if isinstance(obj.get(key), dict) and "messages" in obj[key]:
                body, bjp = obj[key], f"$.{key}"
        msgs = s.get(body, "messages", list, bjp, "a list of chat messages")
        messages = [chat_message(m, s, f"{bjp}.messages[{i}]") for i, m in enumerate(msgs)]
        output, usage, resp = _response(obj, s)
        start = parse_time(obj.get("timestamp", obj.get("start_time", obj.get("created", resp.get("created")))))
        end = parse_time(obj.get("end_time"))
        latency = None
        for key in ("latency_s", "latency", "duration_s", "duration"):
            latency = number(obj.get(key))
            if latency is not None:
                break
        if latency is None:
            latency = seconds_between(start, end)
        rec = usage_figures(usage)
        if latency is not None:
            rec["latency_s"] = round(max(0.0, latency), 6)
        if unix_seconds(start) is not None:
            rec["timestamp"] = unix_seconds(start)
        model = body.get("model") or resp.get("model")
        if model:
            rec["model"] = model
        if end is None and latency is not None and start is not None:
            end = unix_seconds(start)
            end = None if end is None else end + latency
            start = unix_seconds(start)
        tools = body.get("tools") if isinstance(body.get("tools"), list) else None
        reqs.append(_Req(lineno, messages, output, usage, start, end, model, tools, _session_of(obj), rec))
    return reqs


def _group(reqs: list[_Req]) -> list[list[_Req]]:
    """Sessions by id field where a line has one, else by prefix extension (in order of first request)."""
    sessions: list[list[_Req]] = []
    by_id: dict[str, int] = {}
    extending = PrefixSessions(lambda m: orjson.dumps(m, option=orjson.OPT_SORT_KEYS))
    for r in reqs:
        if r.session is not None:
            if r.session not in by_id:
                by_id[r.session] = len(sessions)
                sessions.append([])
            sessions[by_id[r.session]].append(r)
            continue
        target = extending.match(r.messages)
        if target is None:
            target = len(sessions)
            sessions.append([])
        sessions[target].append(r)
        extending.expect(target, [*r.messages, assistant_message(r.output)] if r.output else r.messages)
    return sessions


def import_file(path: Path) -> list[Imported]:
    reqs = _parse(path)
    if not reqs:
        raise Refused(path, "", "no requests in the log")
    stem = path.name.removesuffix(".jsonl")
    out = []
    sessions = _group(reqs)
    width = len(str(len(sessions)))
    for n, sess in enumerate(sessions):
        calls = []
        for i, r in enumerate(sess):
            output = r.output or make_output("")
            if r.output is None:
                r.recorded["output_missing"] = True
            tool_time = None
            if i + 1 < len(sess):
                tool_time = seconds_between(r.end, sess[i + 1].start)
                if tool_time is not None:
                    tool_time = max(0.0, tool_time)
            calls.append(Call(r.messages, output, r.recorded.get("output_tokens"), tool_time, r.recorded))
        sid = sess[0].session
        name = sid if sid is not None else f"{n:0{width}d}"
        source = {"importer": FORMAT, "path": str(path), "lines": [r.line for r in sess]}
        if sid is None:
            source["grouping"] = "prefix"
        models = {r.model for r in sess if r.model}
        tools = next((r.tools for r in sess if r.tools), None)
        traj = build_trajectory(
            f"openai-log/{stem}/{name}",
            calls,
            source=source,
            model=next(iter(models)) if len(models) == 1 else None,
            tools=tools,
        )
        out.append(traj)
    return out
