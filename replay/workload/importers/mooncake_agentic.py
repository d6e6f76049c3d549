"""Agentic Mooncake traces and H CUA Perf (JSON Lines, one chat request per line, with its whole history).

The Mooncake trace format as AIPerf replays captured conversations (docs/importers.md has the links): a line holds
``messages`` (the full OpenAI chat history sent, in ``history`` mode), ``output_length`` (the completion length
recorded), optionally ``session_id``, ``tools``, ``extra`` (body fields; not sent by replay), and its time:
``timestamp`` (ms, arrival) or ``delay`` (ms the agent waited after the previous answer of its session before
sending this request: its tools ran in that time). Sessions are the lines sharing a ``session_id``, in file order;
a line without one is a conversation of its own (no prefix guessing, unlike ``mooncake``).

- Input: exact (``messages``), image parts kept as canonical image parts.
- Answer: not on its own line. The answer of call *k* is the assistant message at the position right after its
  input in the session's next request (exact where that request extends it; as the agent kept it otherwise). The
  last call's answer, and any call whose next request holds none there, is a stand-in: empty text,
  ``output_length`` tokens, ``recorded.output_missing``.
- Tool time: the next line's ``delay`` (includes everything between the answer and the next request); with
  ``timestamp`` only, none is recorded (``recorded.arrival_s`` keeps the arrivals).
- ``message_mode: delta`` lines (the answers were the live model's, never written down) are refused.

H CUA Perf (``hcua``) is this format from a computer-use agent: each request keeps its latest screenshot as an
image and earlier ones as the text ``[Image omitted by context cleaning]``. ``screenshot_window`` N restores the
last N screenshots of each request from the requests that carried them (``replay.workload.images.window``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replay.workload import images
from replay.workload.importers._delta import Call, Imported, build_trajectory
from replay.workload.importers._messages import make_output, tool_calls
from replay.workload.importers._source import Refused, Src, iter_jsonl, number
from replay.workload.importers.openai_log import chat_message

FORMAT = "mooncake-agentic"
HCUA = "hcua"


@dataclass
class _Row:
    line: int
    messages: list[dict[str, Any]]
    raw_messages: list[Any]
    output_length: int
    delay_s: float | None
    arrival_s: float | None
    tools: list[dict[str, Any]] | None
    recorded: dict[str, Any] = field(default_factory=dict)


def _row(obj: Any, src: Src) -> tuple[str | None, _Row]:
    src.expect(obj, dict, "$", "a request object with 'messages' and 'output_length'")
    if obj.get("message_mode") == "delta":
        raise src.fail(
            "$.message_mode", "delta sessions are refused: their answers were the live model's and were not recorded"
        )
    msgs = src.get(obj, "messages", list, "$", "the request's chat messages (a list)")
    if not msgs:
        raise src.fail("$.messages", "expected at least one message")
    n_out = src.get(obj, "output_length", int, "$", "the recorded completion length in tokens (an integer)")
    delay = number(obj.get("delay"))
    stamp = number(obj.get("timestamp"))
    tools = obj.get("tools")
    if tools is not None:
        src.expect(tools, list, "$.tools", "a list of tool definitions")
    sid = obj.get("session_id")
    row = _Row(
        line=src.line,
        messages=[chat_message(m, src, f"$.messages[{i}]") for i, m in enumerate(msgs)],
        raw_messages=msgs,
        output_length=max(1, n_out),
        delay_s=None if delay is None else max(0.0, delay / 1000.0),
        arrival_s=None if stamp is None else stamp / 1000.0,
        tools=tools or None,
    )
    return (None if sid in (None, "") else str(sid)), row


def _answer(row: _Row, nxt: _Row | None, src: Src) -> dict[str, Any] | None:
    """The recorded answer of ``row``: the assistant message right after its input in the next request."""
    if nxt is None or len(nxt.raw_messages) <= len(row.messages):
        return None
    raw = nxt.raw_messages[len(row.messages)]
    if not isinstance(raw, dict) or raw.get("role") != "assistant":
        return None
    jp = f"$.messages[{len(row.messages)}]"
    calls = tool_calls(raw["tool_calls"], src.at(nxt.line), f"{jp}.tool_calls") if raw.get("tool_calls") else None
    reasoning = raw.get("reasoning_content") or raw.get("reasoning")
    return make_output(raw.get("content"), calls, reasoning if isinstance(reasoning, str) else None)


def _calls(rows: list[_Row], src: Src, window: int | None) -> list[Call]:
    inputs = [r.messages for r in rows]
    if window is not None:
        inputs = images.window(inputs, window)
    calls = []
    for k, (row, messages) in enumerate(zip(rows, inputs, strict=True)):
        nxt = rows[k + 1] if k + 1 < len(rows) else None
        output = _answer(row, nxt, src)
        rec: dict[str, Any] = {"output_tokens": row.output_length}
        if output is None:
            output, rec["output_missing"] = make_output(""), True
        if row.arrival_s is not None:
            rec["arrival_s"] = row.arrival_s
        if row.delay_s is not None:
            rec["delay_s"] = round(row.delay_s, 6)
        tool_time = nxt.delay_s if nxt is not None else None
        calls.append(Call(messages, output, row.output_length, tool_time, rec))
    return calls


def _import(path: Path, fmt: str, window: int | None) -> list[Imported]:
    src = Src(path)
    sessions: dict[str, list[_Row]] = {}
    order: list[tuple[str | None, list[_Row]]] = []
    for lineno, obj in iter_jsonl(path):
        sid, row = _row(obj, src.at(lineno))
        if sid is None:
            order.append((None, [row]))
        elif sid not in sessions:
            sessions[sid] = [row]
            order.append((sid, sessions[sid]))
        else:
            sessions[sid].append(row)
    if not order:
        raise Refused(path, "", "no requests in the trace")
    stem = path.name.removesuffix(".jsonl")
    out = []
    width = len(str(len(order)))
    for sid, rows in order:
        calls = _calls(rows, src, window)
        timed = any(r.delay_s is not None for r in rows[1:])
        source: dict[str, Any] = {
            "importer": fmt,
            "path": str(path),
            "lines": [r.line for r in rows],
            "input": "exact (messages)",
            "answers": "the assistant message after each input in the next request; the last is a stand-in",
            "tool_time": "delay of the next request" if timed else "none recorded (delay absent)",
        }
        if window is not None:
            source["screenshot_window"] = window
        missing = sum(1 for c in calls if c.recorded.get("output_missing"))
        if missing:
            source["answers_missing"] = missing
        tools = next((r.tools for r in rows if r.tools), None)
        name = sid if sid is not None else f"line{rows[0].line:0{width}d}"
        out.append(build_trajectory(f"{fmt}/{stem}/{name}", calls, source=source, tools=tools))
    return out


def import_file(path: Path, screenshot_window: int | None = None) -> list[Imported]:
    return _import(path, FORMAT, screenshot_window)


def import_hcua(path: Path, screenshot_window: int | None = None) -> list[Imported]:
    return _import(path, HCUA, screenshot_window)
