#!/usr/bin/env python3
"""Generate the default workload: synthetic coding-agent sessions in `replay.trajectory/1` format.

Why synthetic: the recorded trajectories we study cannot be redistributed, yet `replay` needs a default
workload with the shape of a real coding agent: a long system prompt shared by every session, an issue
statement, short outputs (a thought and one shell command), large tool observations (file dumps, test logs)
that make the context grow turn after turn, and the occasional history compaction. Everything here is
produced procedurally from a seeded RNG over hand-written vocabularies and templates, so the output is
reproducible byte for byte:

    python scripts/make_default_workload.py --seed 7 --out trajectories/coding-agent-default.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the generator's modules live next to this script
try:
    import replay  # noqa: F401
except ModuleNotFoundError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workload_gen.data import projects
from workload_gen.session import Session

from replay.workload.tokens import get_tokenizer

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "trajectories" / "coding-agent-default.jsonl"
DEFAULT_SEED = 7


@dataclass
class Summary:
    """Per-session figures for the printed table and the README."""

    id: str
    turns: int
    first: int
    peak: int
    final: int
    tool_time: float
    compactions: int
    median_output: float


def generate(seed: int, sessions: int) -> tuple[list[str], list[Summary]]:
    """All JSONL lines and the per-session figures."""
    tok = get_tokenizer()
    lines: list[str] = []
    summaries: list[Summary] = []
    for project in projects()[:sessions]:
        session = Session(project, project.shape, seed, tok)
        header, turns = session.run()
        lines.append(json.dumps(header, ensure_ascii=False))
        lines += [json.dumps(t.to_json(), ensure_ascii=False) for t in turns]
        summaries.append(
            Summary(
                id=str(header["id"]),
                turns=len(turns),
                first=turns[0].prompt_tokens,
                peak=max(t.prompt_tokens for t in turns),
                final=turns[-1].prompt_tokens,
                tool_time=sum(t.tool_time_s for t in turns),
                compactions=sum(1 for t in turns if t.truncate_to is not None),
                median_output=statistics.median(t.output_tokens for t in turns),
            )
        )
    return lines, summaries


def table(rows: list[Summary]) -> str:
    """Markdown table of the per-session figures (prompt tokens: content + 4/message + 3/request)."""
    out = [
        "| session | turns | first ctx | peak ctx | final ctx | tool time s | compactions | median output |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r.id} | {r.turns} | {r.first:,} | {r.peak:,} | {r.final:,} | {r.tool_time:.1f} | "
            f"{r.compactions} | {r.median_output:.0f} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Write the workload and print the summary table (the README quotes it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output JSONL file")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="RNG seed (default 7)")
    count = len(projects())
    parser.add_argument("--sessions", type=int, default=count, help=f"number of sessions, 1..{count}")
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= count:
        parser.error(f"--sessions must be between 1 and {count}")
    started = time.perf_counter()
    lines, rows = generate(args.seed, args.sessions)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    data = ("\n".join(lines) + "\n").encode("utf-8")
    args.out.write_bytes(data)
    elapsed = time.perf_counter() - started
    print(table(rows))
    shown = args.out.resolve()
    shown = shown.relative_to(Path.cwd()) if shown.is_relative_to(Path.cwd()) else shown
    print(f"\nwrote {shown} ({len(data):,} bytes, {sum(r.turns for r in rows)} turns) in {elapsed:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
