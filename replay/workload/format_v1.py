"""The trajectory format v1 (docs/trajectory-format.md): its values, its checks, and a line read into them.

``Trajectory``, ``Turn`` and ``Spawn`` are what a header and its turn lines become; ``TrajectoryError`` names the
file, line and field of bad input. A header line is read by ``parse_header``, a turn line by ``parse_turn`` (every
field checked, each message rendered, serialised and counted once); ``annotate`` gives each turn of a complete
trajectory its estimated prompt size and reusable prefix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from replay import compact_json
from replay.errors import ReplayError
from replay.workload.images import is_image
from replay.workload.messages import CountedContext, Message, MessageBuilder

FORMAT_V1 = "replay.trajectory/1"
ROLES = ("system", "user", "assistant", "tool")


MAX_TOOL_TIME_S = 86_400.0  # a recorded pause longer than a day is refused at load
# The answer length sent to the host as max_tokens: no model answers a million tokens in one call (the largest output
# limits are a few hundred thousand); 2^63 once went out and the call waited out the request timeout.
MAX_OUTPUT_TOKENS = 1 << 20


class TrajectoryError(ReplayError, ValueError):
    """Bad trajectory input, with the file, line and field it concerns."""

    def __init__(self, path: str, line: int, field_name: str, problem: str) -> None:
        self.path, self.line, self.field, self.problem = path, line, field_name, problem
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: field '{field_name}': {problem}" if field_name else f"{where}: {problem}")


@dataclass(frozen=True, slots=True)
class Spawn:
    """A subagent started after a call: fresh context, or forked from the parent's."""

    trajectory: str
    fork: bool = False


@dataclass(slots=True)
class Turn:
    """One model call of a trajectory."""

    index: int
    append: list[Message]
    truncate_to: int | None
    output_message: Message  # the recorded answer as it is appended to the context
    output_tokens: int
    tool_time_s: float
    recorded: dict[str, Any] | None
    spawn: tuple[Spawn, ...] = ()
    output_json: bytes = b"{}"  # the recorded output as it was in the file (kept as bytes: see Message)
    line: int = 0  # where the turn is in its file, for errors found after parsing
    prompt_tokens_est: int = 0  # client-side estimate of the request's prompt tokens
    reusable_prefix_tokens: int = 0  # exact prefix shared with previous request + its output
    context_len: int = 0  # number of messages in this turn's request

    @property
    def output(self) -> dict[str, Any]:
        """The recorded output: content, reasoning, tool calls."""
        return orjson.loads(self.output_json)

    @property
    def output_tool_calls(self) -> list[dict[str, Any]] | None:
        """The recorded tool calls (a live answer keeps them: the recorded tool results answer them)."""
        return self.output.get("tool_calls") or None if b'"tool_calls"' in self.output_json else None


@dataclass(slots=True)
class Trajectory:
    """One recorded agent session."""

    id: str
    turns: list[Turn]
    model: str | None = None
    tools: list[dict[str, Any]] | None = None
    source: dict[str, Any] = field(default_factory=dict)
    origin: str = ""  # "path:line" of the header
    subagent: bool = False  # runs only when spawned, never as a task of its own
    digest: bytes = b""  # sha256 of what it holds (workload/fingerprint.py): the workload's fingerprint's part


# ---------------------------------------------------------------------------------------------- validation


_PLAIN = frozenset({str, int, float, list, dict})  # JSON's types but bool, which ``check`` looks at closer


class Checker:
    """Validation helpers bound to one file and line, so every error says where it is."""

    def __init__(self, path: str, line: int, prefix: str = "") -> None:
        self.path, self.line, self.prefix = path, line, prefix

    def fail(self, name: str, problem: str) -> TrajectoryError:
        return TrajectoryError(self.path, self.line, self.prefix + name, problem)

    def require(self, obj: dict[str, Any], name: str, kinds: type | tuple[type, ...], what: str) -> Any:
        if name not in obj:
            raise self.fail(name, f"missing; expected {what}")
        value = obj[name]
        if type(value) in _PLAIN and isinstance(value, kinds):  # most fields: no second call to ``check``
            return value
        return self.check(value, name, kinds, what)

    def check(self, value: Any, name: str, kinds: type | tuple[type, ...], what: str) -> Any:
        if isinstance(value, kinds) and (
            type(value) is not bool or bool in (kinds if type(kinds) is tuple else (kinds,))
        ):
            return value  # a bool is an int to isinstance: it passes only where bool is asked for
        raise self.fail(name, f"expected {what}; got {describe(value)}")


def describe(value: Any) -> str:
    text = orjson.dumps(value).decode() if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_message(c: Checker, msg: Any, name: str) -> dict[str, Any]:
    c.check(msg, name, dict, "a message object")
    role = msg.get("role")
    if role not in ROLES:
        raise c.fail(f"{name}.role", f"expected one of {', '.join(ROLES)}; got {describe(role)}")
    content = msg.get("content", None)
    if content is None:
        if not (role == "assistant" and msg.get("tool_calls")):
            raise c.fail(f"{name}.content", "missing; expected a string (null only with tool_calls)")
    elif isinstance(content, list):
        for i, part in enumerate(content):
            if not isinstance(part, dict):
                raise c.fail(f"{name}.content[{i}]", f"expected a content part object; got {describe(part)}")
            if "text" in part and not isinstance(part["text"], str):
                raise c.fail(f"{name}.content[{i}].text", f"expected a string; got {describe(part['text'])}")
            if is_image(part):
                _check_image(c, part, f"{name}.content[{i}]")
    elif not isinstance(content, str):
        raise c.fail(f"{name}.content", f"expected a string or a list of parts; got {describe(content)}")
    if "tool_calls" in msg:
        _check_tool_calls(c, msg["tool_calls"], f"{name}.tool_calls")
    return msg


def _check_image(c: Checker, part: dict[str, Any], name: str) -> None:
    if not isinstance(part.get("url"), str) or not part["url"]:
        raise c.fail(f"{name}.url", f"expected a data: URL or an address; got {describe(part.get('url'))}")
    for key in ("width", "height", "bytes"):
        value = part.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise c.fail(f"{name}.{key}", f"expected a positive integer; got {describe(value)}")


def _check_tool_calls(c: Checker, calls: Any, name: str) -> None:
    c.check(calls, name, list, "a list of tool calls")
    for i, call in enumerate(calls):
        c.check(call, f"{name}[{i}]", dict, "a tool call object")
        fn = call.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise c.fail(f"{name}[{i}].function.name", "expected a string")
        if not isinstance(fn.get("arguments", ""), str):
            raise c.fail(f"{name}[{i}].function.arguments", "expected a JSON string")


# ---------------------------------------------------------------------------------------------- parsing


def annotate(traj: Trajectory, path: str, lines: list[int]) -> None:
    """Per-turn prompt size and reusable prefix, from per-message counts (no re-tokenising)."""
    context = CountedContext()
    for turn, line in zip(traj.turns, lines, strict=True):
        if turn.truncate_to is not None:
            if turn.truncate_to > len(context):
                raise TrajectoryError(
                    path,
                    line,
                    "truncate_to",
                    f"expected at most {len(context)} (the context length at this turn); got {turn.truncate_to}",
                )
            context.truncate(turn.truncate_to)
        turn.reusable_prefix_tokens = context.tokens
        context.extend(turn.append)
        if not context:
            raise TrajectoryError(path, line, "append", "the request would have no messages")
        turn.context_len = len(context)
        turn.prompt_tokens_est = context.prompt_tokens
        context.extend((turn.output_message,))


def parse_turn(c: Checker, obj: Any, index: int, build: MessageBuilder) -> Turn:
    c.check(obj, "turn", dict, "a turn object")
    truncate_to = obj.get("truncate_to")
    if truncate_to is not None:
        c.check(truncate_to, "truncate_to", int, "a non-negative integer")
        if truncate_to < 0:
            raise c.fail("truncate_to", f"expected a non-negative integer; got {truncate_to}")
    append = obj.get("append", [] if truncate_to is not None else None)
    if append is None:
        raise c.fail("append", "missing; expected a list of messages")
    c.check(append, "append", list, "a list of messages")
    messages = [build.message(_check_message(c, m, f"append[{i}]")) for i, m in enumerate(append)]
    output = c.require(obj, "output", dict, "an object with content / reasoning / tool_calls")
    for key in ("content", "reasoning"):
        if output.get(key) is not None and not isinstance(output[key], str):
            raise c.fail(f"output.{key}", f"expected a string; got {describe(output[key])}")
    if "tool_calls" in output:
        _check_tool_calls(c, output["tool_calls"], "output.tool_calls")
    output_tokens = c.require(obj, "output_tokens", int, "a positive integer")
    if output_tokens < 1:
        raise c.fail("output_tokens", f"expected a positive integer; got {output_tokens}")
    if output_tokens > MAX_OUTPUT_TOKENS:  # sent as max_tokens: bounded before any host sees it
        raise c.fail("output_tokens", f"{output_tokens} is more than {MAX_OUTPUT_TOKENS:,} tokens, no model's answer"
                                      " (it is sent as max_tokens): cut it in the file")  # fmt: skip
    tool_time_s = c.require(obj, "tool_time_s", (int, float), "a number of seconds >= 0")
    if tool_time_s < 0:
        raise c.fail("tool_time_s", f"expected a number of seconds >= 0; got {tool_time_s}")
    if tool_time_s > MAX_TOOL_TIME_S:  # 1e10 s once slept for ever: no tool (nor a night away) takes over a day
        raise c.fail("tool_time_s", f"{tool_time_s:g} s is more than a day ({MAX_TOOL_TIME_S:g} s): no tool's pause;"
                                    " cut it in the file")  # fmt: skip
    recorded = obj.get("recorded")
    if recorded is not None:
        c.check(recorded, "recorded", dict, "an object")
    spawn = []
    for i, ref in enumerate(c.check(obj.get("spawn", []), "spawn", list, "a list of subagent references")):
        c.check(ref, f"spawn[{i}]", dict, 'an object {"trajectory": id, "fork": bool}')
        child = ref.get("trajectory")
        if not isinstance(child, str) or not child:
            raise c.fail(f"spawn[{i}].trajectory", f"expected the id of a subagent trajectory; got {describe(child)}")
        fork = ref.get("fork", False)
        if not isinstance(fork, bool):
            raise c.fail(f"spawn[{i}].fork", f"expected true or false; got {describe(fork)}")
        spawn.append(Spawn(child, fork))
    return Turn(
        index=index,
        append=messages,
        truncate_to=truncate_to,
        output_message=build.output(output),
        output_tokens=output_tokens,
        tool_time_s=float(tool_time_s),
        recorded=recorded,
        spawn=tuple(spawn),
        line=c.line,
        output_json=compact_json.dumps(output),
    )


def parse_header(c: Checker, obj: dict[str, Any], build: MessageBuilder) -> Trajectory:
    fmt = obj.get("format")
    if fmt != FORMAT_V1:
        raise c.fail("format", f"expected {FORMAT_V1!r}; got {describe(fmt)}")
    traj_id = c.require(obj, "id", str, "a non-empty string")
    if not traj_id:
        raise c.fail("id", "expected a non-empty string")
    tools = obj.get("tools")
    if tools is not None:
        c.check(tools, "tools", list, "a list of tool schemas")
    model = obj.get("model")
    if model is not None:
        c.check(model, "model", str, "a string")
    source = obj.get("source") or {}
    c.check(source, "source", dict, "an object")
    subagent = obj.get("subagent", False)
    c.check(subagent, "subagent", bool, "true or false")
    return Trajectory(
        id=traj_id,
        turns=[],
        model=model,
        tools=tools,
        source=source,
        origin=f"{c.path}:{c.line}",
        subagent=subagent,
    )
