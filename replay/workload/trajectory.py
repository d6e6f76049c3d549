"""Trajectories: load, validate and pre-count recorded agent sessions (format v1).

Everything expensive happens here, once, before any request is sent: validation (so bad input fails
before the first byte goes out), tokenisation of each message exactly once, and the per-turn
client-side figures (estimated prompt size, reusable prefix). The replay hot path only joins
pre-serialised message bytes. A file's lines are read into trajectories by ``parse_lines`` (a line's checks and
parsing: ``format_v1``; messages serialised and counted: ``messages``), padded where asked (``padding``), and the
files of a workload into one ``Workload`` by ``load_workload``.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from replay.workload.fingerprint import recorded, trajectory_digest, workload_fingerprint
from replay.workload.format_v1 import (
    FORMAT_V1,
    Checker,
    Spawn,
    Trajectory,
    TrajectoryError,
    Turn,
    annotate,
    describe,
    parse_header,
    parse_turn,
)
from replay.workload.history import HistoryPolicy
from replay.workload.messages import CountedContext, Message, MessageBuilder, message_tokens, output_as_message
from replay.workload.padding import MODES, PadCount, pad_turns
from replay.workload.tokens import get_tokenizer

__all__ = [  # the format's values and the messages are imported from here too (their modules are named above)
    "FORMAT_V1",
    "CountedContext",
    "Message",
    "MessageBuilder",
    "Spawn",
    "Trajectory",
    "TrajectoryError",
    "Turn",
    "Workload",
    "default_workload_path",
    "load_workload",
    "message_tokens",
    "output_as_message",
    "parse_lines",
]


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


def parse_lines(
    path: str, lines: Iterable[bytes], build: MessageBuilder, pad: PadCount | None = None
) -> Iterator[Trajectory]:
    """Parse the JSON Lines of one file into trajectories; raise TrajectoryError on the first problem. With ``pad``
    (``--unrecorded-context pad``), the context a recording left out is put back first (``padding``) and counted."""
    current: Trajectory | None = None
    pending: list[tuple[Checker, Any]] = []  # the current trajectory's turns, parsed when it is complete

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
            current.turns.append(parse_turn(c, obj, len(current.turns), build))
        annotate(current, path, [c.line for c, _ in pending])
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
        c = Checker(path, lineno)
        if not isinstance(obj, dict):
            raise c.fail("", f"expected a JSON object; got {describe(obj)}")
        if "format" in obj:
            if current is not None:
                yield finish()
            current, pending = parse_header(c, obj, build), []
            nested = obj.get("turns")
            if nested is not None:
                c.check(nested, "turns", list, "a list of turns")
                pending = [(Checker(path, lineno, f"turns[{i}]."), t) for i, t in enumerate(nested)]
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
