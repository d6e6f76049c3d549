"""The terminal lines of a recipe run (AgentX or AA block, the validity verdict, what the methods leave out) and of
an open loop (backlog, latency from intended start). Each line fits 100 columns."""

from __future__ import annotations

from typing import Any

LATENCIES = ("ttft", "e2e", "itl")


def _ms(v: float | None) -> str:
    return "-" if v is None else (f"{v * 1000:,.1f} ms" if v < 1 else f"{v:,.2f} s")


def _n(v: float | None, fmt: str = ",.0f") -> str:
    return "-" if v is None else format(v, fmt)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def recipe_lines(s: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if s.get("agentx"):
        lines += _agentx(s["agentx"])
    if s.get("aa"):
        lines += _aa(s["aa"])
    if s.get("recipe"):
        lines += _validity(s)
        lines += _beside(s.get("beside") or {})
    ol = (s.get("intended") or {}).get("open_loop")
    if ol:
        lines += _open_loop(s["intended"], ol)
    return lines


def _agentx(ax: dict[str, Any]) -> list[str]:
    tp, itx = ax["throughput"], ax["interactivity"]
    per_gpu = (
        f" · {_n(tp['total_tps_per_gpu'])} per GPU ({tp['gpus']} GPUs)" if tp.get("gpus") else " (--gpus: per GPU)"
    )
    cache = ax["prefix_cache"]
    return [
        "",
        f"AgentX ({ax['requests']} calls measured, {ax['warmup_requests']} warm-up calls in no figure)",
        f"  throughput (input + output) / span {_n(tp['total_tps'])} tok/s{per_gpu}",
        "  " + "  ".join(f"{k} {_ms(ax[f'{k}_s']['p50'])} p50 / {_ms(ax[f'{k}_s']['p95'])} p95" for k in LATENCIES),
        f"  interactivity (1/ITL) p50 {_n(itx['p50'])} p75 {_n(itx['p75'])} p90 {_n(itx['p90'])} p95 {_n(itx['p95'])}"
        " tok/s",
        f"  prefix cache: theoretical hit {_pct(cache['theoretical_hit_ratio'])} · host hit"
        f" {_pct(cache['host_hit_ratio'])}",
    ]  # fmt: skip


def _aa(aa: dict[str, Any]) -> list[str]:
    ttfat = aa["time_to_first_answer_token_s"]
    lines = [
        "",
        f"AA-AgentPerf: {_n(aa['total_tokens_per_s'])} tok/s total incl. cached input ({_n(aa['total_tokens_per_min'])}"
        f"/min) · output speed p25 {_n(aa['output_speed_after_first_token_p25'], ',.1f')} tok/s · TTFAT p50"
        f" {_ms(ttfat.get('p50'))}",
    ]
    for t in aa["slo_tiers"]:
        per = f", {_n(t['agents_per_accelerator'], ',.2f')}/accelerator" if t["agents_per_accelerator"] else ""
        per += f", {_n(t['agents_per_mw'])}/MW" if t["agents_per_mw"] else ""
        met = f"met by {t['max_concurrent_agents']} agents{per}" if t["met"] else "not met"
        lines.append(f"  tier {t['name']:<8} TTFT <= {t['ttft_s']:g} s, speed >= {t['speed_tps']:g} tok/s: {met}")
    return lines


def _validity(s: dict[str, Any]) -> list[str]:
    if s.get("submission_valid"):
        lines = [f"  {s['recipe']} submission: valid"]
    else:
        lines = [f"  {s['recipe']} submission: INVALID"] + [f"    {r}" for r in s.get("invalid_reasons") or ()]
    return lines + _corpus(s.get("corpus"))


def _corpus(c: Any) -> list[str]:
    """Which corpus ran, and whether it is the one the run required (docs/recipes.md)."""
    if not isinstance(c, dict) or not c.get("fingerprint"):
        return []
    if c.get("matches") is None:
        return [f"  corpus: workload fingerprint {c['fingerprint']} (not checked: no --recipe-fingerprint)"]
    said = "the one required" if c["matches"] else f"not the one required ({c['required']})"
    return [f"  corpus: workload fingerprint {c['fingerprint']}, {said}"]


def _beside(b: dict[str, Any]) -> list[str]:
    if not b.get("tasks_whole"):
        return ["  beside it: no task replayed whole yet (the public methods report no per-task figure at all)"]
    split = b["wall_split"]
    cost = b.get("cost_per_task")
    save = (b.get("faster_host_saving") or {}).get("2x")
    return [
        f"  beside it, per task ({b['tasks_whole']} whole): model {_pct(split['model'])} · tools {_pct(split['tool'])}"
        f" · throttled {_pct(split['throttled'])} of {_ms(b['mean_wall_s'])}; a 2x faster host saves {_pct(save)}"
        + (f"; ${cost['mean']:.4f} per task" if cost else ""),
    ]


def _open_loop(intended: dict[str, Any], ol: dict[str, Any]) -> list[str]:
    q = " → ".join(_ms(v) for v in intended["ttft_from_intended_by_quarter_s"])
    lag = intended["start_lag_s"]
    waited = ol.get("never_started_wait_s")
    unseen = [f"  never started: had waited {_ms(waited['mean'])} on average, {_ms(waited['max'])} at most, by the stop"
              " (in no latency figure)"] if waited else []  # fmt: skip
    first, later = intended.get("first_call_ttft_s") or {}, intended.get("later_calls_ttft_s") or {}
    return [
        "",
        f"Open loop {ol['arrivals']}, at most {ol['max_live']} live sessions: {ol['arrived']} arrived,"
        f" {ol['never_started']} never started; backlog max {ol['backlog_max']}, mean {ol['backlog_mean']:.1f}",
        f"  TTFT from intended start, first calls (waited for a session): p50 {_ms(first.get('p50'))}, p95"
        f" {_ms(first.get('p95'))} (n={first.get('n', 0)} of {ol['arrived']} arrived; the"
        f" {ol['never_started']} never started are in no figure)",
        f"  TTFT from intended start, later calls: p50 {_ms(later.get('p50'))}, p95 {_ms(later.get('p95'))}"
        f" (n={later.get('n', 0)})",
        f"  TTFT from intended start by quarter of arrivals: {q}",
        f"  intended → actual start lag p50 {_ms(lag['p50'])}, p95 {_ms(lag['p95'])}",
        *unseen,
    ]
