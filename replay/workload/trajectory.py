"""Trajectories: load, validate and pre-count recorded agent sessions (format v1).

Everything expensive happens here, once, before any request is sent: validation (so bad input fails
before the first byte goes out), tokenisation of each message exactly once, and the per-turn
client-side figures (estimated prompt size, reusable prefix). The replay hot path only joins
pre-serialised message bytes.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from replay import compact_json
from replay.errors import ReplayError
from replay.workload.fingerprint import recorded, trajectory_digest, workload_fingerprint
from replay.workload.history import HistoryPolicy, content_text
from replay.workload.images import chat_images, content_image_tokens, is_image, with_image_sizes
from replay.workload.padding import MODES, PadCount, pad_turns
from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, Tokenizer, get_tokenizer

FORMAT_V1 = "replay.trajectory/1"
ROLES = ("system", "user", "assistant", "tool")


MAX_TOOL_TIME_S = 86_400.0  # a recorded pause longer than a day is refused at load


class TrajectoryError(ReplayError, ValueError):
    """Bad trajectory input, with the file, line and field it concerns."""

    def __init__(self, path: str, line: int, field_name: str, problem: str) -> None:
        self.path, self.line, self.field, self.problem = path, line, field_name, problem
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: field '{field_name}': {problem}" if field_name else f"{where}: {problem}")


class Message:
    """One chat message, pre-serialised for the wire and pre-counted.

    Only the bytes are kept (a long trajectory holds millions of messages): ``raw``, the message as a dict, is
    decoded from them when asked for, which happens once per message and flavour (its fragment is then kept in
    ``rendered``), never per request.
    """

    __slots__ = ("rendered", "role", "tokens", "wire")

    def __init__(self, wire: bytes, tokens: int, raw: dict[str, Any] | None = None, role: str | None = None) -> None:
        self.wire = wire  # orjson bytes of the message (OpenAI chat shaped): chat bodies are joins of these
        self.tokens = tokens  # content + tool-call tokens + per-message framing
        self.role = sys.intern(role if role is not None else str((raw or {}).get("role", "")))
        # This message in other API flavours, rendered when first sent: bytes, or pieces sharing a long text with wire.
        self.rendered: dict[str, bytes | tuple[bytes | memoryview, ...]] | None = None

    @property
    def raw(self) -> dict[str, Any]:
        return orjson.loads(self.wire)

    def __repr__(self) -> str:
        return f"Message({self.wire[:60]!r}..., tokens={self.tokens})"


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


@dataclass(slots=True)
class Workload:
    """A set of trajectories plus a digest that identifies exactly which bytes were loaded."""

    trajectories: list[Trajectory]
    paths: list[str]
    digest: str  # sha256 over the files' bytes, in load order
    tokenizer: str
    builder: MessageBuilder | None = None  # how messages were rendered; sessions use it for live answers
    unrecorded_context: str = "omit"  # pad | omit: whether the context recordings left out was put back
    padding: PadCount = field(default_factory=PadCount)  # what padding added (all zero with omit)
    fingerprint: str = ""  # the corpus: its content, whatever the files or their order (workload/fingerprint.py)

    @property
    def images(self) -> int:
        """Image parts the turns append (sent as image parts: the API flavour must take them)."""
        return sum(
            m.wire.count(b'"type":"image_url"') for t in self.trajectories for turn in t.turns for m in turn.append
        )

    @property
    def turns(self) -> int:
        return sum(len(t.turns) for t in self.trajectories)

    @property
    def tasks(self) -> list[Trajectory]:
        """The trajectories a run takes as tasks (subagents run only when spawned)."""
        return [t for t in self.trajectories if not t.subagent]

    def by_id(self) -> dict[str, Trajectory]:
        return {t.id: t for t in self.trajectories}


# ---------------------------------------------------------------------------------------------- validation


class _Checker:
    """Validation helpers bound to one file and line, so every error says where it is."""

    def __init__(self, path: str, line: int, prefix: str = "") -> None:
        self.path, self.line, self.prefix = path, line, prefix

    def fail(self, name: str, problem: str) -> TrajectoryError:
        return TrajectoryError(self.path, self.line, self.prefix + name, problem)

    def require(self, obj: dict[str, Any], name: str, kinds: type | tuple[type, ...], what: str) -> Any:
        if name not in obj:
            raise self.fail(name, f"missing; expected {what}")
        return self.check(obj[name], name, kinds, what)

    def check(self, value: Any, name: str, kinds: type | tuple[type, ...], what: str) -> Any:
        bad_bool = isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,))
        if not isinstance(value, kinds) or bad_bool:
            raise self.fail(name, f"expected {what}; got {_describe(value)}")
        return value


def _describe(value: Any) -> str:
    text = orjson.dumps(value).decode() if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_message(c: _Checker, msg: Any, name: str) -> dict[str, Any]:
    c.check(msg, name, dict, "a message object")
    role = msg.get("role")
    if role not in ROLES:
        raise c.fail(f"{name}.role", f"expected one of {', '.join(ROLES)}; got {_describe(role)}")
    content = msg.get("content", None)
    if content is None:
        if not (role == "assistant" and msg.get("tool_calls")):
            raise c.fail(f"{name}.content", "missing; expected a string (null only with tool_calls)")
    elif isinstance(content, list):
        for i, part in enumerate(content):
            if not isinstance(part, dict):
                raise c.fail(f"{name}.content[{i}]", f"expected a content part object; got {_describe(part)}")
            if "text" in part and not isinstance(part["text"], str):
                raise c.fail(f"{name}.content[{i}].text", f"expected a string; got {_describe(part['text'])}")
            if is_image(part):
                _check_image(c, part, f"{name}.content[{i}]")
    elif not isinstance(content, str):
        raise c.fail(f"{name}.content", f"expected a string or a list of parts; got {_describe(content)}")
    if "tool_calls" in msg:
        _check_tool_calls(c, msg["tool_calls"], f"{name}.tool_calls")
    return msg


def _check_image(c: _Checker, part: dict[str, Any], name: str) -> None:
    if not isinstance(part.get("url"), str) or not part["url"]:
        raise c.fail(f"{name}.url", f"expected a data: URL or an address; got {_describe(part.get('url'))}")
    for key in ("width", "height", "bytes"):
        value = part.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise c.fail(f"{name}.{key}", f"expected a positive integer; got {_describe(value)}")


def _check_tool_calls(c: _Checker, calls: Any, name: str) -> None:
    c.check(calls, name, list, "a list of tool calls")
    for i, call in enumerate(calls):
        c.check(call, f"{name}[{i}]", dict, "a tool call object")
        fn = call.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise c.fail(f"{name}[{i}].function.name", "expected a string")
        if not isinstance(fn.get("arguments", ""), str):
            raise c.fail(f"{name}[{i}].function.arguments", "expected a JSON string")


# ---------------------------------------------------------------------------------------------- counting


def message_tokens(msg: dict[str, Any], tokenizer: Tokenizer) -> int:
    """Tokens one message adds to a prompt: content (images by their estimate, docs/trajectory-format.md), reasoning
    sent back, tool calls and framing."""
    content = msg.get("content")
    n = len(tokenizer.encode(content_text(content))) + content_image_tokens(content)
    if msg.get("reasoning_content"):
        n += len(tokenizer.encode(msg["reasoning_content"]))
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") or {}
        n += len(tokenizer.encode(fn.get("name", "") + fn.get("arguments", "")))
    return n + MESSAGE_OVERHEAD_TOKENS


@dataclass(frozen=True, slots=True)
class MessageBuilder:
    """Renders messages under a history policy, then serialises and counts them once."""

    tokenizer: Tokenizer
    policy: HistoryPolicy = field(default_factory=HistoryPolicy)

    def message(self, raw: dict[str, Any]) -> Message:
        wire = self.policy.render(with_image_sizes(raw))
        tokens = message_tokens(wire, self.tokenizer)  # images counted from their sizes, before they become chat parts
        return Message(compact_json.dumps(chat_images(wire)), tokens, role=wire.get("role", ""))

    def output(self, output: dict[str, Any]) -> Message:
        wire = self.policy.output_message(output)
        return Message(compact_json.dumps(wire), message_tokens(wire, self.tokenizer), role=wire.get("role", ""))

    @property
    def renders_as_recorded(self) -> bool:
        """Whether a message's wire bytes are the recorded message's (the policy renders appended messages as they
        are unless it flattens tool calls into text)."""
        return self.policy.tool_calls == "native"

    def recorded_bytes(self, raw: dict[str, Any]) -> bytes:
        """The bytes ``message`` makes of ``raw`` under the default policy (for the fingerprint, where the wire's
        differ: a flattened or padded message)."""
        return orjson.dumps(chat_images(with_image_sizes(raw)))


def output_as_message(output: dict[str, Any]) -> dict[str, Any]:
    """The assistant message a recorded output becomes in the context under the default policy."""
    return HistoryPolicy().output_message(output)


class CountedContext:
    """A conversation with running token sums, so prompt size and reusable prefix need no re-tokenising.

    After a truncation, what is left is, message for message, the previous request plus its output: its
    tokens are the next request's reusable prefix. The loader and the sessions both count with this.
    """

    def __init__(self, base: Iterable[Message] = ()) -> None:
        self.messages: list[Message] = []
        self._sums = [0]  # _sums[i] = tokens of messages[:i]
        self.extend(base)

    def __len__(self) -> int:
        return len(self.messages)

    @property
    def tokens(self) -> int:
        return self._sums[-1]

    @property
    def prompt_tokens(self) -> int:
        """The estimated prompt of a request made of these messages."""
        return self._sums[-1] + REPLY_PRIMING_TOKENS

    def truncate(self, keep: int) -> None:
        del self.messages[keep:]
        del self._sums[keep + 1 :]

    def extend(self, messages: Iterable[Message]) -> None:
        for m in messages:
            self.messages.append(m)
            self._sums.append(self._sums[-1] + m.tokens)


def _annotate(traj: Trajectory, path: str, lines: list[int]) -> None:
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


# ---------------------------------------------------------------------------------------------- parsing


def _parse_turn(c: _Checker, obj: Any, index: int, build: MessageBuilder) -> Turn:
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
            raise c.fail(f"output.{key}", f"expected a string; got {_describe(output[key])}")
    if "tool_calls" in output:
        _check_tool_calls(c, output["tool_calls"], "output.tool_calls")
    output_tokens = c.require(obj, "output_tokens", int, "a positive integer")
    if output_tokens < 1:
        raise c.fail("output_tokens", f"expected a positive integer; got {output_tokens}")
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
            raise c.fail(f"spawn[{i}].trajectory", f"expected the id of a subagent trajectory; got {_describe(child)}")
        fork = ref.get("fork", False)
        if not isinstance(fork, bool):
            raise c.fail(f"spawn[{i}].fork", f"expected true or false; got {_describe(fork)}")
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


def _parse_header(c: _Checker, obj: dict[str, Any], build: MessageBuilder) -> Trajectory:
    fmt = obj.get("format")
    if fmt != FORMAT_V1:
        raise c.fail("format", f"expected {FORMAT_V1!r}; got {_describe(fmt)}")
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


def parse_lines(
    path: str, lines: Iterable[bytes], build: MessageBuilder, pad: PadCount | None = None
) -> Iterator[Trajectory]:
    """Parse the JSON Lines of one file into trajectories; raise TrajectoryError on the first problem. With ``pad``
    (``--unrecorded-context pad``), the context a recording left out is put back first (``padding``) and counted."""
    current: Trajectory | None = None
    pending: list[tuple[_Checker, Any]] = []  # the current trajectory's turns, parsed when it is complete

    def finish() -> Trajectory:
        assert current is not None
        if not pending:
            raise TrajectoryError(path, int(current.origin.rsplit(":", 1)[1]), "", "trajectory has no turns")
        objs = [obj for _, obj in pending]
        # the turns as recorded, before padding changes them (for the fingerprint; a bad turn is refused below)
        as_recorded = [(o.get("truncate_to"), list(a) if isinstance(a := o.get("append"), list) else [])
                       if isinstance(o, dict) else (None, []) for o in objs]  # fmt: skip
        added = None
        if pad is not None and all(isinstance(o, dict) and isinstance(o.get("append", []), list) for o in objs):
            added = pad_turns(objs, current.model, current.id, build.tokenizer)
        for c, obj in pending:
            current.turns.append(_parse_turn(c, obj, len(current.turns), build))
        _annotate(current, path, [c.line for c, _ in pending])
        messages = [
            recorded(build, obj.get("append") or (), [m.wire for m in turn.append], rec[1])
            for turn, obj, rec in zip(current.turns, objs, as_recorded, strict=True)
        ]
        current.digest = trajectory_digest(current, messages, [rec[0] for rec in as_recorded])
        if added is not None and added.trajectories:
            added.prompt_tokens = sum(t.prompt_tokens_est for t in current.turns)
            current.source = {**current.source, "padded": added.public("pad")}
            assert pad is not None
            pad.add(added)
        return current

    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise TrajectoryError(path, lineno, "", f"not valid JSON ({exc})") from None
        c = _Checker(path, lineno)
        if not isinstance(obj, dict):
            raise c.fail("", f"expected a JSON object; got {_describe(obj)}")
        if "format" in obj:
            if current is not None:
                yield finish()
            current, pending = _parse_header(c, obj, build), []
            nested = obj.get("turns")
            if nested is not None:
                c.check(nested, "turns", list, "a list of turns")
                pending = [(_Checker(path, lineno, f"turns[{i}]."), t) for i, t in enumerate(nested)]
            continue
        if current is None:
            raise c.fail(
                "format",
                f"missing; the first line of a trajectory must be a header with format {FORMAT_V1!r}",
            )
        pending.append((c, obj))
    if current is None:
        raise TrajectoryError(path, 0, "", "no trajectories in file")
    yield finish()


def _check_spawns(trajectories: list[Trajectory]) -> None:
    """Every spawn names a subagent trajectory of the workload, and no subagent spawns itself (even indirectly)."""
    by_id = {t.id: t for t in trajectories}
    for traj in trajectories:
        path = traj.origin.rsplit(":", 1)[0]
        for turn in traj.turns:
            for i, ref in enumerate(turn.spawn):
                child = by_id.get(ref.trajectory)
                if child is None:
                    raise TrajectoryError(
                        path, turn.line, f"spawn[{i}].trajectory", f"no trajectory {ref.trajectory!r} in the workload"
                    )
                if not child.subagent:
                    raise TrajectoryError(
                        path,
                        turn.line,
                        f"spawn[{i}].trajectory",
                        f'{ref.trajectory!r} must have "subagent": true in its header',
                    )

    def visit(traj: Trajectory, stack: tuple[str, ...]) -> None:
        for turn in traj.turns:
            for ref in turn.spawn:
                if ref.trajectory in stack:
                    cycle = " -> ".join((*stack, ref.trajectory))
                    raise TrajectoryError(traj.origin.rsplit(":", 1)[0], turn.line, "spawn", f"subagent cycle: {cycle}")
                visit(by_id[ref.trajectory], (*stack, ref.trajectory))

    for traj in trajectories:
        if not traj.subagent:
            visit(traj, (traj.id,))


def default_workload_path() -> Path:
    """The workload the project ships, used when no trajectories are named."""
    checkout = Path(__file__).resolve().parents[2]
    for candidate in (checkout / "trajectories", Path(sys.prefix) / "share" / "replay" / "trajectories"):
        path = candidate / "coding-agent-default.jsonl"
        if path.exists():
            return path
    raise FileNotFoundError("the default workload trajectories/coding-agent-default.jsonl is missing")


def _hashed_lines(path: Path, digest: Any) -> Iterator[bytes]:
    """The file's lines, read as they are parsed (a huge file is never held whole), each added to ``digest``."""
    with path.open("rb") as fh:
        for line in fh:
            digest.update(line)
            yield line


def load_workload(
    paths: Iterable[str | Path],
    tokenizer_spec: str | None = None,
    policy: HistoryPolicy | None = None,
    unrecorded_context: str = "omit",
) -> Workload:
    """Load and validate every file (directories: their *.jsonl files) before anything is sent.
    ``unrecorded_context``: ``pad`` puts back the context the recordings left out (``padding``; the run's default),
    ``omit`` loads them as they are (this function's default: ``replay inspect`` shows the recording)."""
    if unrecorded_context not in MODES:
        raise ValueError(f"unrecorded context {unrecorded_context!r}: expected one of {', '.join(MODES)}")
    padded = PadCount() if unrecorded_context == "pad" else None
    tokenizer = get_tokenizer(tokenizer_spec) if tokenizer_spec else get_tokenizer()
    build = MessageBuilder(tokenizer, policy or HistoryPolicy())
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(f for f in p.glob("*.jsonl") if f.is_file()))
        elif p.is_file():
            files.append(p)
        elif p.exists():  # a FIFO would hang the load, /dev/zero fill the memory with one endless line
            raise TrajectoryError(
                str(p), 0, "", "not a regular file (a pipe or a device): trajectories are read from files"
            )
        else:
            raise TrajectoryError(str(p), 0, "", "no such file or directory")
    if not files:
        raise TrajectoryError(", ".join(map(str, paths)) or "(none)", 0, "", "no trajectory files found")
    digest = hashlib.sha256()
    trajectories: list[Trajectory] = []
    seen: dict[str, str] = {}
    for f in files:
        for traj in parse_lines(str(f), _hashed_lines(f, digest), build, padded):
            if traj.id in seen:
                raise TrajectoryError(
                    traj.origin.rsplit(":", 1)[0],
                    int(traj.origin.rsplit(":", 1)[1]),
                    "id",
                    f"duplicate trajectory id {traj.id!r} (first at {seen[traj.id]})",
                )
            seen[traj.id] = traj.origin
            trajectories.append(traj)
    _check_spawns(trajectories)
    return Workload(
        trajectories=trajectories,
        paths=[str(f) for f in files],
        digest="sha256:" + digest.hexdigest(),
        fingerprint=workload_fingerprint(t.digest for t in trajectories),
        tokenizer=tokenizer.name,
        builder=build,
        unrecorded_context=unrecorded_context,
        padding=padded or PadCount(),
    )
