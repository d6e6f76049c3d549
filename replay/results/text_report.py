"""Reports: the summary of ``replay.results.metrics`` for people (a terminal table) and machines (JSON)."""

from __future__ import annotations

from typing import Any

import orjson


def to_json(summary: dict[str, Any]) -> str:
    return orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def _s(v: float | None, unit: str = "s") -> str:
    if v is None:
        return "-"
    if unit == "s":
        return f"{v * 1000:,.1f} ms" if v < 1 else f"{v:,.2f} s"
    return f"{v:,.1f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _row(name: str, d: dict[str, Any], keys: tuple[str, ...], unit: str = "s") -> str:
    cells = "  ".join(f"{k} {_s(d.get(k), unit):>10}" for k in keys)
    return f"  {name:<28}{cells}   (n={d.get('n', 0)})"


def to_text(summary: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    """A compact, complete terminal report."""
    s = summary
    lines: list[str] = []
    if header:
        host = header.get("host", {})
        load = header.get("load", {})
        lines.append(
            f"replay {header.get('replay_version', '')} · host {host.get('base_url')} · model {host.get('model')}"
            f"{' (simulated, profile ' + header['simulated_host'] + ')' if header.get('simulated_host') else ''}"
        )
        lines.append(
            f"workload {header.get('workload', {}).get('trajectories')} trajectories · concurrency "
            f"{load.get('concurrency')} · tool time {load.get('tool_time')} · seed {load.get('seed')}"
        )
    w = s["window"]
    lines.append(
        f"requests {s['requests']} · errors {s['errors']}"
        + (f" {s['errors_by_class']}" if s["errors"] else "")
        + f" · steady window {s['window_s']:.1f} s (from {w['start_s']:.1f} s to {w['end_s']:.1f} s after start,"
        f" {w['requests']} requests sent in it)"
        + ("" if w["steady"] else "  [no steady state reached: figures cover the whole run]")
    )
    lines.append("")
    lines.append("Latency (requests sent in the window)")
    lines.append(_row("TTFT", s["ttft_s"], ("p50", "p95", "p99")))
    lines.append(_row("time to first answer token", s["ttfat_s"], ("p50", "p95", "p99")))
    lines.append(_row("end-to-end", s["e2e_s"], ("p50", "p95", "p99")))
    lines.append(_row("inter-token latency", s["itl_s"], ("p50", "p95", "p99")))
    lines.append(_row("per-user decode tok/s", s["user_decode_tps"], ("p25", "p50", "p75"), unit="tps"))
    lines.append(_row("per-user tok/s incl. wait", s["user_output_tps_incl_wait"], ("p25", "p50"), unit="tps"))
    t = s["throughput"]
    lines.append("")
    lines.append("Aggregate throughput over the steady window (tokens/s)")
    lines.append(
        f"  total {_rate(t['total_tps'])}  =  cached input {_rate(t['cached_input_tps'])}"
        f"  +  new input {_rate(t['new_input_tps'])}  +  output {_rate(t['output_tps'])}"
    )
    lines.append(
        f"  per minute: {_rate(t['total_tokens_per_min'])} tokens total, {_rate(t['output_tokens_per_min'])} output"
        + ("  (input from client estimates: host sent no usage)" if t.get("input_from_client_estimate") else "")
    )
    c = s["cache"]
    lines.append("")
    lines.append(
        f"Prompt cache: client reuse {_pct(c['client_reuse_ratio'])} of prompt is an exact prefix of the previous"
        f" request + output · host hit {_pct(c['host_hit_ratio'])}"
        + ("" if c["requests_with_cached_tokens"] else " (host reports no cached tokens)")
        + f" · efficiency {_pct(c['efficiency'])}"
    )
    k = s["tasks"]
    lines.append("")
    if k["count"]:
        proj = k["projected_wall_s"]
        save = k["projected_saving"]
        lines.append(
            f"Tasks: {k['count']} complete ({k['incomplete']} cut short) · mean wall {_s(k['wall_s'])} ="
            f" model {_s(k['model_time_s'])} + tools {_s(k['tool_time_s'])} · model share {_pct(k['model_share'])}"
        )
        lines.append(
            "  if the model were 2x faster: "
            f"{_s(proj['2x'])} per task ({_pct(save['2x'])} saved); 10x faster: {_s(proj['10x'])} ({_pct(save['10x'])})"
        )
        if k.get("subagents"):
            lines.append(
                f"  subagents: {k['subagents']} runs, {k['subagent_calls']} calls, mean"
                f" {_s(k['subagent_model_time_s'])} of their model time per task (inside the parents' waits)"
            )
    else:
        lines.append(f"Tasks: none complete ({k['incomplete']} cut short): run longer or use --tasks for task figures")
    tot = s["totals"]
    lines.append(
        f"Totals: {tot['requests']} requests, {tot['prompt_tokens']:,} prompt tokens ({tot['cached_tokens']:,} cached),"
        f" {tot['output_tokens']:,} output tokens"
    )
    cl = s["client"]
    if cl["saturated"]:
        lines.append(
            f"WARNING: the client itself was saturated (CPU {_pct(cl['cpu_share'])} of a core, event-loop lag p99"
            f" {_s(cl['loop_lag_p99_ms'], 'n')} ms): figures may understate the host. Use fewer sessions per process."
        )
    elif cl["cpu_share"] is not None:
        lines.append(
            f"Client: {_pct(cl['cpu_share'])} of one core, event-loop lag p99 {_s(cl['loop_lag_p99_ms'], 'n')} ms"
            " (not a bottleneck)"
        )
    wait = cl.get("send_wait_s") or {}
    if wait.get("n"):
        lines.append(
            f"  send wait (call begun to bytes on the wire, not in TTFT): p50 {_s(wait['p50'])}, p99 {_s(wait['p99'])}"
        )
    if s.get("truth"):
        lines += _truth_lines(s["truth"])
    return "\n".join(lines)


def _truth_lines(tr: dict[str, Any]) -> list[str]:
    """The client's figures against the simulated host's truth log (replay.results.truth_compare)."""

    def dev(name: str, d: dict[str, Any]) -> str:
        if not d.get("n"):
            return f"  {name:<28}-"
        return (
            f"  {name:<28}p50 {_s(d['p50']):>9}  p99 {_s(d['p99']):>9}  max {_s(d['max']):>9}"
            f"   (median client − host {_s(d['bias'])}, n={d['n']:,})"
        )

    q, pf = tr["host_queue_wait_s"], tr["host_prefill_s"]
    return [
        "",
        f"Against the host's truth log ({tr['matched']} of {tr['requests']} requests matched by id;"
        " how far the client's times are from the host's own)",
        dev("TTFT", tr["ttft_dev_s"]),
        dev("token times", tr["token_dev_s"]),
        dev("inter-token gaps", tr["itl_dev_s"]),
        f"  counts: output tokens equal in {tr['output_tokens_equal']} of {tr['ok_matched']}, cached tokens equal in"
        f" {tr['cached_tokens_equal']} of {tr['cached_tokens_reported']} reported",
        f"  host's TTFT split: queue wait p50 {_s(q['p50'])} p95 {_s(q['p95'])} · prefill p50 {_s(pf['p50'])}"
        f" p95 {_s(pf['p95'])} · preemptions {tr['host_preemptions']}",
    ]
