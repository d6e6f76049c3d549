"""The peer benchmark's figures: medians over repetitions, and the markdown tables docs/benchmarks.md quotes.

Ratios are taken between medians of the same run, so a slow stretch of the shared machine that hit one
repetition moves every client alike. CPU per token ratios read as "times as many tokens per client core as
the peer": the peer's CPU per token over replay's.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

FIGURES = (
    "tokens_per_s",
    "cpu_us_per_token",
    "cores",
    "stub_cpu_us_per_token",
    "ttft_err_ms",
    "itl_err_ms",
    "stub_ttft_late_ms",
    "stub_itl_err_ms",
    "summary_ttft_err_ms",
    "summary_ttft_n",
    "window_s",
)
NAMES = {"raw": "raw (ceiling)", "replay": "replay", "vllm": "vLLM bench serve", "inference-perf": "inference-perf"}


def brief(res: dict) -> str:
    """One line per run, for the progress log."""
    if "error" in res:
        return "FAILED " + res["error"].replace("\n", " | ")[:300]
    if res["mode"] == "timed":
        return f"TTFT {_ms(res.get('ttft_err_ms'))} ms, ITL {_ms(res.get('itl_err_ms'), 2)} ms ({res['wall_s']:.0f} s)"
    return (
        f"{_rate(res.get('tokens_per_s'))} tokens/s, {_num(res.get('cpu_us_per_token'))} µs/token, "
        f"{_num(res.get('cores'))} cores; {res['requests']} answers, window {_num(res.get('window_s'), 2)} s "
        f"({res['wall_s']:.0f} s)"
    )


def medians(runs: list[dict]) -> dict[str, dict[str, dict]]:
    """{cell: {client: {figure: median, "runs": n, "failed": n, "errors": [...]}}}."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in runs:
        groups[(r["cell"], r["client"])].append(r)
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for (cell, client), rs in groups.items():
        ok = [r for r in rs if "error" not in r]
        m: dict = {"runs": len(ok), "failed": len(rs) - len(ok), "errors": [r["error"] for r in rs if "error" in r]}
        for f in FIGURES:
            vals = [r[f] for r in ok if r.get(f) is not None]
            m[f] = statistics.median(vals) if vals else None
            if vals and len(vals) > 1:
                m[f + "_range"] = [min(vals), max(vals)]
        notes = sorted({r["note"] for r in ok if "note" in r})
        if notes:
            m["notes"] = notes
        out[cell][client] = m
    return dict(out)


def _num(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _ms(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:+.{digits}f}"


def _rate(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.0f}k"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or not b else f"{a / b:.2f}x"


def markdown(info: dict, clients: list[str], cells: list, med: dict, reps: int) -> str:
    peers = [c for c in clients if c not in ("raw", "replay")]
    lines = [
        f"Command: `{info['command']}`  ",
        f"Machine: {info['nproc']} CPUs ({info['cpu']}), {info['memory_gib']} GiB, {info['platform']}, "
        f"Python {info['python']}; replay {info['replay_commit']}; "
        + ", ".join(info["peers"].values())
        + f". Date: {info['date']}. Took {info['elapsed_s']} s. Medians of {reps} interleaved repetitions.",
    ]
    for peer, why in info.get("skipped", {}).items():
        lines.append(f"Not measured: {peer}: {why}.")
    thr = [c for c in cells if c.mode != "timed"]
    if thr:
        head = "| mode | streams | " + " | ".join(NAMES.get(c, c) for c in clients) + " |"
        lines += ["", "Stub-counted tokens/s, client CPU µs per token, client cores (steady window):", "", head]
        lines.append("|---|---:|" + "---:|" * len(clients))
        for c in thr:
            row = med.get(c.key, {})
            cols = []
            for client in clients:
                m = row.get(client)
                if not m or m["tokens_per_s"] is None:
                    cols.append("failed" if m and m["failed"] else "-")
                    continue
                cols.append(f"{_rate(m['tokens_per_s'])} · {_num(m['cpu_us_per_token'])} µs · {_num(m['cores'], 2)}")
            lines.append(f"| {c.mode} | {c.streams} | " + " | ".join(cols) + " |")
        lines += [
            "",
            "replay's tokens per client core against each peer's (the peer's CPU per token / replay's), "
            "and replay's tokens/s as a share of the raw ceiling's:",
            "",
        ]
        lines.append("| mode | streams | " + " | ".join(f"vs {NAMES.get(p, p)}" for p in peers) + " | of raw |")
        lines.append("|---|---:|" + "---:|" * (len(peers) + 1))
        for c in thr:
            row = med.get(c.key, {})
            mine = row.get("replay", {})
            cols = [_ratio((row.get(p) or {}).get("cpu_us_per_token"), mine.get("cpu_us_per_token")) for p in peers]
            raw = (row.get("raw") or {}).get("tokens_per_s")
            share = mine.get("tokens_per_s")
            cols.append("-" if not raw or share is None else f"{share / raw:.0%}")
            lines.append(f"| {c.mode} | {c.streams} | " + " | ".join(cols) + " |")
        stub = [
            (c.key, m.get("stub_cpu_us_per_token"))
            for c in thr
            if (m := med.get(c.key, {}).get("raw")) and m.get("stub_cpu_us_per_token") is not None
        ]
        if stub:
            lines += [
                "",
                "The stub's own CPU per token while the raw client ran: "
                + ", ".join(f"{k} {v:.2f} µs" for k, v in stub)
                + ".",
            ]
    timed = [c for c in cells if c.mode == "timed"]
    if timed:
        lines += [
            "",
            "Timing error against the injected truth (TTFT 200 ms, ITL 10 ms), each client's own mean "
            "over every request, ms (TTFT / ITL):",
            "",
        ]
        names = " | ".join(NAMES.get(c, c) for c in clients)
        lines.append(f"| streams | {names} | stub itself | replay summary (n) |")
        lines.append("|---:|" + "---:|" * (len(clients) + 2))
        for c in timed:
            row = med.get(c.key, {})
            cols = []
            for client in clients:
                m = row.get(client) or {}
                cols.append(f"{_ms(m.get('ttft_err_ms'))} / {_ms(m.get('itl_err_ms'), 2)}")
            anyone = next((m for m in row.values() if m.get("stub_ttft_late_ms") is not None), {})
            cols.append(f"{_ms(anyone.get('stub_ttft_late_ms'))} / {_ms(anyone.get('stub_itl_err_ms'), 2)}")
            mine = row.get("replay") or {}
            n = mine.get("summary_ttft_n")
            cols.append(f"{_ms(mine.get('summary_ttft_err_ms'))} ({'-' if n is None else int(n)} of {c.requests})")
            lines.append(f"| {c.streams} | " + " | ".join(cols) + " |")
    failed = [(cell, client, m["errors"]) for cell, row in med.items() for client, m in row.items() if m["failed"]]
    for cell, client, errors in failed:
        lines.append(f"\nFailed: {client} at {cell}: {errors[0][:300]}")
    return "\n".join(lines)
