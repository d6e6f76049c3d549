"""SWE-agent ``.traj`` files (one JSON object: ``trajectory`` steps, ``history``, ``info``).

Three layouts, best first:

- ``trajectory[k].query`` (SWE-agent 1.x): the exact messages sent for step k.
- ``trajectory[k].messages`` (0.7-era ``function_calling_replace_from_source``): the message list *after*
  step k (history processors applied, ending with step k's own action and observation). The input of call k
  is therefore ``trajectory[k-1].messages`` (the processed history at the time of the call) and, for k = 0,
  ``trajectory[0].messages`` without its trailing action and observation. Rewritten history (older
  observations elided) is kept, so prefix reuse breaks where it did.
- only ``history``: one call per assistant message, input = history up to it (an approximation: history
  processors are not re-applied, so reuse is overstated when the run elided old observations). A final step
  whose response is not in the history (a submit call) is one more call with the whole history as input.

``execution_time`` (seconds, a float or a numeric string) is the tool time of a step. SWE-agent records no
per-call latency or usage. A RetryAgent file (``attempts``) yields one trajectory per attempt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay.workload.importers._delta import Call, Imported, build_trajectory
from replay.workload.importers._messages import assistant_message, content_text, make_output, tool_calls
from replay.workload.importers._source import Refused, Src, number, read_json

FORMAT = "swe-agent"


def _message(m: Any, src: Src, jpath: str) -> dict[str, Any]:
    """A SWE-agent history message as a canonical message (agent bookkeeping dropped)."""
    src.expect(m, dict, jpath, "a message object")
    role = m.get("role")
    content = m.get("content")
    if role == "assistant":
        calls = tool_calls(m["tool_calls"], src, f"{jpath}.tool_calls") if m.get("tool_calls") else None
        return assistant_message(make_output(content, calls))
    if role == "tool":
        ids = m.get("tool_call_ids") or ([m["tool_call_id"]] if m.get("tool_call_id") else [])
        if ids:
            return {"role": "tool", "tool_call_id": str(ids[0]), "content": content_text(content)}
        return {"role": "user", "content": content_text(content)}
    if role in ("system", "user"):
        return {"role": role, "content": content_text(content)}
    raise src.fail(f"{jpath}.role", f"expected one of system, user, assistant, tool; got {role!r}")


def _messages(ms: Any, src: Src, jpath: str) -> list[dict[str, Any]]:
    src.expect(ms, list, jpath, "a list of messages")
    return [_message(m, src, f"{jpath}[{i}]") for i, m in enumerate(ms)]


def _output_of(step: dict[str, Any], src: Src, jpath: str) -> dict[str, Any]:
    calls = tool_calls(step["tool_calls"], src, f"{jpath}.tool_calls") if step.get("tool_calls") else None
    return make_output(step.get("response") or step.get("thought") or "", calls)


def _exec_time(step: dict[str, Any]) -> float | None:
    v = number(step.get("execution_time"))
    return None if v is None else max(0.0, v)


def _from_query(steps: list[Any], src: Src, jp: str) -> list[Call]:
    calls = []
    for k, step in enumerate(steps):
        inp = _messages(step["query"], src, f"{jp}[{k}].query")
        out = _output_of(step, src, f"{jp}[{k}]")
        # Prefer the assistant message as the next query holds it (what was really re-sent).
        if k + 1 < len(steps) and isinstance(steps[k + 1].get("query"), list):
            nxt = steps[k + 1]["query"]
            if len(nxt) > len(inp) and isinstance(nxt[len(inp)], dict) and nxt[len(inp)].get("role") == "assistant":
                msg = _message(nxt[len(inp)], src, f"{jp}[{k + 1}].query[{len(inp)}]")
                out = make_output(msg.get("content"), msg.get("tool_calls"))
        calls.append(Call(input=inp, output=out, tool_time_s=_exec_time(step)))
    return calls


def _from_messages(steps: list[Any], src: Src, jp: str) -> list[Call]:
    after = [_messages(s["messages"], src, f"{jp}[{k}].messages") for k, s in enumerate(steps)]
    calls = []
    for k, step in enumerate(steps):
        own = after[k]
        last_assistant = max((i for i, m in enumerate(own) if m["role"] == "assistant"), default=None)
        if last_assistant is None:
            raise src.fail(f"{jp}[{k}].messages", "expected the step's own assistant message in the list")
        inp = after[k - 1] if k else own[:last_assistant]
        msg = own[last_assistant]
        out = make_output(msg.get("content"), msg.get("tool_calls"))
        calls.append(Call(input=inp, output=out, tool_time_s=_exec_time(step)))
    return calls


def _from_history(history: list[Any], steps: list[Any], src: Src, jp: str) -> tuple[list[Call], int]:
    msgs = _messages(history, src, f"{jp}history")
    # Match steps to assistant messages (by response or thought) to find each call's execution time.
    step_for: dict[int, dict[str, Any]] = {}
    matched = 0  # steps[:matched] are consumed
    for idx, raw in enumerate(history):
        if raw.get("role") != "assistant":
            continue
        for p in range(matched, len(steps)):
            s = steps[p]
            if s.get("response") == raw.get("content") or (s.get("thought") and s.get("thought") == raw.get("thought")):
                step_for[idx] = s
                matched = p + 1
                break
    calls = []
    for idx, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        s = step_for.get(idx, {})
        calls.append(
            Call(input=msgs[:idx], output=make_output(m.get("content"), m.get("tool_calls")), tool_time_s=_exec_time(s))
        )
    extra = 0
    # A last step (e.g. ``submit``) the history never received: one more call on the whole history.
    if steps and matched == len(steps) - 1 and msgs and msgs[-1]["role"] != "assistant":
        last = steps[-1]
        calls.append(Call(input=msgs, output=_output_of(last, src, f"{jp}trajectory[-1]"), tool_time_s=None))
        extra = 1
    return calls, extra


def _attempt(data: dict[str, Any], src: Src, jp: str, traj_id: str, path: Path) -> Imported:
    steps = data.get("trajectory") or []
    src.expect(steps, list, f"{jp}trajectory", "a list of steps")
    for k, s in enumerate(steps):
        src.expect(s, dict, f"{jp}trajectory[{k}]", "a step object")
    source: dict[str, Any] = {"importer": FORMAT, "path": str(path)}
    if steps and all(isinstance(s.get("query"), list) for s in steps):
        calls = _from_query(steps, src, f"{jp}trajectory")
        source["input"] = "trajectory[].query (exact)"
    elif steps and all(isinstance(s.get("messages"), list) for s in steps):
        calls = _from_messages(steps, src, f"{jp}trajectory")
        source["input"] = "trajectory[k-1].messages (exact, history processors applied)"
    else:
        history = data.get("history")
        if not isinstance(history, list):
            raise src.fail(f"{jp}history", f"missing; expected a list of messages; got {history!r:.40}")
        calls, extra = _from_history(history, steps, src, jp)
        source["input"] = "history prefix (approximation: history processors not re-applied)"
        if extra:
            source["final_call_not_in_history"] = True
    if not calls:
        raise Refused(path, jp.rstrip(".") or "$", "no model calls (no assistant message and no steps)")
    if all(c.tool_time_s is None for c in calls):
        source["tool_time"] = "none recorded"
    info = data.get("info") or {}
    stats = info.get("model_stats") if isinstance(info, dict) else None
    if isinstance(stats, dict) and stats.get("api_calls"):
        source["api_calls"] = stats["api_calls"]
    if isinstance(info, dict) and info.get("exit_status"):
        source["exit_status"] = info["exit_status"]
    return build_trajectory(traj_id, calls, source=source)


def import_file(path: Path) -> list[Imported]:
    src = Src(path)
    data = read_json(path, "a SWE-agent .traj file (one JSON object)")
    src.expect(data, dict, "$", "a SWE-agent trajectory object with 'trajectory' and/or 'history'")
    base = f"swe-agent/{path.name.removesuffix('.traj')}"
    if isinstance(data.get("attempts"), list) and not data.get("trajectory") and not data.get("history"):
        out = []
        for i, att in enumerate(data["attempts"]):
            src.expect(att, dict, f"$.attempts[{i}]", "an attempt object")
            out.append(_attempt(att, src, f"$.attempts[{i}].", f"{base}/attempt-{i}", path))
        return out
    if "trajectory" not in data and "history" not in data:
        raise src.fail("$", "expected a SWE-agent trajectory object with 'trajectory' and/or 'history'")
    return [_attempt(data, src, "$.", base, path)]
