"""Weka / kv-cache-tester agentic traces (one JSON object: ``block_size``, ``requests``, nested subagents).

No message text is recorded: each call is its token counts (``in``, ``out``), timing (``think_time``: the
client-side gap before the call; ``api_time``: the call's response time) and ``hash_ids``, one id per full
``block_size``-token block of the serialised request. Text is generated per block id (see ``_blocks``), so
equal ids are byte-identical text and the input sizes match ``in``. The first
``(tool_tokens + system_tokens) // block_size`` blocks form a system message (the warm prefix).

Subagent entries (``type: "subagent"``) become separate trajectories with ``"subagent": true``. Their
``t`` is the completion time relative to the parent's start, so they started at ``t - duration_ms/1000``;
each is spawned by the last parent call that had finished by then. Tool time of a call = ``think_time`` of
the next call of the same conversation; for a call that spawned subagents, minus the time from its end to
the last of those subagents' completion (the replay waits for its subagents), clamped at 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.workload.importers._blocks import BlockRequest, BlockText, block_calls
from replay.workload.importers._delta import Imported, build_trajectory
from replay.workload.importers._source import Refused, Src, parse_time, read_json, unix_seconds

FORMAT = "weka"


def _leaf(r: dict[str, Any], src: Src, jp: str, block_size: int) -> BlockRequest:
    ids = src.get(r, "hash_ids", list, jp, "a list of block hash ids")
    n_in = src.get(r, "in", int, jp, "the input size in tokens (an integer)")
    n_out = src.get(r, "out", int, jp, "the output size in tokens (an integer)")
    if len(ids) * block_size > n_in:
        raise src.fail(
            f"{jp}.hash_ids", f"expected at most in // block_size = {n_in // block_size} ids; got {len(ids)}"
        )
    rec: dict[str, Any] = {"output_tokens": n_out, "trace_input_tokens": n_in}
    if isinstance(r.get("api_time"), (int, float)):
        rec["latency_s"] = float(r["api_time"])
    if isinstance(r.get("ttft"), (int, float)):
        rec["ttft_s"] = float(r["ttft"])
    if r.get("model"):
        rec["model"] = r["model"]
    if r.get("stop"):
        rec["stop"] = r["stop"]
    return BlockRequest(blocks=[(h, block_size) for h in ids], input_tokens=n_in, output_tokens=n_out, recorded=rec)


@dataclass
class _Trace:
    """What the conversations of one trace share: the file, its block size and id scope, the text per block id,
    and the subagent trajectories imported so far."""

    src: Src
    path: Path
    texts: BlockText
    block_size: int
    scope: str
    out: list[Imported]


class _Conversation:
    """One conversation's requests in order: its calls (leaves), the raw requests they came from, and per call
    how long the replay waits for the subagents it spawned beyond its own end."""

    def __init__(self, trace: _Trace, traj_id: str, start_unix: float | None) -> None:
        self.trace, self.traj_id, self.start_unix = trace, traj_id, start_unix
        self.leaves: list[BlockRequest] = []
        self.raw_leaves: list[dict[str, Any]] = []
        self.waits: dict[int, float] = {}

    def request(self, i: int, r: Any, rjp: str) -> None:
        src = self.trace.src
        src.expect(r, dict, rjp, "a request object")
        t = r.get("t")
        if not isinstance(t, (int, float)):
            raise src.fail(f"{rjp}.t", f"expected seconds from the start of the conversation; got {t!r}")
        if r.get("type") == "subagent":
            self._subagent(i, r, rjp, float(t))
            return
        leaf = _leaf(r, src, rjp, self.trace.block_size)
        if self.start_unix is not None:
            leaf.recorded["timestamp"] = round(self.start_unix + float(t), 3)
        self.leaves.append(leaf)
        self.raw_leaves.append(r)

    def _subagent(self, i: int, r: dict[str, Any], rjp: str, t: float) -> None:
        """A subagent entry: imported as a trajectory of its own, spawned by the last call that had finished
        when it started."""
        dur = float(r.get("duration_ms") or 0) / 1000.0
        begin = t - dur
        k = len(self.leaves) - 1  # default: the last call before it in the list
        for j, lr in enumerate(self.raw_leaves):
            if float(lr["t"]) + float(lr.get("api_time") or 0.0) <= begin + 1.0:
                k = j
        if k < 0:
            raise self.trace.src.fail(rjp, "expected a parent call before the subagent started")
        aid = str(r.get("agent_id") or f"sub{i}")
        sub_start = None if self.start_unix is None else self.start_unix + begin
        sub = _conversation(r, self.trace, rjp, f"{self.traj_id}/{aid}", subagent=True, start_unix=sub_start)
        sub.header["source"]["agent_id"] = aid
        self.trace.out.append(sub)
        self.leaves[k].spawn.append(sub.id)
        end_k = float(self.raw_leaves[k]["t"]) + float(self.raw_leaves[k].get("api_time") or 0.0)
        self.waits[k] = max(self.waits.get(k, 0.0), t - end_k)

    def tool_times(self) -> None:
        """Each call's tool time: the next call's think_time, less the wait for its subagents (clamped at 0)."""
        raw = self.raw_leaves
        for k, leaf in enumerate(self.leaves):
            nxt = raw[k + 1].get("think_time") if k + 1 < len(raw) else 0.0
            gap = float(nxt) if isinstance(nxt, (int, float)) else 0.0
            if k in self.waits:
                leaf.recorded["recorded_gap_s"] = gap
                gap = max(0.0, gap - self.waits[k])
            leaf.tool_time_s = gap


def _conversation(
    obj: dict[str, Any], trace: _Trace, jp: str, traj_id: str, *, subagent: bool, start_unix: float | None
) -> Imported:
    src, block_size = trace.src, trace.block_size
    reqs = src.get(obj, "requests", list, jp, "a list of requests")
    warm = (int(obj.get("tool_tokens") or 0) + int(obj.get("system_tokens") or 0)) // block_size
    conv = _Conversation(trace, traj_id, start_unix)
    for i, r in enumerate(reqs):
        conv.request(i, r, f"{jp}.requests[{i}]")
    if not conv.leaves:
        raise Refused(trace.path, jp, "no model call in the trace")
    conv.tool_times()
    id_scope = traj_id if trace.scope != "global" else ""  # ids of one conversation only: keep them apart
    calls, worst = block_calls(
        conv.leaves, trace.texts, key=traj_id, block_size=block_size, warm_blocks=warm, scope=id_scope
    )
    source: dict[str, Any] = {
        "importer": FORMAT,
        "path": str(trace.path),
        "tool_time": "think_time of the next call",
        "text": "synthetic: one word per cl100k token, generated per block hash id",
        "block_size": block_size,
        "prompt_tokens_over_trace": worst,
    }
    models = obj.get("models")
    model = models[0] if isinstance(models, list) and len(models) == 1 else None
    return build_trajectory(traj_id, calls, source=source, model=model, subagent=subagent)


def import_file(path: Path, salt: str = "") -> list[Imported]:
    src = Src(path)
    data = read_json(path, "a Weka trace (one JSON object)")
    src.expect(data, dict, "$", "a Weka trace object with 'block_size' and 'requests'")
    block_size = src.get(data, "block_size", int, "$", "the block size in tokens (an integer)")
    if block_size < 1:
        raise src.fail("$.block_size", f"expected a positive integer; got {block_size}")
    scope = str(data.get("hash_id_scope") or "global")
    start = unix_seconds(parse_time(data.get("_start_ts")))
    name = str(data.get("id") or path.stem)
    subs: list[Imported] = []
    trace = _Trace(src, path, BlockText(salt), block_size, scope, subs)
    traj = _conversation(data, trace, "$", f"weka/{name}", subagent=False, start_unix=start)
    return [traj, *subs]
