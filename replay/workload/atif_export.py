"""Canonical trajectories written as ATIF documents (Harbor's RFC 0001), one file per trajectory.

Each turn becomes the steps of what it appended (a system or user message: a step of that source; a tool result
answering the previous answer's call: a result of that agent step's ``observation``) and one agent step for the
call: its answer (``message``, ``reasoning_content``, ``tool_calls`` with their arguments as objects) and its
``metrics`` (``completion_tokens`` = the turn's ``output_tokens``; the recorded ``prompt_tokens``,
``cached_tokens``, ``cost_usd``, and ``reasoning_tokens`` / ``cache_creation_input_tokens`` under ``extra``). A spawned
subagent is a result's ``subagent_trajectory_ref`` naming its file. What ATIF has no field for is kept under the
steps' ``extra.replay`` (``replay.workload.importers.atif`` reads it back), so importing the files again gives the
same trajectories: the tool time and recorded figures of each call, a compaction (``truncate_to``), a message or
answer whose ATIF form would read back otherwise (images, tool calls whose arguments are no JSON object), an
assistant message that was context and not a call of the trajectory, and the header (source, tools, subagent).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from replay import __version__
from replay.workload.format_v1 import FORMAT_V1
from replay.workload.importers._delta import Imported
from replay.workload.importers._messages import content_text
from replay.workload.importers.atif import result_message, step_output

SCHEMA_VERSION = "ATIF-v1.7"  # written with v1.4's fields only: later versions added optional ones


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _metrics(turn: dict[str, Any]) -> dict[str, Any]:
    rec = turn.get("recorded") or {}
    out: dict[str, Any] = {"completion_tokens": turn["output_tokens"]}
    for ours, theirs in (
        ("prompt_tokens", "prompt_tokens"),
        ("cached_tokens", "cached_tokens"),
        ("cost_usd", "cost_usd"),
    ):
        if isinstance(rec.get(ours), (int, float)) and not isinstance(rec.get(ours), bool):
            out[theirs] = rec[ours]
    extra = {
        theirs: rec[ours]
        for ours, theirs in (
            ("reasoning_tokens", "reasoning_tokens"),
            ("cache_creation_tokens", "cache_creation_input_tokens"),
        )
        if isinstance(rec.get(ours), int)
    }
    if extra:
        out["extra"] = extra
    return out


def _stamp(rec: dict[str, Any]) -> str | None:
    """When the answer was logged (the call's start plus its latency), for a call whose start was recorded."""
    start = rec.get("timestamp")
    if not isinstance(start, (int, float)) or isinstance(start, bool):
        return None
    return datetime.fromtimestamp(float(start) + float(rec.get("latency_s") or 0.0), UTC).isoformat()


class _Writer:
    """One trajectory's steps, built turn by turn."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.steps: list[dict[str, Any]] = []
        self.last: dict[str, Any] | None = None  # the agent step whose tool calls the next results may answer

    def step(self, source: str, message: Any, ours: dict[str, Any]) -> dict[str, Any]:
        step: dict[str, Any] = {"step_id": len(self.steps) + 1, "source": source, "message": message}
        if ours:
            step["extra"] = {"replay": ours}
        self.steps.append(step)
        return step

    def result(self, msg: dict[str, Any]) -> bool:
        """A tool message as a result of the last agent step, when it answers one of its calls."""
        step = self.last
        ids = {c["tool_call_id"] for c in step.get("tool_calls") or ()} if step else set()
        if step is None or msg.get("role") != "tool" or msg.get("tool_call_id") not in ids:
            return False
        result = {"source_call_id": msg["tool_call_id"], "content": content_text(msg.get("content"))}
        self._add_result(step, result, None if result_message(result) == msg else msg)
        return True

    @staticmethod
    def _add_result(step: dict[str, Any], result: dict[str, Any], raw: dict[str, Any] | None) -> None:
        results = step.setdefault("observation", {"results": []})["results"]
        results.append(result)
        ours = step.setdefault("extra", {"replay": {}})["replay"]
        if raw is not None or "results" in ours:
            kept = ours.setdefault("results", [None] * (len(results) - 1))
            kept.append(raw)

    def message(self, msg: dict[str, Any], ours: dict[str, Any]) -> None:
        """An appended message that is not a result of the last call: a step of its own."""
        role = msg.get("role")
        if role == "assistant":
            self.step("agent", content_text(msg.get("content")), {**ours, "call": False, "message": msg})
            return
        source = role if role in ("system", "user") else "user"
        text = content_text(msg.get("content"))
        same = {"role": source, "content": msg.get("content")} == msg and isinstance(msg.get("content"), str)
        self.step(source, text, ours if same else {**ours, "message": msg})

    def turn(self, turn: dict[str, Any]) -> None:
        ours: dict[str, Any] = {}
        if turn.get("truncate_to") is not None:
            ours["truncate_to"] = turn["truncate_to"]
            self.last = None  # results after a compaction answer no call of the last step
        for msg in turn.get("append") or ():
            if ours or not self.result(msg):
                self.message(msg, ours)
                ours = {}
                self.last = None
        self.call(turn, ours)

    def call(self, turn: dict[str, Any], ours: dict[str, Any]) -> None:
        output = turn["output"]
        ours = {**ours, "tool_time_s": turn["tool_time_s"], "recorded": turn.get("recorded") or {}}
        step = self.step("agent", output.get("content") or "", ours)
        stamp = _stamp(turn.get("recorded") or {})
        if stamp:
            step["timestamp"] = stamp
        if output.get("reasoning"):
            step["reasoning_content"] = output["reasoning"]
        calls = output.get("tool_calls") or ()
        if calls:
            step["tool_calls"] = [
                {"tool_call_id": c["id"], "function_name": c["function"]["name"],
                 "arguments": _arguments(c["function"].get("arguments", ""))}
                for c in calls
            ]  # fmt: skip
        step["metrics"] = _metrics(turn)
        if step_output(step) != output:
            ours["output"] = output
        for s in turn.get("spawn") or ():
            ref: dict[str, Any] = {"session_id": s["trajectory"], "trajectory_path": self.files[s["trajectory"]]}
            if s.get("fork"):
                ref["extra"] = {"fork": True}
            self._add_result(step, {"subagent_trajectory_ref": [ref]}, None)
        self.last = step


def to_atif(traj: Imported, files: dict[str, str]) -> dict[str, Any]:
    """One canonical trajectory as an ATIF document; ``files``: each trajectory id's file name (subagent refs)."""
    header = traj.header
    writer = _Writer(files)
    for turn in traj.turns:
        writer.turn(turn)
    agent: dict[str, Any] = {"name": "replay", "version": __version__}
    if header.get("model"):
        agent["model_name"] = header["model"]
    ours: dict[str, Any] = {"format": FORMAT_V1, "source": header.get("source") or {}}
    if header.get("tools"):
        ours["tools"] = header["tools"]
    if header.get("subagent"):
        ours["subagent"] = True
    final: dict[str, Any] = {
        "total_completion_tokens": sum(t["output_tokens"] for t in traj.turns),
        "total_steps": len(writer.steps),
    }
    for key in ("prompt_tokens", "cached_tokens"):
        values = [(t.get("recorded") or {}).get(key) for t in traj.turns]
        if all(isinstance(v, int) for v in values):
            final[f"total_{key}"] = sum(values)
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": header["id"],
        "agent": agent,
        "steps": writer.steps,
        "final_metrics": final,
        "extra": {"replay": ours},
    }


def file_names(trajectories: list[Imported]) -> dict[str, str]:
    """A file name per trajectory id: the id made safe for a file name, numbered where two would meet."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for t in trajectories:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", t.id).strip("._") or "trajectory"
        name, n = f"{stem}.json", 2
        while name in taken:
            name, n = f"{stem}~{n}.json", n + 1
        taken.add(name)
        names[t.id] = name
    return names


def write_atif(trajectories: list[Imported], out_dir: Path) -> list[Path]:
    """Every trajectory as an ATIF file in ``out_dir`` (made if missing); the files written, in order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    names = file_names(trajectories)
    written = []
    for t in trajectories:
        path = out_dir / names[t.id]
        path.write_bytes(orjson.dumps(to_atif(t, names), option=orjson.OPT_INDENT_2) + b"\n")
        written.append(path)
    return written
