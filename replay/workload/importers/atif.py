"""ATIF, the Agent Trajectory Interchange Format (Harbor's RFC 0001, ``ATIF-v1.N``): one JSON document per trajectory.

A document holds ``schema_version``, ``session_id``, ``agent`` and ``steps``; a step is a ``system``, ``user`` or
``agent`` step with a ``message``. Every agent step is one model call: its input is every message before it, its
answer the step's ``message``, ``reasoning_content`` and ``tool_calls``; its ``observation.results`` are the tool
results that follow the answer (``source_call_id`` names the call each answers, which must be one of the step's:
a result without one is the user's text). ``metrics`` give the recorded figures (``prompt_tokens``, which include
the cached ones, ``cached_tokens``, ``completion_tokens``, ``extra.reasoning_tokens``,
``extra.cache_creation_input_tokens``, ``cost_usd``). A result's ``subagent_trajectory_ref`` spawns a subagent: the
referenced ``trajectory_path`` (relative to the file) is imported as a subagent trajectory.

Time: a step's ``timestamp`` is read as when the step was logged (an agent step: its answer arrived). An agent
step's latency is its timestamp minus the preceding user or system step's; its tool time is the next step's
timestamp minus its own (for two agent steps in a row that gap includes the next call's time: ATIF keeps one time
per step).

What replay writes (``replay export-trajectories --format atif``, ``replay.workload.atif_export``) it keeps exact
under the steps' ``extra.replay``: the turn's tool time and recorded figures, a compaction (``truncate_to``), the
canonical message or output where ATIF's shape would change it, and assistant messages that were context rather
than calls (``call: false``); the document's ``extra.replay`` keeps the header (source, tools, subagent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from replay.workload.importers._delta import Call, Imported, build_trajectory
from replay.workload.importers._messages import assistant_message, make_output, message_content
from replay.workload.importers._source import Src, describe, parse_time, read_json, seconds_between, unix_seconds

FORMAT = "atif"
SOURCES = ("system", "user", "agent")
SUBAGENT_FILE = "atif_subagent_file"  # a subagent's file, imported through its parent: not a trajectory of its own
AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and str(obj.get("schema_version", "")).startswith("ATIF-v") and "steps" in obj


def step_output(step: dict[str, Any]) -> dict[str, Any]:
    """The canonical output an agent step's answer becomes (tool call arguments as compact JSON)."""
    calls = [
        {
            "id": c["tool_call_id"],
            "type": "function",
            "function": {"name": c["function_name"], "arguments": orjson.dumps(c.get("arguments") or {}).decode()},
        }
        for c in step.get("tool_calls") or ()
    ]
    reasoning = step.get("reasoning_content")
    return make_output(step.get("message") or "", calls or None, reasoning if isinstance(reasoning, str) else None)


def result_message(result: dict[str, Any]) -> dict[str, Any] | None:
    """The message a tool result becomes: a tool message answering its call, the user's text without one, or none
    (a result that only refers to a subagent)."""
    content = result.get("content")
    if content is None:
        return None
    if result.get("source_call_id"):
        return {"role": "tool", "tool_call_id": str(result["source_call_id"]), "content": message_content(content)}
    return {"role": "user", "content": message_content(content)}


def _replay_extra(obj: dict[str, Any]) -> dict[str, Any]:
    extra = obj.get("extra")
    ours = extra.get("replay") if isinstance(extra, dict) else None
    return ours if isinstance(ours, dict) else {}


class _Reader:
    """One ATIF document read into calls: the context so far, the calls, and the subagents it refers to."""

    def __init__(self, path: Path, doc: Any, traj_id: str | None, seen: tuple[str, ...]) -> None:
        self.path, self.src = path, Src(path)
        self.src.expect(doc, dict, "$", "an ATIF trajectory object")
        version = self.src.get(doc, "schema_version", str, "$", 'an ATIF version ("ATIF-v1.7")')
        if not version.startswith("ATIF-v1."):
            raise self.src.fail("$.schema_version", f'expected "ATIF-v1.N"; got {describe(version)}')
        session = self.src.get(doc, "session_id", str, "$", "the session's id (a non-empty string)")
        if not session:
            raise self.src.fail("$.session_id", "expected a non-empty string")
        self.agent = self.src.get(doc, "agent", dict, "$", "the agent object (name, version)")
        self.src.get(self.agent, "name", str, "$.agent", "the agent's name")
        self.doc, self.version, self.id = doc, version, traj_id or session
        self.seen = seen or (self.id,)
        self.context: list[dict[str, Any]] = []
        self.calls: list[Call] = []
        self.stamps: list[tuple[str, Any]] = []  # (source, parsed timestamp) per step
        self.subs: list[Imported] = []
        self.forks: set[str] = set()  # subagents that start from this one's context (the reference's extra.fork)

    def read(self) -> list[Imported]:
        steps = self.src.get(self.doc, "steps", list, "$", "a list of steps")
        call_steps: list[int] = []
        for i, step in enumerate(steps):
            jp = f"$.steps[{i}]"
            self.src.expect(step, dict, jp, "a step object")
            if self._step(i, step, jp):
                call_steps.append(i)
        if not self.calls:
            raise self.src.fail("$.steps", "no agent step: nothing to replay")
        self._times(call_steps)
        return [self._trajectory(), *self.subs]

    def _step(self, i: int, step: dict[str, Any], jp: str) -> bool:
        """Read one step into the context (and a call for an agent step); True when it was a call."""
        if step.get("step_id") != i + 1:
            raise self.src.fail(f"{jp}.step_id", f"expected {i + 1} (step ids run from 1 in order); got "
                                                 f"{describe(step.get('step_id'))}")  # fmt: skip
        source = step.get("source")
        if source not in SOURCES:
            raise self.src.fail(f"{jp}.source", f"expected one of {', '.join(SOURCES)}; got {describe(source)}")
        message = step.get("message")
        if not isinstance(message, (str, list)):
            raise self.src.fail(f"{jp}.message", f"expected a string; got {describe(message)}")
        if source != "agent":
            for key in AGENT_ONLY:
                if key in step:
                    raise self.src.fail(f"{jp}.{key}", f"only an agent step has it; this is a {source} step")
        ours = _replay_extra(step)
        if isinstance(ours.get("truncate_to"), int):
            del self.context[ours["truncate_to"] :]
        stamp = step.get("timestamp")
        self.stamps.append((source, parse_time(stamp) if stamp is not None else None))
        if stamp is not None and self.stamps[-1][1] is None:
            raise self.src.fail(f"{jp}.timestamp", f"expected an ISO 8601 time; got {describe(stamp)}")
        if source != "agent" or ours.get("call") is False:
            raw = ours.get("message")
            if source == "agent" and not isinstance(raw, dict):
                raw = assistant_message(step_output(self._checked_calls(step, jp)))
            self.context.append(raw if isinstance(raw, dict) else {"role": source, "content": message_content(message)})
            self._observation(step, jp, ours, [])
            return False
        self._call(step, jp, ours)
        return True

    def _checked_calls(self, step: dict[str, Any], jp: str) -> dict[str, Any]:
        calls = step.get("tool_calls") or []
        self.src.expect(calls, list, f"{jp}.tool_calls", "a list of tool calls")
        for k, c in enumerate(calls):
            cjp = f"{jp}.tool_calls[{k}]"
            self.src.expect(c, dict, cjp, "a tool call object")
            self.src.get(c, "tool_call_id", str, cjp, "the call's id (a string)")
            self.src.get(c, "function_name", str, cjp, "the tool's name (a string)")
            self.src.expect(c.get("arguments", {}), dict, f"{cjp}.arguments", "an object of arguments")
        return step

    def _call(self, step: dict[str, Any], jp: str, ours: dict[str, Any]) -> None:
        kept = ours.get("output")
        output: dict[str, Any] = kept if isinstance(kept, dict) else step_output(self._checked_calls(step, jp))
        metrics = step.get("metrics") or {}
        self.src.expect(metrics, dict, f"{jp}.metrics", "an object")
        completion = metrics.get("completion_tokens")
        if completion is not None:
            self.src.expect(completion, int, f"{jp}.metrics.completion_tokens", "a number of tokens (an integer)")
        figures = ours.get("recorded")
        recorded: dict[str, Any] = figures if isinstance(figures, dict) else _figures(step, metrics)
        tool_time = ours.get("tool_time_s")
        call = Call(
            input=list(self.context),
            output=output,
            output_tokens=completion if completion and completion > 0 else None,
            tool_time_s=float(tool_time) if isinstance(tool_time, (int, float)) else None,
            recorded=dict(recorded),
        )
        self.calls.append(call)
        self.context.append(assistant_message(output))
        ids = {c["id"] for c in output.get("tool_calls") or ()}
        self._observation(step, jp, ours, call.spawn, ids)

    def _observation(
        self, step: dict[str, Any], jp: str, ours: dict[str, Any], spawn: list[str], ids: set[str] | None = None
    ) -> None:
        obs = step.get("observation")
        if obs is None:
            return
        results = self.src.get(self.src.expect(obs, dict, f"{jp}.observation", "an object"), "results", list,
                               f"{jp}.observation", "a list of results")  # fmt: skip
        for k, r in enumerate(results):
            rjp = f"{jp}.observation.results[{k}]"
            self.src.expect(r, dict, rjp, "a result object")
            ref = r.get("source_call_id")
            if ref is not None and (ids is None or ref not in ids):
                raise self.src.fail(f"{rjp}.source_call_id", f"{describe(ref)} is no tool_call_id of this step")
            for n, sub in enumerate(r.get("subagent_trajectory_ref") or ()):
                spawn.append(self._subagent(sub, f"{rjp}.subagent_trajectory_ref[{n}]"))
            kept = ours.get("results")
            raw = kept[k] if isinstance(kept, list) and k < len(kept) else None
            msg = raw if isinstance(raw, dict) else result_message(r)
            if msg is not None:
                self.context.append(msg)

    def _subagent(self, ref: Any, jp: str) -> str:
        """A referenced subagent trajectory, imported from its file (relative to this one) as a subagent."""
        self.src.expect(ref, dict, jp, "a reference object (session_id, trajectory_path)")
        sid = self.src.get(ref, "session_id", str, jp, "the subagent's session id")
        where = ref.get("trajectory_path")
        if not isinstance(where, str) or not where:
            raise self.src.fail(f"{jp}.trajectory_path", "missing: replay needs the subagent's file to replay it")
        file = (self.path.parent / where).resolve()
        if not file.is_file():
            raise self.src.fail(f"{jp}.trajectory_path", f"no such file: {file}")
        if sid in self.seen:
            raise self.src.fail(jp, f"subagent cycle: {' -> '.join((*self.seen, sid))}")
        if any(t.id == sid for t in self.subs):  # spawned again (by a later step): one trajectory, run each time
            return sid
        group = import_file(file, traj_id=sid, seen=(*self.seen, sid), subagent=True)
        self.subs.extend(group)
        if isinstance(ref.get("extra"), dict) and ref["extra"].get("fork") is True:
            self.forks.add(sid)
        return sid

    def _times(self, call_steps: list[int]) -> None:
        """Latency and tool time from the steps' timestamps, for calls whose file did not say (see the module)."""
        for call, i in zip(self.calls, call_steps, strict=True):
            at = self.stamps[i][1]
            if i > 0 and self.stamps[i - 1][0] != "agent" and "latency_s" not in call.recorded:
                latency = seconds_between(self.stamps[i - 1][1], at)
                if latency is not None and latency >= 0:
                    call.recorded["latency_s"] = round(latency, 6)
                    start = unix_seconds(self.stamps[i - 1][1])
                    if start is not None:
                        call.recorded.setdefault("timestamp", round(start, 3))
            if call.tool_time_s is None and i + 1 < len(self.stamps):
                gap = seconds_between(at, self.stamps[i + 1][1])
                call.tool_time_s = None if gap is None else max(0.0, gap)

    def _trajectory(self) -> Imported:
        ours = _replay_extra(self.doc)
        source = ours.get("source") if isinstance(ours.get("source"), dict) else None
        if source is None:
            source = {"importer": FORMAT, "path": str(self.path), "schema_version": self.version,
                      "agent": {k: self.agent[k] for k in ("name", "version") if k in self.agent}}  # fmt: skip
            if any(c.tool_time_s is not None for c in self.calls):
                source["tool_time"] = "the gap to the next step's timestamp"
        tools = ours.get("tools") if isinstance(ours.get("tools"), list) else self.agent.get("tool_definitions")
        model = ours.get("model", self.agent.get("model_name"))
        traj = build_trajectory(self.id, self.calls, source=source, model=model if isinstance(model, str) else None,
                                tools=tools if isinstance(tools, list) else None,
                                subagent=bool(ours.get("subagent")))  # fmt: skip
        for turn in traj.turns:
            for s in turn.get("spawn") or ():
                s["fork"] = s["trajectory"] in self.forks
        return traj


def _figures(step: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    """The recorded figures of an agent step's metrics (keys of docs/trajectory-format.md)."""
    kept = metrics.get("extra")
    extra: dict[str, Any] = kept if isinstance(kept, dict) else {}
    rec: dict[str, Any] = {
        "prompt_tokens": metrics.get("prompt_tokens"),
        "cached_tokens": metrics.get("cached_tokens"),
        "output_tokens": metrics.get("completion_tokens"),
        "reasoning_tokens": extra.get("reasoning_tokens"),
        "cache_creation_tokens": extra.get("cache_creation_input_tokens"),
        "cost_usd": metrics.get("cost_usd"),
        "model": step.get("model_name"),
    }
    return {k: v for k, v in rec.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}


def import_file(
    path: Path, traj_id: str | None = None, seen: tuple[str, ...] = (), subagent: bool = False
) -> list[Imported]:
    """An ATIF document (and the subagent documents it refers to) as canonical trajectories."""
    reader = _Reader(path, read_json(path, "an ATIF trajectory (one JSON object)"), traj_id, seen or ())
    out = reader.read()
    if subagent:
        out[0].header["subagent"] = True
        out[0].header["source"] = {**out[0].header["source"], SUBAGENT_FILE: str(path.resolve())}
    return out
