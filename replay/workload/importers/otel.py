"""OpenTelemetry GenAI spans (the published GenAI semantic conventions; OTLP-JSON and plain JSON span exports).

A model call is a span whose ``gen_ai.operation.name`` is ``chat``, ``text_completion`` or ``generate_content``, or
that carries ``gen_ai.input.messages`` (on the span, or on its ``gen_ai.client.inference.operation.details``
event). Its input is ``gen_ai.system_instructions`` (a system message) then ``gen_ai.input.messages``; its answer the
first of ``gen_ai.output.messages``. Messages are lists of parts: ``text``; ``tool_call`` (an assistant's call:
``id``, ``name``, ``arguments``); ``tool_call_response`` (a tool message per part: ``id``, ``response``, or
``result`` as the first published example wrote it); ``reasoning`` (dropped from inputs, an answer's reasoning);
``blob`` / ``uri`` of image modality (canonical image parts). Other parts (``file`` by provider id, server tool
calls, generic parts) cannot be sent again and are counted in ``source.parts_dropped``. Messages written in the
OpenAI chat shape (``content`` instead of ``parts``, as some instrumentations do) are read as such.

Containers: an OTLP-JSON document (``resourceSpans`` → ``scopeSpans`` → ``spans``, attributes as typed key/value
lists, 64-bit integers as strings, times in ``startTimeUnixNano``), one per line as the collector's file exporter
writes them, or spans as the SDKs' JSON exporters write them (``context.trace_id``, ``parent_id``, ISO
``start_time``/``end_time``, ``attributes`` as an object), as a list or one per line. Attribute values may be JSON
strings (the conventions allow it on spans) or structured.

Sessions: the chat spans sharing ``gen_ai.conversation.id``, else a trace id; in start order. Latency = the span's
duration; tool time = the next call's start − this call's end (``execute_tool`` spans between them are summed in
``recorded.tool_spans_s``). Usage: ``gen_ai.usage.input_tokens`` (the conventions count cached tokens in it),
``cache_read.input_tokens``, ``cache_creation.input_tokens``, ``output_tokens``, ``reasoning.output_tokens``.
A span without ``gen_ai.output.messages`` takes its answer from the next call's input (the assistant message at the
position after its own input), else a stand-in (``recorded.output_missing``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from replay.workload.importers._delta import Call, Imported, build_trajectory
from replay.workload.importers._messages import make_output
from replay.workload.importers._source import ImportFailure, Refused, Src, member, number, read_json
from replay.workload.importers.otel_messages import Converter, indexed, structured, tool_definitions

FORMAT = "otel"
CHAT_OPERATIONS = ("chat", "text_completion", "generate_content")
DETAILS_EVENT = "gen_ai.client.inference.operation.details"


@dataclass
class Span:
    trace_id: str
    span_id: str
    name: str
    start: float | None  # unix seconds
    end: float | None
    attributes: dict[str, Any]
    where: str  # for errors: "line N" or a JSON path


# --------------------------------------------------------------------------------------------- containers


def _otlp_value(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [_otlp_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return {kv.get("key"): _otlp_value(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values", [])}
    return None


def _attributes(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return dict(raw)
    if isinstance(raw, list):
        return {kv["key"]: _otlp_value(kv.get("value")) for kv in raw if isinstance(kv, dict) and "key" in kv}
    return {}


def _time(span: dict[str, Any], nano_key: str, iso_key: str) -> float | None:
    nanos = number(span.get(nano_key))
    if nanos is not None:
        return nanos / 1e9
    text = span.get(iso_key)
    if isinstance(text, str):
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return number(text)


def _span(raw: dict[str, Any], where: str) -> Span:
    context = member(raw, "context")
    attributes = _attributes(raw.get("attributes"))
    for event in raw.get("events") or ():  # content recorded on the details event instead of the span
        if isinstance(event, dict) and event.get("name") == DETAILS_EVENT:
            for key, value in _attributes(event.get("attributes")).items():
                attributes.setdefault(key, value)
    return Span(
        trace_id=str(raw.get("traceId") or context.get("trace_id") or raw.get("trace_id") or ""),
        span_id=str(raw.get("spanId") or context.get("span_id") or raw.get("span_id") or ""),
        name=str(raw.get("name") or ""),
        start=_time(raw, "startTimeUnixNano", "start_time"),
        end=_time(raw, "endTimeUnixNano", "end_time"),
        attributes=attributes,
        where=where,
    )


def _spans_of(doc: Any, where: str) -> Iterator[Span]:
    if isinstance(doc, dict) and isinstance(doc.get("resourceSpans"), list):
        for r, rs in enumerate(doc["resourceSpans"]):
            for s, ss in enumerate((rs or {}).get("scopeSpans") or (rs or {}).get("instrumentationLibrarySpans") or []):
                for k, raw in enumerate((ss or {}).get("spans") or []):
                    if isinstance(raw, dict):
                        yield _span(raw, f"{where}$.resourceSpans[{r}].scopeSpans[{s}].spans[{k}]")
    elif isinstance(doc, list):
        for k, raw in enumerate(doc):
            yield from _spans_of(raw, f"{where}$[{k}]")
    elif isinstance(doc, dict) and ("attributes" in doc and ("name" in doc or "context" in doc)):
        yield _span(doc, where)


def read_spans(path: Path) -> list[Span]:
    """Every span of the file, whichever container it uses."""
    try:
        docs = [(read_json(path), "")]
    except ImportFailure:  # JSON Lines
        docs = []
        for lineno, raw in enumerate(path.read_bytes().splitlines(), start=1):
            if raw.strip():
                try:
                    docs.append((orjson.loads(raw), f"line {lineno}: "))
                except orjson.JSONDecodeError as exc:
                    raise ImportFailure(path, str(lineno), f"not valid JSON ({exc})") from None
    return [span for doc, where in docs for span in _spans_of(doc, where)]


def is_chat(span: Span) -> bool:
    a = span.attributes
    return (
        a.get("gen_ai.operation.name") in CHAT_OPERATIONS
        or "gen_ai.input.messages" in a
        or a.get("llm.request.type") == "chat"
        or "gen_ai.prompt.0.role" in a
    )


def looks_like(doc: Any) -> bool:
    """Whether a parsed document or line is an OTel span export with GenAI spans (for detection)."""
    return any(span.attributes.get("gen_ai.operation.name") or is_chat(span) for span in _spans_of(doc, ""))


# --------------------------------------------------------------------------------------------- calls


def _usage(a: dict[str, Any]) -> dict[str, Any]:
    rec: dict[str, Any] = {}
    for key, name in (
        ("gen_ai.usage.prompt_tokens", "prompt_tokens"),  # OpenLLMetry's older names
        ("gen_ai.usage.completion_tokens", "output_tokens"),
        ("gen_ai.usage.cache_read_input_tokens", "cached_tokens"),
        ("gen_ai.usage.input_tokens", "prompt_tokens"),
        ("gen_ai.usage.cache_read.input_tokens", "cached_tokens"),
        ("gen_ai.usage.cache_creation.input_tokens", "cache_creation_tokens"),
        ("gen_ai.usage.output_tokens", "output_tokens"),
        ("gen_ai.usage.reasoning.output_tokens", "reasoning_tokens"),
    ):
        value = number(a.get(key))
        if value is not None:
            rec[name] = int(value)
    model = a.get("gen_ai.response.model") or a.get("gen_ai.request.model")
    if model:
        rec["model"] = str(model)
    return rec


def _call_input(span: Span, conv: Converter, src: Src) -> list[dict[str, Any]]:
    a = span.attributes
    legacy = indexed(a, "gen_ai.prompt") if "gen_ai.input.messages" not in a else None
    if legacy is not None:
        return conv.messages(legacy, f"{span.where} gen_ai.prompt")
    messages = conv.messages(
        structured(a.get("gen_ai.input.messages", []), src, span.where, "gen_ai.input.messages"),
        f"{span.where} gen_ai.input.messages",
    )
    system = a.get("gen_ai.system_instructions")
    if system is not None and not (messages and messages[0]["role"] == "system"):
        parts = structured(system, src, span.where, "gen_ai.system_instructions")
        text = conv.content(parts if isinstance(parts, list) else [{"type": "text", "content": str(parts)}])
        messages.insert(0, {"role": "system", "content": text})
    return messages


def _session_calls(spans: list[Span], tool_spans: list[Span], conv: Converter, src: Src) -> list[Call]:
    inputs = [_call_input(s, conv, src) for s in spans]
    calls = []
    for k, span in enumerate(spans):
        rec = _usage(span.attributes)
        if span.start is not None and span.end is not None:
            rec["latency_s"] = round(max(0.0, span.end - span.start), 6)
        if span.start is not None:
            rec["timestamp"] = span.start
        raw_out = span.attributes.get("gen_ai.output.messages")
        output = None
        legacy = indexed(span.attributes, "gen_ai.completion") if raw_out is None else None
        if legacy:
            first = conv.messages(legacy[:1], f"{span.where} gen_ai.completion")[0]
            output = make_output(first.get("content"), first.get("tool_calls"))
        if raw_out is not None:
            outs = structured(raw_out, src, span.where, "gen_ai.output.messages")
            choice = outs[0] if isinstance(outs, list) and outs and isinstance(outs[0], dict) else None
            if choice is not None:
                output = conv.output(src.expect(choice.get("parts"), list, f"{span.where} output parts", "a list"))
        nxt = spans[k + 1] if k + 1 < len(spans) else None
        if output is None and nxt is not None and len(inputs[k + 1]) > len(inputs[k]):
            after = inputs[k + 1][len(inputs[k])]
            if after["role"] == "assistant":
                output = make_output(after.get("content"), after.get("tool_calls"))
        if output is None:
            output, rec["output_missing"] = make_output(""), True
        tool_time = None
        if nxt is not None and span.end is not None and nxt.start is not None:
            tool_time = max(0.0, nxt.start - span.end)
            inside = [
                (t.start, t.end)
                for t in tool_spans
                if t.start is not None and t.end is not None and span.end <= t.start < nxt.start
            ]
            if inside:
                rec["tool_spans_s"] = round(sum(end - start for start, end in inside), 6)
        calls.append(Call(inputs[k], output, rec.get("output_tokens"), tool_time, rec))
    return calls


def import_file(path: Path) -> list[Imported]:
    src = Src(path)
    spans = read_spans(path)
    chats = [s for s in spans if is_chat(s)]
    if not chats:
        raise Refused(path, "", "no GenAI model-call span (gen_ai.operation.name chat, or gen_ai.input.messages)")
    tools_spans = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    groups: dict[str, list[Span]] = {}
    for s in sorted(chats, key=lambda s: (s.start is None, s.start or 0.0)):
        key = str(s.attributes.get("gen_ai.conversation.id") or f"trace-{s.trace_id}")
        groups.setdefault(key, []).append(s)
    stem = path.name.removesuffix(".jsonl").removesuffix(".json")
    out = []
    for key, group in groups.items():
        conv = Converter(src)
        same_trace = {s.trace_id for s in group}
        calls = _session_calls(group, [t for t in tools_spans if t.trace_id in same_trace], conv, src)
        source: dict[str, Any] = {
            "importer": FORMAT,
            "path": str(path),
            "input": "exact (gen_ai.system_instructions + gen_ai.input.messages)",
            "tool_time": "span gaps (next call's start - this call's end)",
            "grouping": "gen_ai.conversation.id" if not key.startswith("trace-") else "trace id",
        }
        if conv.dropped:
            source["parts_dropped"] = conv.dropped
        missing = sum(1 for c in calls if c.recorded.get("output_missing"))
        if missing:
            source["answers_missing"] = missing
        models = {c.recorded.get("model") for c in calls if c.recorded.get("model")}
        tools = next(
            (
                t
                for s in group
                if (
                    t := tool_definitions(
                        structured(s.attributes.get("gen_ai.tool.definitions"), src, s.where, "gen_ai.tool.definitions")
                    )
                )
            ),
            None,
        )
        out.append(
            build_trajectory(
                f"{FORMAT}/{stem}/{key}",
                calls,
                source=source,
                model=next(iter(models)) if len(models) == 1 else None,
                tools=tools,
            )
        )
    return out
