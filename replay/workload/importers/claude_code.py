"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl`` and ``agent-<id>.jsonl``).

One JSON event per line. The conversation is rebuilt in file order: the task prompt, then per model
response (``assistant`` lines; one response may span several lines sharing ``message.id``) the assistant
message (``text`` blocks → content, ``tool_use`` → OpenAI-shaped ``tool_calls`` with the input as a JSON
string, ``thinking`` → ``reasoning``, not re-sent), then the ``tool_result`` blocks of the following
``user`` lines as ``tool`` messages. ``progress`` lines carry no content. A ``compact_boundary`` system
line starts a fresh context (compaction). Assistant lines of the ``<synthetic>`` model are not calls.

Timing: latency = assistant timestamp − the latest user-side line before it; tool time = the last user-side
line before the next call − the assistant timestamp (tool execution, or the user's pause before a new
prompt). Usage: ``input_tokens`` + ``cache_read_input_tokens`` + ``cache_creation_input_tokens`` = prompt.

Subagents: a ``tool_use`` that started one (``Task``/``Agent``) is tied to its ``agentId`` by
``agent_progress`` events, a ``toolUseResult.agentId``, or (fallback) by its prompt matching the subagent's
first message. The subagent's transcript is the file ``agent-<agentId>.jsonl`` next to the session file (or
under ``<session>/subagents/``), another file of the same import, or the sidechain lines of the session file
itself. It becomes a separate trajectory with ``"subagent": true``, spawned (``fork: false``) by the turn
that launched it; that turn's tool time is the recorded gap minus the longest subagent's recorded span
(the replay waits for its subagents). A subagent transcript imported without its parent is an ordinary
trajectory (``source.sidechain = true``). The system prompt and tool schemas are not in the transcripts: each
call's ``recorded.unrecorded_context_tokens`` says how many prompt tokens the provider counted beyond what the
replay sends, and the header's ``source.unrecorded_context_tokens`` sums them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.workload.importers._delta import Call, Imported, build_trajectory
from replay.workload.importers._messages import content_text, prompt_estimates
from replay.workload.importers._source import Refused, Src, iter_jsonl
from replay.workload.importers.claude_code_conversation import Conversation, read_conversation

FORMAT = "claude-code"
Lines = list[tuple[int, dict[str, Any]]]  # (line number, event) of one transcript

UNRECORDED_NOTE = (
    "the provider's prompt tokens minus the replayed prompt's estimate, summed over the calls (per call: "
    "recorded.unrecorded_context_tokens); the first call's is the system prompt and tool schemas the transcript "
    "does not hold, the growth after it the provider's own framing and tokenisation of what the calls add "
    "(docs/importers.md)"
)


def _unrecorded_context(calls: list[Call]) -> int | None:
    """Per call, what the provider counted beyond what the replay sends (``recorded.unrecorded_context_tokens``):
    recorded prompt tokens − the loader's estimate of the call's input. Returns the sum (None: no usage)."""
    total = None
    for call, estimate in zip(calls, prompt_estimates([c.input for c in calls]), strict=True):
        recorded = call.recorded.get("prompt_tokens")
        if isinstance(recorded, int):
            call.recorded["unrecorded_context_tokens"] = recorded - estimate
            total = (total or 0) + recorded - estimate
    return total


def _lines(path: Path) -> Lines:
    src = Src(path)
    out = []
    for lineno, ev in iter_jsonl(path):
        src.at(lineno).expect(ev, dict, "$", "a Claude Code event object")
        out.append((lineno, ev))
    return out


def _agent_file(path: Path, session: str | None, agent_id: str, pool: dict[str, Path]) -> Path | None:
    if agent_id in pool:
        return pool[agent_id]
    cands = [path.parent / f"agent-{agent_id}.jsonl"]
    if session:
        cands.append(path.parent / session / "subagents" / f"agent-{agent_id}.jsonl")
    return next((c for c in cands if c.is_file()), None)


def _sidechains(lines: Lines) -> dict[str, Lines]:
    """The session file's own sidechain lines, grouped by agentId: subagent conversations held inline."""
    inline: dict[str, Lines] = {}
    for n, e in lines:
        if e.get("isSidechain"):
            inline.setdefault(str(e.get("agentId") or "sidechain"), []).append((n, e))
    return inline


def _links(conv: Conversation, candidates: dict[str, tuple[Path, Lines]]) -> dict[str, str]:
    """tool_use id → agentId: the links the transcript states, then (fallback) a spawn prompt that matches the
    first user message of an inline subagent conversation."""
    linked: dict[str, str] = dict(conv.agent_links)
    for tid, prompt in conv.prompts.items():
        if tid in linked:
            continue
        for aid, (_, group) in candidates.items():
            first = next((e for _, e in group if e.get("type") == "user"), None)
            if first and content_text((first.get("message") or {}).get("content")) == prompt:
                linked[tid] = aid
                break
    return linked


@dataclass
class _Subagents:
    """Where one transcript's subagents are found, and what is already imported (a cycle guard)."""

    path: Path
    session: str | None
    traj_id: str
    pool: dict[str, Path]
    out: list[Imported]
    seen: set[str]
    candidates: dict[str, tuple[Path, Lines]]

    def spawn(self, conv: Conversation, linked: dict[str, str]) -> dict[int, float]:
        """Import each linked subagent, tie it to the call that launched it; returns call index → the longest
        recorded span of its subagents."""
        spans: dict[int, float] = {}
        for k, ids in enumerate(conv.tool_ids):
            for tid in ids:
                aid = linked.get(tid)
                span = None if aid is None else self._one(conv.calls[k], aid)
                if span is not None:
                    spans[k] = max(spans.get(k, 0.0), span)
        return spans

    def _one(self, call: Call, aid: str) -> float | None:
        if aid in self.candidates:
            apath, alines = self.candidates[aid]
        else:
            agent_file = _agent_file(self.path, self.session, aid, self.pool)
            if agent_file is None:
                return None
            apath, alines = agent_file, _lines(agent_file)
        key = f"{apath}#{aid}"
        if key in self.seen:
            return None  # a cycle, or the same transcript linked twice
        self.seen.add(key)
        sub, span = _build(
            apath,
            alines,
            f"{self.traj_id}/agent-{aid}",
            self.pool,
            self.out,
            subagent=True,
            sidechain=True,
            seen=self.seen,
        )
        sub.header["source"]["agent_id"] = aid
        self.out.append(sub)
        call.spawn.append(sub.id)
        return span


def _source(path: Path, conv: Conversation, session: str | None, *, subagent: bool, sidechain: bool) -> dict[str, Any]:
    source: dict[str, Any] = {
        "importer": FORMAT,
        "path": str(path),
        "tool_time": "timestamps",
        "note": "system prompt and tool schemas are not in Claude Code transcripts",
    }
    unrecorded = _unrecorded_context(conv.calls)
    if unrecorded is not None:
        source["unrecorded_context_tokens"] = unrecorded
        source["unrecorded_context_note"] = UNRECORDED_NOTE
    if session:
        source["session_id"] = session
    if sidechain and not subagent:
        source["sidechain"] = True
    return source


def _build(
    path: Path,
    lines: Lines,
    traj_id: str,
    pool: dict[str, Path],
    out: list[Imported],
    *,
    subagent: bool,
    sidechain: bool,
    seen: set[str],
) -> tuple[Imported, float | None]:
    src = Src(path)
    main = [(n, e) for n, e in lines if not e.get("isSidechain")] if not sidechain else lines
    inline = _sidechains(lines) if not sidechain else {}
    conv = read_conversation(main, src)
    if not conv.calls:
        raise Refused(path, "", "no model call (no assistant line) in the transcript")
    session = next((e.get("sessionId") for _, e in lines if e.get("sessionId")), None)
    # Subagent conversations available to link: inline sidechains, then files.
    candidates = {aid: (path, group) for aid, group in inline.items()}
    subagents = _Subagents(path, session, traj_id, pool, out, seen, candidates)
    spans = subagents.spawn(conv, _links(conv, candidates))
    for k, span in spans.items():  # the replay waits for the subagents: keep only the parent's own pause
        c = conv.calls[k]
        c.recorded["recorded_gap_s"] = round(c.tool_time_s or 0.0, 6)
        c.tool_time_s = max(0.0, (c.tool_time_s or 0.0) - span)
    source = _source(path, conv, session, subagent=subagent, sidechain=sidechain)
    model = next(iter(conv.models)) if len(conv.models) == 1 else None
    traj = build_trajectory(traj_id, conv.calls, source=source, model=model, subagent=subagent)
    return traj, conv.span_s


def import_file(path: Path, pool: dict[str, Path] | None = None) -> list[Imported]:
    """Import one transcript; subagent transcripts it launched are imported with it (listed after it)."""
    lines = _lines(path)
    if not lines:
        raise Refused(path, "", "empty transcript")
    all_side = all(e.get("isSidechain") for _, e in lines if e.get("type") in ("user", "assistant"))
    stem = path.name.removesuffix(".jsonl")
    subs: list[Imported] = []
    traj, _ = _build(
        path,
        lines,
        f"claude-code/{stem}",
        pool or {},
        subs,
        subagent=False,
        sidechain=all_side,
        seen={f"{path}#{stem.removeprefix('agent-')}"},
    )
    return [traj, *subs]


def agent_id_of(path: Path) -> str | None:
    """The agentId of a subagent transcript file (from its name), for linking files of one import."""
    name = path.name
    if name.startswith("agent-") and name.endswith(".jsonl"):
        return name[len("agent-") : -len(".jsonl")]
    return None
