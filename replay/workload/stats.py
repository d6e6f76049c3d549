"""Workload statistics: what a set of trajectories asks of a host, before anything is sent.

Per trajectory and pooled: turns (model calls), context growth (prompt tokens of the first call, median,
max), client-side prefix reuse, tool-time share, recorded model latency and cached tokens where the source
recorded them, and subagents. Token counts are the loader's (cl100k, ``replay/tokens.py``): the request of
a turn is ``prompt_tokens_est``; its reusable part is ``reusable_prefix_tokens``, the tokens that are an
exact prefix of the previous request plus its output (whole messages).

- prefix reuse of a trajectory = Σ reusable / Σ prompt over its turns (token-weighted; the first turn
  counts with 0 reusable);
- pooled prefix reuse = Σ reusable / Σ prompt over every turn of every trajectory; ``prefix_reuse_mean`` is
  the mean of the per-trajectory ratios;
- ``prefix_reuse_chars`` (per trajectory) and ``prefix_reuse_chars_mean`` (the mean of trajectories): the same
  question as the development set's README asks it, in characters of each call after the first (char_reuse.py),
  so a corpus's published figure can be set beside replay's;
- tool share = Σ tool_time_s / (Σ tool_time_s + Σ recorded latency_s), over the turns with a recorded
  latency;
- cached share (recorded) = Σ recorded cached_tokens / Σ recorded prompt_tokens (the provider's counts);
- what the replay cannot send: ``unrecorded_calls`` (calls a source counted but did not keep, from the
  header), ``discarded_calls_replayed`` (such calls replayed with a stand-in answer) and the unrecorded
  context (Σ ``recorded.unrecorded_context_tokens`` and its share of the provider's prompt tokens).

Missing figures are None (``-`` in the text), recorded zeros are 0: a source that recorded no tool time
(``source.tool_time`` "none recorded") has ``tool_time_s`` None, not 0.

Paths that are not canonical trajectory files are imported on the fly (format auto-detected).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from replay.histogram import percentile
from replay.workload import images
from replay.workload.char_reuse import char_prefix_reuse
from replay.workload.importers import (
    CANONICAL,
    ImportFailure,
    Refused,
    detect_format,
    expand,
    import_files,
    write_canonical,
)
from replay.workload.stats_text import plot, require_matplotlib, skipped_notes, to_text
from replay.workload.trajectory import Trajectory, Turn, load_workload


@dataclass
class Loaded:
    """Trajectories ready to inspect, and the directory members that were skipped (refused)."""

    trajectories: list[Trajectory] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    padding: dict[str, Any] | None = None  # with --unrecorded-context pad: what the padding added
    fingerprint: str = ""  # the corpus's (workload/fingerprint.py): what a run's header carries


def load(paths: Iterable[str | Path], fmt: str = "auto", unrecorded_context: str = "omit") -> Loaded:
    """Canonical files as they are; anything else imported (``fmt`` forces the importer's format), then
    everything loaded and validated together by the loader (so spawns must resolve). ``unrecorded_context``
    ``pad`` shows the requests as ``replay run`` sends them by default (docs/importers.md)."""
    loaded = Loaded()
    canonical: list[Path] = []
    others: list[tuple[Path, bool]] = []
    for path, explicit in expand(paths):
        try:
            kind = detect_format(path) if fmt == "auto" else fmt
        except Refused as exc:
            if explicit:
                raise
            loaded.skipped.append((str(path), exc.problem))
            continue
        if kind == CANONICAL:
            canonical.append(path)
        else:
            others.append((path, explicit))
    with tempfile.TemporaryDirectory(prefix="replay-inspect-") as tmp:
        files = list(canonical)
        if others:
            result = import_files(others, fmt)
            for refused, reason, explicit in result.refused:
                if explicit:
                    raise Refused(refused, "", reason)
                loaded.skipped.append((str(refused), reason))
            if result.trajectories:
                target = Path(tmp) / "imported.jsonl"
                with target.open("wb") as fh:
                    write_canonical(result.trajectories, fh)
                files.append(target)
        if not files:
            raise ImportFailure(", ".join(map(str, paths)) or "(none)", "", "no trajectories found")
        workload = load_workload(files, unrecorded_context=unrecorded_context)
        loaded.trajectories = workload.trajectories
        loaded.fingerprint = workload.fingerprint
        if unrecorded_context == "pad":
            loaded.padding = workload.padding.public("pad")
    return loaded


def _median(values: Sequence[float]) -> float:
    """The median of token and turn counts, by the one percentile method (``replay.histogram``)."""
    return percentile(values, 50, 1) or 0.0


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _latency(turn: Turn) -> float | None:
    return _number((turn.recorded or {}).get("latency_s"))


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def tool_time_recorded(traj: Trajectory) -> bool:
    """False when the source recorded no tool time (the importer says so in the header): then it is missing, not 0."""
    return not str(traj.source.get("tool_time", "")).startswith("none recorded")


def _count(source: dict[str, Any], key: str) -> int:
    value = source.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _replayable(traj: Trajectory) -> bool:
    """The importer says ``replay import --include-discarded`` would replay the calls it did not keep."""
    return traj.source.get("unrecorded_calls_replayable") is True


def _gaps(traj: Trajectory) -> list[tuple[int, int]]:
    """(unrecorded context tokens, recorded prompt tokens) of the turns whose importer measured the gap."""
    out = []
    for t in traj.turns:
        rec = t.recorded or {}
        gap, prompt = _number(rec.get("unrecorded_context_tokens")), _number(rec.get("prompt_tokens"))
        if gap is not None and prompt is not None:
            out.append((int(gap), int(prompt)))
    return out


def _unrecorded_context(traj: Trajectory) -> dict[str, Any]:
    """Prompt tokens the provider counted beyond what the replay sends (importers that know it, per turn)."""
    gaps = _gaps(traj)
    total = sum(g for g, _ in gaps)
    return {
        "unrecorded_context_tokens": total if gaps else None,
        "unrecorded_context_tokens_last": gaps[-1][0] if gaps else None,
        "unrecorded_context_share": _ratio(total, sum(p for _, p in gaps)) if gaps else None,
    }


_INPUT_OF_IMPORTER = {
    "mini-swe-agent": "exact",
    "openai-log": "exact",
    "claude-code": "rebuilt",
    "openhands": "rebuilt",
}


def input_kind(traj: Trajectory) -> str:
    """How the replayed inputs relate to what the agent sent: exact, rebuilt (from events or a history), synthetic
    (text generated for token counts or block ids), or as given (a canonical file says nothing)."""
    if str(traj.source.get("text", "")).startswith("synthetic"):
        return "synthetic"
    said = str(traj.source.get("input", ""))
    if "exact" in said:
        return "exact"
    if "rebuilt" in said or "approximation" in said:
        return "rebuilt"
    return _INPUT_OF_IMPORTER.get(str(traj.source.get("importer")), "as given")


def _images(traj: Trajectory) -> tuple[int, int]:
    """(image parts the turns append, their tokens by the loader's estimate)."""
    count = tokens = 0
    for turn in traj.turns:
        for m in turn.append:
            if b'"image_url"' not in m.wire:
                continue
            for part in m.raw.get("content") or ():
                image = images.from_wire(part)
                if image is not None:
                    count += 1
                    tokens += images.image_tokens(image)
    return count, tokens


def trajectory_stats(traj: Trajectory) -> dict[str, Any]:
    prompts = [t.prompt_tokens_est for t in traj.turns]
    reusable = sum(t.reusable_prefix_tokens for t in traj.turns)
    has_tool_time = tool_time_recorded(traj)
    tool_total = sum(t.tool_time_s for t in traj.turns)
    lat_turns = [t for t in traj.turns if _latency(t) is not None]
    lat = sum(_latency(t) or 0.0 for t in lat_turns)
    tool_with_lat = sum(t.tool_time_s for t in lat_turns)
    cached_turns = [
        (r["prompt_tokens"], r["cached_tokens"])
        for t in traj.turns
        if (r := t.recorded) and isinstance(r.get("cached_tokens"), int) and isinstance(r.get("prompt_tokens"), int)
    ]
    rec_prompt = sum(prompt for prompt, _ in cached_turns)
    rec_cached = sum(cached for _, cached in cached_turns)
    pictures = _images(traj)
    return {
        "id": traj.id,
        "source": traj.source.get("importer") or traj.source.get("generator") or "canonical",
        "subagent": traj.subagent,
        "subagents_spawned": sum(len(t.spawn) for t in traj.turns),
        "turns": len(traj.turns),
        "prompt_tokens_start": prompts[0],
        "prompt_tokens_median": _median(prompts),
        "prompt_tokens_max": max(prompts),
        "prompt_tokens_total": sum(prompts),
        "reusable_prefix_tokens_total": reusable,
        "prefix_reuse": _ratio(reusable, sum(prompts)),
        "prefix_reuse_chars": char_prefix_reuse(traj),  # the development set README's definition (char_reuse.py)
        "output_tokens_total": sum(t.output_tokens for t in traj.turns),
        "tool_time_s": round(tool_total, 6) if has_tool_time else None,
        "recorded_latency_s": round(lat, 6) if lat_turns else None,
        "recorded_latency_turns": len(lat_turns),
        "tool_share": _ratio(tool_with_lat, tool_with_lat + lat) if lat_turns and has_tool_time else None,
        "recorded_prompt_tokens": rec_prompt if cached_turns else None,
        "recorded_cached_tokens": rec_cached if cached_turns else None,
        "recorded_cached_share": _ratio(rec_cached, rec_prompt) if cached_turns else None,
        "unrecorded_calls": _count(traj.source, "unrecorded_calls"),
        "unrecorded_calls_replayable": _count(traj.source, "unrecorded_calls") if _replayable(traj) else 0,
        "discarded_calls_replayed": sum(1 for t in traj.turns if t.recorded and t.recorded.get("discarded")),
        "answers_missing": sum(
            1 for t in traj.turns if t.recorded and t.recorded.get("output_missing") and not t.recorded.get("discarded")
        ),
        "input": input_kind(traj),
        "images": pictures[0],
        "image_tokens": pictures[1],
        **_unrecorded_context(traj),
        "prompt_tokens": prompts,
    }


def _sum_known(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _pool(trajs: list[Trajectory], stats: list[dict[str, Any]]) -> dict[str, Any]:
    prompts = [t.prompt_tokens_est for tr in trajs for t in tr.turns]
    reusable = sum(t.reusable_prefix_tokens for tr in trajs for t in tr.turns)
    ratios = [s["prefix_reuse"] for s in stats if s["prefix_reuse"] is not None]
    chars = [s["prefix_reuse_chars"] for s in stats if s["prefix_reuse_chars"] is not None]
    timed = [tr for tr in trajs if tool_time_recorded(tr)]
    lat_turns = [t for tr in trajs for t in tr.turns if _latency(t) is not None]
    lat_timed = [t for tr in timed for t in tr.turns if _latency(t) is not None]
    lat = sum(_latency(t) or 0.0 for t in lat_turns)
    lat_of_timed = sum(_latency(t) or 0.0 for t in lat_timed)
    tool_with_lat = sum(t.tool_time_s for t in lat_timed)
    tool = _sum_known(s["tool_time_s"] for s in stats)
    rec_prompt = sum(s["recorded_prompt_tokens"] or 0 for s in stats)
    rec_cached = sum(s["recorded_cached_tokens"] or 0 for s in stats)
    gap_turns = [g for tr in trajs for g in _gaps(tr)]
    gaps = sum(g for g, _ in gap_turns) if gap_turns else None
    lasts = [s["unrecorded_context_tokens_last"] for s in stats if s["unrecorded_context_tokens_last"] is not None]
    return {
        "trajectories": len(trajs),
        "subagent_trajectories": sum(1 for s in stats if s["subagent"]),
        "subagents_spawned": sum(s["subagents_spawned"] for s in stats),
        "turns": len(prompts),
        "turns_median": _median([s["turns"] for s in stats]),
        "prompt_tokens_start_median": _median([s["prompt_tokens_start"] for s in stats]),
        "prompt_tokens_median": _median(prompts),
        "prompt_tokens_max": max(prompts) if prompts else 0,
        "prompt_tokens_total": sum(prompts),
        "reusable_prefix_tokens_total": reusable,
        "prefix_reuse_pooled": _ratio(reusable, sum(prompts)),
        "prefix_reuse_mean": statistics.fmean(ratios) if ratios else None,
        "prefix_reuse_chars_mean": statistics.fmean(chars) if chars else None,
        "output_tokens_total": sum(s["output_tokens_total"] for s in stats),
        "tool_time_s": round(tool, 6) if tool is not None else None,
        "tool_time_trajectories": len(timed),
        "recorded_latency_s": round(lat, 6) if lat_turns else None,
        "recorded_latency_turns": len(lat_turns),
        "tool_share": _ratio(tool_with_lat, tool_with_lat + lat_of_timed) if lat_timed else None,
        "recorded_prompt_tokens": rec_prompt or None,
        "recorded_cached_tokens": rec_cached if rec_prompt else None,
        "recorded_cached_share": _ratio(rec_cached, rec_prompt),
        "unrecorded_calls": sum(s["unrecorded_calls"] for s in stats),
        "unrecorded_calls_replayable": sum(s["unrecorded_calls_replayable"] for s in stats),
        "discarded_calls_replayed": sum(s["discarded_calls_replayed"] for s in stats),
        "answers_missing": sum(s["answers_missing"] for s in stats),
        "inputs": {kind: sum(1 for s in stats if s["input"] == kind) for kind in sorted({s["input"] for s in stats})},
        "images": sum(s["images"] for s in stats),
        "image_tokens": sum(s["image_tokens"] for s in stats),
        "unrecorded_context_tokens": gaps,
        "unrecorded_context_tokens_last_max": max(lasts) if lasts else None,
        "unrecorded_context_share": _ratio(gaps, sum(p for _, p in gap_turns)) if gaps is not None else None,
    }


def summarize(loaded: Loaded) -> dict[str, Any]:
    """The full report: per trajectory, per source, pooled."""
    stats = [trajectory_stats(t) for t in loaded.trajectories]
    by_source: dict[str, list[int]] = {}
    for i, s in enumerate(stats):
        by_source.setdefault(s["source"], []).append(i)
    pooled = _pool(loaded.trajectories, stats)
    per_source = {
        src: _pool([loaded.trajectories[i] for i in idx], [stats[i] for i in idx]) for src, idx in by_source.items()
    }
    return {
        "trajectories": stats,
        "by_source": per_source,
        "pooled": pooled,
        "prefix_reuse_pooled": pooled["prefix_reuse_pooled"],
        "prefix_reuse_mean": pooled["prefix_reuse_mean"],
        "skipped": [{"path": p, "reason": r} for p, r in loaded.skipped],
        "padding": loaded.padding,
        "fingerprint": loaded.fingerprint,
    }


def to_json(report: dict[str, Any]) -> str:
    return orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()


__all__ = [
    "Loaded",
    "load",
    "plot",
    "require_matplotlib",
    "skipped_notes",
    "summarize",
    "to_json",
    "to_text",
    "trajectory_stats",
]
