"""The workload's fingerprint: which corpus a run replayed, whatever its files are called or hold in what order.

``workload.digest`` is sha256 over the files' bytes in load order: it checks that the very files are back (a
resumed run, a report beside its workload). The fingerprint names the *corpus*: sha256 over the sorted digests of
its trajectories, each a hash over what the trajectory holds, so the same trajectories in other files, in another
order, split or joined differently give the same fingerprint, and one changed turn (a message, an output, a
count, a pause, a recorded figure) gives another. It goes in the run header (``workload.fingerprint``), is printed
by ``replay inspect``, and a recipe run or a claims file can name the one it requires (docs/recipes.md).

A trajectory's digest covers, length-prefixed so no two fields can run together: its id, model, tools and
subagent flag; per turn, ``truncate_to``, ``output_tokens``, ``tool_time_s``, ``recorded`` and ``spawn`` (one
small JSON with sorted keys), each appended message's bytes and the recorded output's bytes. The messages' bytes are
those the loader serialised once for the wire (``Message.wire``, ``Turn.output_json``: compact JSON, keys in their
file order, image sizes filled in), reused, not made again. The fingerprint is of the recording, not of what a run
made of it: the context ``--unrecorded-context pad`` puts back and ``--tool-calls text``'s flattening are
left out (the recorded message is hashed in place of its padded or flattened form), so ``replay inspect`` (which
shows the recording) prints the fingerprint a run's header carries. ``source`` (where a trajectory came from, which
an importer may fill with file names) is not part of it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import orjson


class Builder(Protocol):
    """What the digest reads of the loader's message builder (``workload.messages.MessageBuilder``)."""

    @property
    def renders_as_recorded(self) -> bool: ...

    def recorded_bytes(self, obj: Any) -> bytes: ...


FINGERPRINT_FORMAT = b"replay.workload-fingerprint/1\n"


def _field(h: Any, data: bytes) -> None:
    h.update(len(data).to_bytes(8, "little"))
    h.update(data)


def _small(value: Any) -> bytes:
    """A small value (a header's fields, a turn's counts) as JSON with sorted keys: its bytes are its content."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def trajectory_digest(traj: Any, messages: Sequence[Sequence[bytes]], truncations: Sequence[int | None]) -> bytes:
    """The digest of one parsed trajectory (``workload.format_v1.Trajectory``; this module sits below it);
    ``messages``: per turn, the recorded messages' bytes (``recorded``);
    ``truncations``: per turn, ``truncate_to`` as recorded (padding moves it by the head it adds)."""
    h = hashlib.sha256()
    _field(h, _small({"id": traj.id, "model": traj.model, "tools": traj.tools, "subagent": traj.subagent}))
    for turn, appended, truncate_to in zip(traj.turns, messages, truncations, strict=True):
        fields = {
            "truncate_to": truncate_to,
            "output_tokens": turn.output_tokens,
            "tool_time_s": turn.tool_time_s,
            "recorded": turn.recorded,
            "spawn": [[s.trajectory, s.fork] for s in turn.spawn],
            "append": len(appended),
        }
        _field(h, _small(fields))
        for wire in appended:
            _field(h, wire)
        _field(h, turn.output_json)
    return h.digest()


def recorded(build: Builder, sent: Sequence[Any], wires: Sequence[bytes], original: Iterable[Any]) -> list[bytes]:
    """The bytes of a turn's recorded messages (``original``, the file's objects before padding): the wire bytes
    the loader made of each (``sent``: the objects it made ``wires`` from, in order), unless the history policy
    rendered it otherwise or padding replaced it; those few are serialised here, as the recording has them."""
    made = {id(obj): wire for obj, wire in zip(sent, wires, strict=True)} if build.renders_as_recorded else {}
    return [made.get(id(obj)) or build.recorded_bytes(obj) for obj in original]


def workload_fingerprint(digests: Iterable[bytes]) -> str:
    """The workload's fingerprint: its trajectories' digests, sorted (so neither files nor order count)."""
    h = hashlib.sha256(FINGERPRINT_FORMAT)
    for d in sorted(digests):
        h.update(d)
    return "sha256:" + h.hexdigest()
