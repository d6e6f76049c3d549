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
- tool share = Σ tool_time_s / (Σ tool_time_s + Σ recorded latency_s), over the turns with a recorded
  latency;
- cached share (recorded) = Σ recorded cached_tokens / Σ recorded prompt_tokens (the provider's counts).

Paths that are not canonical trajectory files are imported on the fly (format auto-detected).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from replay.workload.importers import (
    CANONICAL,
    ImportFailure,
    Refused,
    detect_format,
    expand,
    import_files,
    write_canonical,
)
from replay.workload.trajectory import Trajectory, Turn, load_workload


@dataclass
class Loaded:
    """Trajectories ready to inspect, and the directory members that were skipped (refused)."""

    trajectories: list[Trajectory] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


def load(paths: Iterable[str | Path], fmt: str = "auto") -> Loaded:
    """Canonical files as they are; anything else imported (``fmt`` forces the importer's format), then
    everything loaded and validated together by the loader (so spawns must resolve)."""
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
            for path, reason, explicit in result.refused:
                if explicit:
                    raise Refused(path, "", reason)
                loaded.skipped.append((path, reason))
            if result.trajectories:
                target = Path(tmp) / "imported.jsonl"
                with target.open("wb") as fh:
                    write_canonical(result.trajectories, fh)
                files.append(target)
        if not files:
            raise ImportFailure(", ".join(map(str, paths)) or "(none)", "", "no trajectories found")
        loaded.trajectories = load_workload(files).trajectories
    return loaded


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _latency(turn: Turn) -> float | None:
    v = (turn.recorded or {}).get("latency_s")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def trajectory_stats(traj: Trajectory) -> dict[str, Any]:
    prompts = [t.prompt_tokens_est for t in traj.turns]
    reusable = sum(t.reusable_prefix_tokens for t in traj.turns)
    tool_total = sum(t.tool_time_s for t in traj.turns)
    lat_turns = [t for t in traj.turns if _latency(t) is not None]
    lat = sum(_latency(t) or 0.0 for t in lat_turns)
    tool_with_lat = sum(t.tool_time_s for t in lat_turns)
    cached_turns = [
        t
        for t in traj.turns
        if t.recorded
        and isinstance(t.recorded.get("cached_tokens"), int)
        and isinstance(t.recorded.get("prompt_tokens"), int)
    ]
    rec_prompt = sum(t.recorded["prompt_tokens"] for t in cached_turns)  # type: ignore[index]
    rec_cached = sum(t.recorded["cached_tokens"] for t in cached_turns)  # type: ignore[index]
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
        "output_tokens_total": sum(t.output_tokens for t in traj.turns),
        "tool_time_s": round(tool_total, 6),
        "recorded_latency_s": round(lat, 6) if lat_turns else None,
        "recorded_latency_turns": len(lat_turns),
        "tool_share": _ratio(tool_with_lat, tool_with_lat + lat) if lat_turns else None,
        "recorded_prompt_tokens": rec_prompt if cached_turns else None,
        "recorded_cached_tokens": rec_cached if cached_turns else None,
        "recorded_cached_share": _ratio(rec_cached, rec_prompt) if cached_turns else None,
        "prompt_tokens": prompts,
    }


def _pool(trajs: list[Trajectory], stats: list[dict[str, Any]]) -> dict[str, Any]:
    prompts = [t.prompt_tokens_est for tr in trajs for t in tr.turns]
    reusable = sum(t.reusable_prefix_tokens for tr in trajs for t in tr.turns)
    ratios = [s["prefix_reuse"] for s in stats if s["prefix_reuse"] is not None]
    lat = sum(s["recorded_latency_s"] or 0.0 for s in stats)
    lat_turns = [
        t for tr in trajs for t in tr.turns if t.recorded and isinstance(t.recorded.get("latency_s"), (int, float))
    ]
    tool_with_lat = sum(t.tool_time_s for t in lat_turns)
    rec_prompt = sum(s["recorded_prompt_tokens"] or 0 for s in stats)
    rec_cached = sum(s["recorded_cached_tokens"] or 0 for s in stats)
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
        "output_tokens_total": sum(s["output_tokens_total"] for s in stats),
        "tool_time_s": round(sum(s["tool_time_s"] for s in stats), 6),
        "recorded_latency_s": round(lat, 6) if lat_turns else None,
        "recorded_latency_turns": len(lat_turns),
        "tool_share": _ratio(tool_with_lat, tool_with_lat + lat) if lat_turns else None,
        "recorded_prompt_tokens": rec_prompt or None,
        "recorded_cached_tokens": rec_cached if rec_prompt else None,
        "recorded_cached_share": _ratio(rec_cached, rec_prompt),
    }


def summarize(loaded: Loaded) -> dict[str, Any]:
    """The full report: per trajectory, per source, pooled."""
    stats = [trajectory_stats(t) for t in loaded.trajectories]
    by_source: dict[str, list[int]] = {}
    for i, s in enumerate(stats):
        by_source.setdefault(s["source"], []).append(i)
    pooled = _pool(loaded.trajectories, stats)
    return {
        "trajectories": stats,
        "by_source": {
            src: _pool([loaded.trajectories[i] for i in idx], [stats[i] for i in idx]) for src, idx in by_source.items()
        },
        "pooled": pooled,
        "prefix_reuse_pooled": pooled["prefix_reuse_pooled"],
        "prefix_reuse_mean": pooled["prefix_reuse_mean"],
        "skipped": [{"path": p, "reason": r} for p, r in loaded.skipped],
    }


def to_json(report: dict[str, Any]) -> str:
    return orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def to_text(report: dict[str, Any]) -> str:
    rows = [
        ("trajectory", "turns", "start", "median", "max", "reuse", "tool s", "model s", "tool%", "cached%", "sub"),
    ]
    for s in report["trajectories"]:
        name = ("  ↳ " if s["subagent"] else "") + s["id"]
        if len(name) > 72:
            name = name[:40] + "…" + name[-31:]
        rows.append(
            (
                name,
                str(s["turns"]),
                str(s["prompt_tokens_start"]),
                str(int(s["prompt_tokens_median"])),
                str(s["prompt_tokens_max"]),
                _pct(s["prefix_reuse"]),
                _secs(s["tool_time_s"]),
                _secs(s["recorded_latency_s"]),
                _pct(s["tool_share"]),
                _pct(s["recorded_cached_share"]),
                str(s["subagents_spawned"] or ""),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, r in enumerate(rows):
        out.append("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip())
        if n == 0:
            out.append("-" * len(out[0]))
    out.append("")

    def block(title: str, p: dict[str, Any]) -> None:
        out.append(
            f"{title}: {p['trajectories']} trajectories ({p['subagent_trajectories']} subagents), {p['turns']} turns"
            f" (median {p['turns_median']:g} per trajectory)"
        )
        out.append(
            f"  context: first call median {p['prompt_tokens_start_median']:g}, all calls median "
            f"{p['prompt_tokens_median']:g}, max {p['prompt_tokens_max']} prompt tokens"
        )
        out.append(
            f"  prefix reuse: pooled {_pct(p['prefix_reuse_pooled'])} (Σ reusable / Σ prompt), "
            f"mean of trajectories {_pct(p['prefix_reuse_mean'])}"
        )
        line = f"  tool time {_secs(p['tool_time_s'])} s"
        if p["recorded_latency_s"] is not None:
            line += (
                f", recorded model time {_secs(p['recorded_latency_s'])} s ({p['recorded_latency_turns']} calls),"
                f" tool share {_pct(p['tool_share'])}"
            )
        out.append(line)
        if p["recorded_prompt_tokens"]:
            out.append(
                f"  recorded provider cache: {p['recorded_cached_tokens']} of {p['recorded_prompt_tokens']} prompt"
                f" tokens cached ({_pct(p['recorded_cached_share'])})"
            )

    if len(report["by_source"]) > 1:
        for src, p in report["by_source"].items():
            block(src, p)
    block("pooled", report["pooled"])
    for s in report["skipped"]:
        out.append(f"skipped {s['path']}: {s['reason']}")
    return "\n".join(out)


def require_matplotlib() -> Any:
    """matplotlib.pyplot (Agg backend), or RuntimeError saying how to install it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("--plot needs matplotlib: pip install matplotlib") from None
    return plt


def plot(report: dict[str, Any], png: str | Path) -> None:
    """Context growth curves (prompt tokens per turn, one line per trajectory) as a PNG."""
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    sources = sorted({s["source"] for s in report["trajectories"]})
    colors = {src: f"C{i % 10}" for i, src in enumerate(sources)}
    for s in report["trajectories"]:
        ax.plot(
            range(1, len(s["prompt_tokens"]) + 1),
            s["prompt_tokens"],
            color=colors[s["source"]],
            alpha=0.55,
            linewidth=1.0,
            linestyle="--" if s["subagent"] else "-",
        )
    for src in sources:
        ax.plot([], [], color=colors[src], label=src)
    ax.set_xlabel("turn (model call)")
    ax.set_ylabel("prompt tokens (cl100k estimate)")
    pooled = report["pooled"]
    ax.set_title(
        f"Context growth: {pooled['trajectories']} trajectories, "
        f"pooled prefix reuse {_pct(pooled['prefix_reuse_pooled'])}"
    )
    ax.grid(alpha=0.3)
    if len(sources) > 1 or sources != ["canonical"]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


__all__ = ["Loaded", "load", "plot", "require_matplotlib", "summarize", "to_json", "to_text", "trajectory_stats"]
