"""Exgentic recorded sessions: each session's model calls with their whole input, tools, output limit and start time.

replay found no published schema of these recordings, so it reads the fields the public description names
(messages, tools, output limits, call start times) in the shape below, documented in docs/importers.md. A file is
JSON Lines, one session per line (or one JSON array of sessions):

``{"session_id", "tools"?, "calls": [{"messages", "tools"?, "max_tokens" | "max_completion_tokens",
"start_time" | "timestamp", "end_time"? | "latency_s"?, "response"?, "usage"?}]}``

- Input: exact (``messages``, OpenAI chat shape; tools the call's, else the session's).
- Answer: the call's ``response`` (an assistant message or a string), else the assistant message right after its
  input in the next call's messages, else a stand-in (``recorded.output_missing``).
- Output tokens (sent as ``max_tokens``): ``usage.completion_tokens``, else the answer's count, else the recorded
  output limit; the limit itself is kept as ``recorded.max_tokens``.
- Time: ``start_time`` as ISO 8601 or unix seconds (ms when huge); tool time = the next call's start − this call's
  end (``end_time``, or start + ``latency_s``); without an end, the gap between the starts, which then holds the
  call's own time too (the header says which).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay.workload.importers._delta import Call, Imported, build_trajectory
from replay.workload.importers._messages import make_output, tool_calls, usage_figures
from replay.workload.importers._source import (
    ImportFailure,
    Refused,
    Src,
    iter_jsonl,
    number,
    parse_time,
    read_json,
    seconds_between,
    unix_seconds,
)
from replay.workload.importers.openai_log import chat_message

FORMAT = "exgentic"
LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def looks_like(obj: Any) -> bool:
    calls = obj.get("calls") if isinstance(obj, dict) else None
    return bool(calls) and isinstance(calls, list) and isinstance(calls[0], dict) and "messages" in calls[0]


def _answer(raw: Any, src: Src, jp: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return make_output(raw)
    src.expect(raw, dict, jp, "an assistant message or a string")
    calls = tool_calls(raw["tool_calls"], src, f"{jp}.tool_calls") if raw.get("tool_calls") else None
    reasoning = raw.get("reasoning_content") or raw.get("reasoning")
    return make_output(raw.get("content"), calls, reasoning if isinstance(reasoning, str) else None)


def _next_answer(nxt: dict[str, Any] | None, n: int) -> Any:
    """The assistant message right after a call's ``n`` input messages in the next call's input."""
    later = nxt.get("messages") if nxt is not None else None
    if not isinstance(later, list) or len(later) <= n:
        return None
    raw = later[n]
    return raw if isinstance(raw, dict) and raw.get("role") == "assistant" else None


def _limit(call: dict[str, Any], src: Src, jp: str) -> int:
    for key in LIMITS:
        if key in call:
            value = call[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise src.fail(f"{jp}.{key}", f"expected a whole number of tokens >= 1; got {value!r}")
            return value
    raise src.fail(f"{jp}.max_tokens", "missing; expected the call's output limit in tokens")


def _start(call: dict[str, Any], src: Src, jp: str) -> Any:
    for key in ("start_time", "timestamp"):
        if key in call:
            t = parse_time(call[key])
            if t is None:
                raise src.fail(f"{jp}.{key}", f"expected an ISO 8601 time or unix seconds; got {call[key]!r}")
            return t
    raise src.fail(f"{jp}.start_time", "missing; expected the call's start (ISO 8601 or unix seconds)")


def _calls(session: dict[str, Any], src: Src) -> tuple[list[Call], bool, list[dict[str, Any]] | None]:
    raw_calls = src.get(session, "calls", list, "$", "a list of model calls")
    if not raw_calls:
        raise src.fail("$.calls", "expected at least one call")
    out, starts, ends = [], [], []
    tools = session.get("tools")
    for i, call in enumerate(raw_calls):
        jp = f"$.calls[{i}]"
        src.expect(call, dict, jp, "a call object (messages, max_tokens, start_time)")
        msgs = src.get(call, "messages", list, jp, "the call's chat messages (a list)")
        messages = [chat_message(m, src, f"{jp}.messages[{k}]") for k, m in enumerate(msgs)]
        nxt = raw_calls[i + 1] if i + 1 < len(raw_calls) and isinstance(raw_calls[i + 1], dict) else None
        output = _answer(call.get("response"), src, f"{jp}.response")
        if output is None:
            output = _answer(_next_answer(nxt, len(msgs)), src, f"$.calls[{i + 1}].messages[{len(msgs)}]")
        limit = _limit(call, src, jp)
        start = _start(call, src, jp)
        latency = number(call.get("latency_s"))
        end = parse_time(call["end_time"]) if "end_time" in call else None
        if latency is None and end is not None:
            latency = seconds_between(start, end)
        rec: dict[str, Any] = {"max_tokens": limit, **usage_figures(call.get("usage"))}
        if latency is not None:
            rec["latency_s"] = round(latency, 6)
        if unix_seconds(start) is not None:
            rec["timestamp"] = unix_seconds(start)
        if output is None:
            output, rec["output_missing"] = make_output(""), True
        n_out = rec.get("output_tokens") or (limit if rec.get("output_missing") else None)
        out.append(Call(messages, output, n_out, None, rec))
        starts.append(start)
        ends.append(latency)
        tools = call.get("tools") or tools
    timed_ends = all(e is not None for e in ends[:-1])
    for k in range(len(out) - 1):
        gap = seconds_between(starts[k], starts[k + 1])
        if gap is not None:
            out[k].tool_time_s = max(0.0, gap - (ends[k] or 0.0))
    return out, timed_ends, tools if isinstance(tools, list) else None


def _sessions(path: Path) -> list[tuple[int, Any]]:
    with path.open("rb") as fh:
        head = fh.read(64).lstrip()
    if head.startswith(b"["):
        doc = read_json(path, "a list of Exgentic sessions")
        return [(0, s) for s in doc]
    return list(iter_jsonl(path))


def import_file(path: Path) -> list[Imported]:
    out = []
    stem = path.name.removesuffix(".jsonl").removesuffix(".json")
    for n, (lineno, session) in enumerate(_sessions(path)):
        src = Src(path, lineno)
        if not lineno:  # a JSON array: errors name the session's index
            src = _Indexed(path, n)
        src.expect(session, dict, "$", "a session object (session_id, calls)")
        calls, timed, tools = _calls(session, src)
        name = str(session.get("session_id") or f"session{n}")
        source: dict[str, Any] = {
            "importer": FORMAT,
            "path": str(path),
            "input": "exact (messages)",
            "tool_time": "next call's start - this call's end"
            if timed
            else "gap between call starts (no end recorded: holds each call's own time too)",
        }
        if lineno:
            source["line"] = lineno
        out.append(build_trajectory(f"{FORMAT}/{stem}/{name}", calls, source=source, tools=tools))
    if not out:
        raise Refused(path, "", "no sessions in the file")
    return out


class _Indexed(Src):
    """Errors of a session in a JSON array: its JSON path starts at ``$[n]``."""

    def __init__(self, path: Path, index: int) -> None:
        super().__init__(path)
        self.index = index

    def fail(self, jpath: str, problem: str) -> ImportFailure:
        return ImportFailure(self.path, f"$[{self.index}]{jpath[1:]}", problem)
