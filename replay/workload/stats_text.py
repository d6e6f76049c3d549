"""`replay inspect` for people: the statistics of ``replay.workload.stats`` as a table and a picture.

Missing is ``-`` everywhere (a source that recorded no tool time, no latency or no usage), a recorded zero
is ``0.0``; trajectory names are shown whole and last in their row, so two trajectories never look alike and
a long name never shifts the columns. Columns about what the
replay cannot send (calls a source dropped, context a transcript does not hold) appear when a trajectory
has such a figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay.workload.words import plural


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


# (header, cell) per column; optional columns are shown when some trajectory has a figure for them.
_COLUMNS: list[tuple[str, Any]] = [
    ("turns", lambda s: str(s["turns"])),
    ("start", lambda s: str(s["prompt_tokens_start"])),
    ("median", lambda s: str(int(s["prompt_tokens_median"]))),
    ("max", lambda s: str(s["prompt_tokens_max"])),
    ("reuse", lambda s: _pct(s["prefix_reuse"])),
    ("tool s", lambda s: _secs(s["tool_time_s"])),
    ("model s", lambda s: _secs(s["recorded_latency_s"])),
    ("tool%", lambda s: _pct(s["tool_share"])),
    ("cached%", lambda s: _pct(s["recorded_cached_share"])),
]
_OPTIONAL: list[tuple[str, str, Any]] = [
    ("unrec ctx%", "unrecorded_context_share", lambda s: _pct(s["unrecorded_context_share"])),
    ("lost calls", "unrecorded_calls", lambda s: str(s["unrecorded_calls"] or "")),
    ("stand-ins", "discarded_calls_replayed", lambda s: str(s["discarded_calls_replayed"] or "")),
    ("no answer", "answers_missing", lambda s: str(s["answers_missing"] or "")),
    ("images", "images", lambda s: str(s["images"] or "")),
]


def _table(stats: list[dict[str, Any]]) -> list[str]:
    """Figures first, the name last and whole: a long name never shifts a column or hides what tells it apart."""
    columns = list(_COLUMNS)
    columns += [(head, cell) for head, key, cell in _OPTIONAL if any(s[key] for s in stats)]
    columns.append(("sub", lambda s: str(s["subagents_spawned"] or "")))
    columns.append(("input", lambda s: s["input"]))
    rows = [(*(head for head, _ in columns), "trajectory")]
    for s in stats:
        rows.append((*(cell(s) for _, cell in columns), ("  ↳ " if s["subagent"] else "") + s["id"]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns))]
    out = [("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]).rstrip() for r in rows]
    out.insert(1, "-" * len(out[0]))
    return out


def _tool_line(p: dict[str, Any]) -> str:
    if p["tool_time_s"] is None:
        line = "  tool time - (not recorded)"
    else:
        line = f"  tool time {_secs(p['tool_time_s'])} s"
        if p["tool_time_trajectories"] < p["trajectories"]:
            line += f" ({p['tool_time_trajectories']} of {plural(p['trajectories'], 'trajectory')} recorded it)"
    if p["recorded_latency_s"] is not None:
        line += (
            f", recorded model time {_secs(p['recorded_latency_s'])} s ({plural(p['recorded_latency_turns'], 'call')}),"
            f" tool share {_pct(p['tool_share'])}"
        )
    return line


def _not_replayed(p: dict[str, Any], padded: bool) -> list[str]:
    out = []
    if p["unrecorded_calls"]:
        line = f"  not replayed: {plural(p['unrecorded_calls'], 'call')} the sources counted but did not keep"
        if p["unrecorded_calls_replayable"]:
            line += f" ({p['unrecorded_calls_replayable']:,} of them: replay import --include-discarded)"
        out.append(line)
    if p["discarded_calls_replayed"]:
        out.append(
            f"  replayed with a stand-in answer: {plural(p['discarded_calls_replayed'], 'call')} whose answer"
            " the source discarded (exact input; the answer's length is a guess)"
        )
    if p["answers_missing"]:
        out.append(
            f"  answers not recorded: {plural(p['answers_missing'], 'call')} replayed with a stand-in answer of the"
            " recorded length (exact input; the answer text is missing)"
        )
    if p["unrecorded_context_tokens"] is not None:
        out.append(
            f"  unrecorded context: {p['unrecorded_context_tokens']:,} of the provider's prompt tokens"
            f" ({_pct(p['unrecorded_context_share'])}) are not in the "
            + ("recording (padded with a stand-in, below), up to" if padded else "replay, up to")
            + f" {p['unrecorded_context_tokens_last_max']:,} in a trajectory's last call (docs/importers.md)"
        )
    return out


def _block(title: str, p: dict[str, Any], padded: bool = False) -> list[str]:
    out = [
        f"{title}: {plural(p['trajectories'], 'trajectory')} ({plural(p['subagent_trajectories'], 'subagent')}),"
        f" {plural(p['turns'], 'turn')} (median {p['turns_median']:g} per trajectory)",
        f"  context: first call median {p['prompt_tokens_start_median']:g}, all calls median "
        f"{p['prompt_tokens_median']:g}, max {p['prompt_tokens_max']} prompt tokens",
        f"  prefix reuse (replay's: whole messages, tokens): pooled {_pct(p['prefix_reuse_pooled'])} (Σ reusable /"
        f" Σ prompt), mean of trajectories {_pct(p['prefix_reuse_mean'])}",
        f"  prefix reuse (the dev set README's: characters, calls after the first): mean of trajectories"
        f" {_pct(p.get('prefix_reuse_chars_mean'))}",
        _tool_line(p),
        "  input: " + ", ".join(f"{n} {kind}" for kind, n in p["inputs"].items()) + " (docs/importers.md)",
    ]
    if p["images"]:
        out.append(f"  images: {p['images']:,} sent ({p['image_tokens']:,} tokens by the openai estimate)")
    if p["recorded_prompt_tokens"]:
        out.append(
            f"  recorded provider cache: {p['recorded_cached_tokens']:,} of {p['recorded_prompt_tokens']:,} prompt"
            f" tokens cached ({_pct(p['recorded_cached_share'])})"
        )
    return out + _not_replayed(p, padded)


def to_text(report: dict[str, Any]) -> str:
    """The table per trajectory, then the figures per source (when there are several) and pooled."""
    out = [*_table(report["trajectories"]), ""]
    pad = report.get("padding")
    if len(report["by_source"]) > 1:
        for src, p in report["by_source"].items():
            out += _block(src, p, pad is not None)
    out += _block("pooled", report["pooled"], pad is not None)
    if pad is not None:
        share = "-" if pad["padded_share"] is None else f"{100 * pad['padded_share']:.1f}%"
        out.append(
            f"  unrecorded context padded: {pad['padded_tokens']:,} tokens in the requests ({share} of their prompt"
            f" tokens), {plural(pad['trajectories'], 'trajectory')}, heads {pad['head_tokens']:,} tokens"
        )
    if report.get("fingerprint"):
        out.append(f"  workload fingerprint {report['fingerprint']} (its content, whatever the files: docs/recipes.md)")
    return "\n".join(out)


def skipped_notes(report: dict[str, Any]) -> list[str]:
    """One line per directory member that was not a trajectory (the command writes them to stderr)."""
    return [f"skipped {s['path']}: {s['reason']}" for s in report["skipped"]]


def require_matplotlib() -> Any:
    """matplotlib.pyplot (Agg backend), or RuntimeError saying how to install it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("--plot needs matplotlib, the plots extra: pip install 'agentic-replay[plots]'") from None
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
        f"Context growth: {plural(pooled['trajectories'], 'trajectory')}, "
        f"pooled prefix reuse {_pct(pooled['prefix_reuse_pooled'])}"
    )
    ax.grid(alpha=0.3)
    if len(sources) > 1 or sources != ["canonical"]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
