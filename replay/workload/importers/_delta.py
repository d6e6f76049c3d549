"""Calls to the canonical delta log: what every importer reduces its source to, and how it is written.

Every importer reduces its source to a list of :class:`Call` (the exact input of one model call, its
recorded output, tool time and recorded figures) and hands it to :func:`build_trajectory`, which writes
the canonical delta log: per call, the messages to ``append`` to the previous input plus its output, or
``truncate_to`` the longest common prefix (in whole messages) first when the agent rewrote its history.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from replay.workload.format_v1 import FORMAT_V1
from replay.workload.importers._messages import assistant_message, output_token_count


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
