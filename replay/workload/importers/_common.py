"""Shared machinery of the importers: errors, message normalisation, the delta builder, time parsing.

Every importer reduces its source to a list of :class:`Call` (the exact input of one model call, its
recorded output, tool time and recorded figures) and hands it to :func:`build_trajectory`, which writes
the canonical delta log: per call, the messages to ``append`` to the previous input plus its output, or
``truncate_to`` the longest common prefix (in whole messages) first when the agent rewrote its history.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from replay.errors import ReplayError
from replay.workload.format_v1 import FORMAT_V1
from replay.workload.images import PLACEHOLDER, from_wire
from replay.workload.messages import message_tokens, output_as_message
from replay.workload.tokens import REPLY_PRIMING_TOKENS, count_tokens, get_tokenizer

# --------------------------------------------------------------------------------------------- errors


class ImportFailure(ReplayError, ValueError):
    """A source file that cannot be imported: names the file, the line (JSONL) or JSON path, and what was expected."""

    def __init__(self, path: str | Path, where: str, problem: str) -> None:
        self.path, self.where, self.problem = str(path), where, problem
        if not where:
            text = f"{path}: {problem}"
        elif where[0].isdigit():  # a line number (JSON Lines), optionally followed by a JSON path
            text = f"{path}:{where}: {problem}"
        else:  # a JSON path in a whole-file JSON document
            text = f"{path}: {where}: {problem}"
        super().__init__(text)


class Refused(ImportFailure):
    """A file that is understood but deliberately not imported (not a trajectory, nothing to replay...)."""


def describe(value: Any) -> str:
    """Short JSON rendering of a value for error messages."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Src:
    """Error context bound to one file (and optionally one JSONL line), so every error says where it is."""

    def __init__(self, path: str | Path, line: int = 0) -> None:
        self.path, self.line = str(path), line

    def at(self, line: int) -> Src:
        return Src(self.path, line)

    def fail(self, jpath: str, problem: str) -> ImportFailure:
        where = f"{self.line}: {jpath}" if self.line else jpath
        return ImportFailure(self.path, where, problem)

    def expect(self, value: Any, kinds: type | tuple[type, ...], jpath: str, what: str) -> Any:
        kinds_t = kinds if isinstance(kinds, tuple) else (kinds,)
        if not isinstance(value, kinds_t) or (isinstance(value, bool) and bool not in kinds_t):
            raise self.fail(jpath, f"expected {what}; got {describe(value)}")
        return value

    def get(self, obj: dict[str, Any], key: str, kinds: type | tuple[type, ...], jpath: str, what: str) -> Any:
        if key not in obj:
            raise self.fail(f"{jpath}.{key}", f"missing; expected {what}")
        return self.expect(obj[key], kinds, f"{jpath}.{key}", what)


# --------------------------------------------------------------------------------------------- reading


def read_json(path: Path, what: str = "") -> Any:
    """The whole file as one JSON document (``what``: the document expected, for the error)."""
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        expected = f"; expected {what}" if what else ""
        raise ImportFailure(path, "", f"not valid JSON ({exc}){expected}") from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, object) for every non-blank line; a bad line is an error naming it."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                yield lineno, orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise ImportFailure(path, str(lineno), f"not valid JSON ({exc})") from None


# --------------------------------------------------------------------------------------------- messages


def content_text(content: Any) -> str:
    """A message content as plain text: strings as they are, lists of parts joined (text parts only)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    out.append(part["text"])
                elif isinstance(part.get("content"), (str, list)):
                    out.append(content_text(part["content"]))
                elif part.get("type") in ("image", "image_url", "input_image"):
                    out.append("[image]")
        return "".join(out)
    return str(content)


def message_content(content: Any) -> str | list[dict[str, Any]]:
    """A message content as the canonical format keeps it: the plain text (``content_text``) when it has no image,
    else (or when it holds an image's placeholder text) a list of text and canonical image parts in their order
    (``replay.workload.images``: the API's image part of any flavour, an Anthropic or OTel one included, becomes
    ``{"type": "image", "url": ...}``)."""
    if not isinstance(content, list) or not any(_image_of(p) is not None or _placeholder(p) for p in content):
        return content_text(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        image = _image_of(part)
        if image is not None:
            parts.append(image)
            continue
        text = content_text([part])
        if text:  # each text part stays a part: a screenshot's placeholder keeps its place (images.window)
            parts.append({"type": "text", "text": text})
    return parts


def _placeholder(part: Any) -> bool:
    """The text a computer-use agent left where it dropped a screenshot: kept as a part of its own, in its place."""
    return isinstance(part, dict) and part.get("type") == "text" and str(part.get("text", "")).strip() == PLACEHOLDER


def _image_of(part: Any) -> dict[str, Any] | None:
    image = from_wire(part)
    if image is None and isinstance(part, dict) and part.get("type") == "image" and isinstance(part.get("url"), str):
        image = part  # already canonical
    return image


def tool_calls(calls: Any, src: Src, jpath: str) -> list[dict[str, Any]]:
    """OpenAI-shaped tool calls (id, type, function name/arguments as a JSON string), extra keys dropped."""
    src.expect(calls, list, jpath, "a list of tool calls")
    out = []
    for i, call in enumerate(calls):
        src.expect(call, dict, f"{jpath}[{i}]", "a tool call object")
        fn = call.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise src.fail(f"{jpath}[{i}].function.name", f"expected a string; got {describe(fn)}")
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = orjson.dumps(args).decode()
        out.append(
            {
                "id": str(call.get("id") or f"call_{i}"),
                "type": "function",
                "function": {"name": fn["name"], "arguments": args},
            }
        )
    return out


def make_output(content: Any, calls: list[dict[str, Any]] | None = None, reasoning: str | None = None) -> dict:
    """A canonical ``output`` object."""
    out: dict[str, Any] = {"content": content_text(content)}
    if reasoning:
        out["reasoning"] = reasoning
    if calls:
        out["tool_calls"] = calls
    return out


def assistant_message(output: dict[str, Any]) -> dict[str, Any]:
    """The assistant message an output becomes in the context, exactly as the loader builds it."""
    return output_as_message(output)


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": message_content(content)}


def system(content: Any) -> dict[str, Any]:
    return {"role": "system", "content": content_text(content)}


def tool_result(call_id: str | None, content: Any) -> dict[str, Any]:
    """A tool message when the source used native tool calls (an id), else a user message."""
    if call_id:
        return {"role": "tool", "tool_call_id": call_id, "content": message_content(content)}
    return user(content)


def output_token_count(output: dict[str, Any]) -> int:
    """cl100k count of an output (content, reasoning, tool calls), at least 1."""
    tok = get_tokenizer()
    n = count_tokens(output.get("content") or "", tok) + count_tokens(output.get("reasoning") or "", tok)
    for call in output.get("tool_calls") or ():
        fn = call["function"]
        n += count_tokens(fn["name"] + fn["arguments"], tok)
    return max(1, n)


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """The loader's estimate of a request's prompt tokens (for checks and block-trace fitting)."""
    tok = get_tokenizer()
    return sum(message_tokens(m, tok) for m in messages) + REPLY_PRIMING_TOKENS


def prompt_estimates(inputs: list[list[dict[str, Any]]]) -> list[int]:
    """The loader's prompt estimate of each input, counting each message object once (inputs share them)."""
    tok = get_tokenizer()
    counted: dict[int, int] = {}
    out = []
    for messages in inputs:
        total = REPLY_PRIMING_TOKENS
        for m in messages:
            n = counted.get(id(m))
            if n is None:
                n = counted[id(m)] = message_tokens(m, tok)
            total += n
        out.append(total)
    return out


# --------------------------------------------------------------------------------------------- time


def parse_time(value: Any) -> datetime | float | None:
    """ISO-8601 string → datetime (aware if it carries a zone); number → unix seconds (ms if huge)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        v = float(value)
        return v / 1000.0 if v > 1e11 else v
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            return float(text)
        except ValueError:
            pass
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def seconds_between(a: datetime | float | None, b: datetime | float | None) -> float | None:
    """b − a in seconds, or None when either is missing or they are of different kinds."""
    if a is None or b is None:
        return None
    if isinstance(a, datetime) and isinstance(b, datetime):
        if (a.tzinfo is None) != (b.tzinfo is None):
            return None
        return (b - a).total_seconds()
    if isinstance(a, float) and isinstance(b, float):
        return b - a
    return None


def unix_seconds(t: datetime | float | None) -> float | None:
    """Unix seconds for a zone-aware datetime or a number; None for naive local times."""
    if isinstance(t, float):
        return t
    if isinstance(t, datetime) and t.tzinfo is not None:
        return t.timestamp()
    return None


def member(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` when it is an object, else an empty one (absent, null or of another type)."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def number(value: Any) -> float | None:
    """A float from a number or a numeric string (SWE-agent writes some as strings), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        v = float(value)
    elif isinstance(value, str):
        try:
            v = float(value)
        except ValueError:
            return None
    else:
        return None
    return v if math.isfinite(v) else None


# --------------------------------------------------------------------------------------------- building


@dataclass
class Call:
    """One model call as recorded: its exact input, its output, and what happened after it."""

    input: list[dict[str, Any]]
    output: dict[str, Any]
    output_tokens: int | None = None  # recorded completion tokens; None: count the output
    tool_time_s: float | None = None  # None: not recorded
    recorded: dict[str, Any] = field(default_factory=dict)
    spawn: list[str] = field(default_factory=list)  # ids of subagent trajectories started after this call


@dataclass
class Imported:
    """One canonical trajectory: header object and turn objects, ready to be written as JSON Lines."""

    header: dict[str, Any]
    turns: list[dict[str, Any]]

    @property
    def id(self) -> str:
        return self.header["id"]

    def lines(self) -> Iterator[bytes]:
        yield orjson.dumps(self.header)
        for t in self.turns:
            yield orjson.dumps(t)


def common_prefix(a: list[Any], b: list[Any]) -> int:
    """Number of leading items (messages, blocks) equal in both lists."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class PrefixSessions:
    """Sessions found by prefix extension, for logs that do not say which session a request belongs to.

    Each session expects its next request to start with a known prefix (its last request, and the answer
    where the log has one). A request continues the session whose expected prefix is the longest prefix of
    it; each expectation is met once. Prefixes are found by a rolling hash of ``item_key`` per item, and
    confirmed item by item.
    """

    def __init__(self, item_key: Callable[[Any], Any]) -> None:
        self._item_key = item_key
        self._open: dict[tuple[int, int], int] = {}  # (prefix length, rolling hash) -> session
        self._expected: dict[int, tuple[tuple[int, int], list[Any]]] = {}  # session -> its key and prefix

    def _keys(self, items: list[Any]) -> list[tuple[int, int]]:
        keys = []
        h = 0
        for i, item in enumerate(items):
            h = hash((h, self._item_key(item)))
            keys.append((i + 1, h))
        return keys

    def match(self, items: list[Any]) -> int | None:
        """The session this request continues (its expectation is used up), or None for a new one."""
        for key in reversed(self._keys(items)):
            sid = self._open.get(key)
            if sid is not None and self._expected[sid][1] == items[: key[0]]:
                del self._open[key]
                return sid
        return None

    def expect(self, session: int, items: list[Any]) -> None:
        """``session``'s next request should start with ``items`` (nothing is expected of an empty list)."""
        if items:
            key = self._keys(items)[-1]
            self._open[key] = session
            self._expected[session] = (key, items)


def build_trajectory(
    traj_id: str,
    calls: list[Call],
    *,
    source: dict[str, Any],
    model: str | None = None,
    tools: list[dict[str, Any]] | None = None,
    subagent: bool = False,
) -> Imported:
    """Canonical trajectory from calls: each call's input as a delta against previous input + output."""
    if not calls:
        raise ValueError(f"{traj_id}: no model calls")
    source = dict(source)
    if all(c.tool_time_s is None for c in calls) and "tool_time" not in source:
        source["tool_time"] = "none recorded"
    header: dict[str, Any] = {"format": FORMAT_V1, "id": traj_id}
    if model:
        header["model"] = model
    header["source"] = source
    if tools:
        header["tools"] = tools
    if subagent:
        header["subagent"] = True
    turns: list[dict[str, Any]] = []
    prev: list[dict[str, Any]] | None = None
    for i, call in enumerate(calls):
        if not call.input:
            raise ValueError(f"{traj_id}: call {i} has no input messages")
        turn: dict[str, Any] = {}
        if prev is None:
            turn["append"] = call.input
        else:
            n = common_prefix(prev, call.input)
            if n < len(prev):
                turn["truncate_to"] = n
            turn["append"] = call.input[n:]
        turn["output"] = call.output
        turn["output_tokens"] = int(call.output_tokens) if call.output_tokens else output_token_count(call.output)
        last = i == len(calls) - 1
        tt = call.tool_time_s if call.tool_time_s is not None else 0.0
        turn["tool_time_s"] = 0.0 if last and not call.spawn else round(max(0.0, tt), 6)
        rec = {k: v for k, v in call.recorded.items() if v is not None}
        if rec:
            turn["recorded"] = rec
        if call.spawn:
            turn["spawn"] = [{"trajectory": s, "fork": False} for s in call.spawn]
        turns.append(turn)
        prev = [*call.input, assistant_message(call.output)]
    return Imported(header=header, turns=turns)


def usage_figures(usage: Any) -> dict[str, Any]:
    """Recorded figures from an OpenAI- or Anthropic-style usage object (keys of docs/trajectory-format.md)."""
    if not isinstance(usage, dict):
        return {}
    rec: dict[str, Any] = {}
    if "input_tokens" in usage and "prompt_tokens" not in usage:  # Anthropic: input is the uncached part
        read = int(usage.get("cache_read_input_tokens") or 0)
        created = int(usage.get("cache_creation_input_tokens") or 0)
        rec["prompt_tokens"] = int(usage.get("input_tokens") or 0) + read + created
        rec["cached_tokens"] = read
        rec["cache_creation_tokens"] = created
        if usage.get("output_tokens") is not None:
            rec["output_tokens"] = int(usage["output_tokens"])
        return rec
    if usage.get("prompt_tokens") is not None:
        rec["prompt_tokens"] = int(usage["prompt_tokens"])
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is None:
        cached = usage.get("cache_read_input_tokens", usage.get("cache_read_tokens"))
    if cached is not None:
        rec["cached_tokens"] = int(cached)
    written = usage.get("cache_creation_input_tokens", usage.get("cache_write_tokens"))
    if written:
        rec["cache_creation_tokens"] = int(written)
    if usage.get("completion_tokens") is not None:
        rec["output_tokens"] = int(usage["completion_tokens"])
    cdetails = usage.get("completion_tokens_details") or {}
    if isinstance(cdetails, dict) and cdetails.get("reasoning_tokens") is not None:
        rec["reasoning_tokens"] = int(cdetails["reasoning_tokens"])
    return rec
